import Foundation

/// Runs blocking or CPU-heavy C work on a thread of its own, never on Swift's cooperative pool, and
/// lets async code wait for it without blocking a thread of the pool: the one bridge from the
/// engine's threads to `async` callers.
package enum DedicatedThread {
    /// Runs `body` on a new thread named `name` and returns its result.
    package static func run<Value: Sendable>(named name: String, _ body: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.name = name
            thread.start()
        }
    }

    /// Runs `body` on a new thread named `name`; its error is thrown here.
    package static func run<Value: Sendable, Failure: Error>(named name: String,
                                                              _ body: @escaping @Sendable () throws(Failure) -> Value) async throws(Failure) -> Value {
        let result: Result<Value, Failure> = await run(named: name) {
            do throws(Failure) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Runs each body on a thread of its own, all at once, and returns when every one has returned.
    package static func runAll(_ bodies: [(name: String, body: @Sendable () -> Void)]) async {
        await withTaskGroup(of: Void.self) { group in
            for (name, body) in bodies {
                group.addTask { await run(named: name, body) }
            }
        }
    }
}
