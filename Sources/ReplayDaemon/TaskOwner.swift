import Synchronization

/// The owner of replayd's background work: every task replayd starts beside a request (a session's
/// run, an extension's watch and reaper, a focus change or a click heard on a C thread, the consent
/// prompt apps share) is a child of the one discarding task group that `run()` keeps, inside the
/// server's own group (swift-service-lifecycle's model: no unstructured task).
///
/// Actors and callbacks hand it work with `spawn`, through an `AsyncStream` that `run()` reads in
/// order. `shutdown()` ends the stream: the children still running are cancelled, and `run()`
/// returns once the last has ended, so that none outlives the server. Work handed in after that is
/// refused (`spawn` returns nil). `run()` is called once.
package final class TaskOwner: Sendable {
    private struct Child: Sendable {
        var task: OwnedTask
        var body: @Sendable () async -> Void
    }

    private let children: AsyncStream<Child>
    private let intake: AsyncStream<Child>.Continuation

    package init() {
        (children, intake) = AsyncStream.makeStream(of: Child.self)
    }

    /// Starts `body` as a child of `run()`'s group: its handle (to cancel it or await its end), or
    /// nil when the owner has shut down (then `body` never runs).
    @discardableResult
    package func spawn(_ body: @escaping @Sendable () async -> Void) -> OwnedTask? {
        let task = OwnedTask()
        guard case .enqueued = intake.yield(Child(task: task, body: body)) else { return nil }
        return task
    }

    /// Runs every child handed in until `shutdown()` (or the calling task is cancelled), then cancels
    /// the ones still running and returns when all have ended.
    package func run() async {
        await withDiscardingTaskGroup { group in
            // Ends at `shutdown()` once what was handed in before has started, or at cancellation.
            for await child in children {
                group.addTask { await child.task.run(child.body) }
            }
            // After a cancellation, later `spawn`s are refused rather than left waiting forever.
            intake.finish()
            group.cancelAll()
        }
    }

    /// Refuses new work and cancels the children; `run()` returns once they have ended.
    package func shutdown() {
        intake.finish()
    }
}

/// One child of a `TaskOwner`: `cancel()` ends it early (the owner's shutdown does too), `value()`
/// waits for its end.
package final class OwnedTask: Sendable {
    private let cancelled = OneShotSignal()
    private let ended = OneShotSignal()

    fileprivate init() {}

    /// Asks the task to end: it is cancelled (a sleeping watch wakes at once). Idempotent.
    package func cancel() {
        cancelled.fire()
    }

    /// Returns once the task has ended (whether it ran to its end, was cancelled or never ran).
    package func value() async {
        await ended.waitIgnoringCancellation()
    }

    package var hasEnded: Bool { ended.hasFired }

    /// Runs `body` beside a watch for `cancel()`: the first to end cancels the other.
    fileprivate func run(_ body: @escaping @Sendable () async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await body() }
            group.addTask { await self.cancelled.wait() }
            await group.next()
            group.cancelAll()
        }
        ended.fire()
    }
}

/// An event that happens once: `fire()` lets every `wait()` return, and a later `wait()` returns at
/// once. A cancelled `wait()` returns too (so that a wait can be raced against a timeout).
package final class OneShotSignal: Sendable {
    private struct State {
        var fired = false
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    package var hasFired: Bool { state.withLock { $0.fired } }

    /// Lets every waiter go (once; later calls do nothing). Cheap enough to call for every picture.
    package func fire() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.fired else { return [] }
            state.fired = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the signal has fired, or the calling task is cancelled.
    package func wait() async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Cancelled before the continuation was kept: the handler below found nothing to resume.
                let now = state.withLock { state in
                    if state.fired || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Returns once the signal has fired, cancelled or not (as `Task.value` does).
    package func waitIgnoringCancellation() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.fired { return true }
                state.nextWaiter += 1
                state.waiters[state.nextWaiter] = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }
}
