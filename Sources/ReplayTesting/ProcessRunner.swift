public import Foundation
import ReplayIPC
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An error of the harness itself: something a test needed could not be started or read.
public struct HarnessError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// How a process ended, with everything it printed.
public struct ProcessResult: Sendable, CustomStringConvertible {
    public var executable: String
    public var arguments: [String]
    /// The exit code, or the signal number when `terminatedBySignal`.
    public var status: Int32
    public var terminatedBySignal: Bool
    public var standardOutput: Data
    public var standardError: Data

    /// Standard output as UTF-8 text.
    public var stdout: String { String(decoding: standardOutput, as: UTF8.self) }
    /// Standard error as UTF-8 text.
    public var stderr: String { String(decoding: standardError, as: UTF8.self) }
    /// Exited by itself with status 0.
    public var succeeded: Bool { !terminatedBySignal && status == 0 }

    public var description: String {
        let how = terminatedBySignal ? "killed by signal \(status)" : "exit \(status)"
        return "`\(([executable] + arguments).joined(separator: " "))` → \(how)\n--- stdout ---\n\(stdout.prefix(4000))\n--- stderr ---\n\(stderr.prefix(4000))"
    }
}

/// A process running in the background, started with `posix_spawn` in its own process group, with
/// default signal handling and an empty signal mask. Its output goes to temporary files (never
/// pipes: a daemon it starts may inherit them), readable at any time; they are removed when the
/// handle goes. Its exit is collected with `waitpid` (no SIGCHLD machinery to miss it).
///
public final class BackgroundProcess: Sendable {
    public let executable: String
    public let arguments: [String]
    public let pid: Int32
    private let exitStatus = Mutex<Int32?>(nil)
    private let outputURL: URL
    private let errorURL: URL
    private let directory: URL

    /// Starts `executable` (a path, or a name looked up in `PATH`). `environment` nil inherits ours.
    /// `descriptors` become the child's 3, 4, … (the end of a socket pair, say). `standardInput`: a file
    /// it reads as its standard input.
    public init(_ executable: String, arguments: [String] = [], environment: [String: String]? = nil,
                workingDirectory: String? = nil, standardInput: String = "/dev/null", descriptors: [Int32] = []) throws {
        let path = try ProcessRunner.resolve(executable, environment: environment)
        directory = try makeTemporaryDirectory(prefix: "ork-proc")
        outputURL = directory.appendingPathComponent("stdout")
        errorURL = directory.appendingPathComponent("stderr")
        self.executable = path
        self.arguments = arguments

        let environment = environment ?? ProcessInfo.processInfo.environment
        // A working directory through `env --chdir` (posix_spawn's chdir action is a GNU extension
        // the Swift Glibc module does not show).
        let command = workingDirectory.map { ["/usr/bin/env", "--chdir=\($0)", path] } ?? [path]
        let child: pid_t
        do throws(ReplayError) {
            child = try Spawn.start(command[0], arguments: Array(command.dropFirst()) + arguments, environment: environment,
                                    standardInput: standardInput, standardOutput: .file(outputURL.path, append: false),
                                    standardError: .file(errorURL.path, append: false), descriptors: descriptors,
                                    group: .newProcessGroup)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw HarnessError("cannot start \(path): \(error.message)")
        }
        pid = child
    }

    deinit {
        if exitStatus.withLock({ $0 }) == nil {
            Glibc.kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Collects the exit status if it has exited.
    private func poll() -> Int32? {
        exitStatus.withLock { exitStatus in
            if let exitStatus { return exitStatus }
            var status: Int32 = 0
            let rc = waitpid(pid, &status, WNOHANG)
            if rc == pid { exitStatus = status }
            return exitStatus
        }
    }

    public var isRunning: Bool { poll() == nil }

    /// Sends a signal (`SIGTERM`, `SIGINT`, `SIGKILL`, …) to the process (not to its group).
    public func signal(_ signal: Int32) {
        guard poll() == nil else { return }
        _ = Glibc.kill(pid, signal)
    }

    /// What it has written to standard output so far.
    public var currentOutput: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }
    /// Its standard output so far, as bytes.
    public var currentOutputData: Data { (try? Data(contentsOf: outputURL)) ?? Data() }
    /// How many bytes it has written to standard output so far.
    public var currentOutputByteCount: Int {
        ((try? FileManager.default.attributesOfItem(atPath: outputURL.path))?[.size] as? NSNumber)?.intValue ?? 0
    }
    /// What it has written to standard error so far.
    public var currentError: String { (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "" }

    /// The result once it has exited, nil while it runs.
    public var result: ProcessResult? {
        guard let status = poll() else { return nil }
        let signalled = (status & 0x7f) != 0
        return ProcessResult(executable: executable, arguments: arguments,
                             status: signalled ? status & 0x7f : (status >> 8) & 0xff,
                             terminatedBySignal: signalled,
                             standardOutput: (try? Data(contentsOf: outputURL)) ?? Data(),
                             standardError: (try? Data(contentsOf: errorURL)) ?? Data())
    }

    /// Waits until it exits; throws when `timeout` passes first (the process is left running).
    public func waitForExit(timeout: Duration) async throws -> ProcessResult {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let result { return result }
            if ContinuousClock.now >= deadline {
                throw HarnessError("`\(([executable] + arguments).joined(separator: " "))` still runs after \(timeout)\nstderr so far:\n\(currentError.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits from synchronous code (a `defer`, a blocking helper), blocking the calling thread at most
    /// `timeout` seconds; nil when it still runs then.
    public func blockingWait(timeout: Double) -> ProcessResult? {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while true {
            if let result { return result }
            if ContinuousClock.now >= deadline { return nil }
            usleep(20_000)
        }
    }

    /// Ends it from synchronous code: `first` (`SIGTERM`, or `SIGINT` for a program that then finishes its
    /// file), then `SIGKILL` after `grace` seconds. Blocks at most `grace` + 5 s; returns how it ended.
    @discardableResult
    public func blockingTerminate(signal first: Int32 = SIGTERM, grace: Double = 3) -> ProcessResult? {
        if let result { return result }
        signal(first)
        if let result = blockingWait(timeout: grace) { return result }
        signal(SIGKILL)
        return blockingWait(timeout: 5)
    }

    /// Ends it: `SIGTERM`, then `SIGKILL` after `grace`. Never throws; returns how it ended.
    @discardableResult
    public func terminate(grace: Duration = .seconds(3)) async -> ProcessResult? {
        if let result { return result }
        signal(SIGTERM)
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline {
            if let result { return result }
            try? await Task.sleep(for: .milliseconds(20))
        }
        signal(SIGKILL)
        for _ in 0..<250 {
            if let result { return result }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }
}

/// Runs programs to completion.
public enum ProcessRunner {
    /// Runs `executable` with `arguments` and returns its exit status and output. When it runs longer
    /// than `timeout` it is killed and this throws (with what it printed).
    public static func run(_ executable: String, arguments: [String] = [], environment: [String: String]? = nil,
                           workingDirectory: String? = nil, timeout: Duration = .seconds(60)) async throws -> ProcessResult {
        let process = try BackgroundProcess(executable, arguments: arguments, environment: environment,
                                            workingDirectory: workingDirectory)
        do {
            return try await process.waitForExit(timeout: timeout)
        } catch {
            await process.terminate(grace: .milliseconds(500))
            throw error
        }
    }

    /// The same, blocking the calling thread: for synchronous tests. Prefer the async form.
    public static func run(_ executable: String, arguments: [String] = [], environment: [String: String]? = nil,
                           workingDirectory: String? = nil, timeout: Duration = .seconds(60)) throws -> ProcessResult {
        let process = try BackgroundProcess(executable, arguments: arguments, environment: environment,
                                            workingDirectory: workingDirectory)
        let deadline = ContinuousClock.now + timeout
        while true {
            if let result = process.result { return result }
            if ContinuousClock.now >= deadline {
                process.signal(SIGKILL)
                throw HarnessError("`\(([executable] + arguments).joined(separator: " "))` still runs after \(timeout)\nstderr so far:\n\(process.currentError.suffix(2000))")
            }
            usleep(5_000)
        }
    }

    /// The full path of `executable`: itself when it has a slash, else found in `PATH`.
    public static func resolve(_ executable: String, environment: [String: String]? = nil) throws -> String {
        if executable.contains("/") {
            guard FileManager.default.isExecutableFile(atPath: executable) else {
                throw HarnessError("no executable at \(executable)")
            }
            return executable
        }
        if let found = Spawn.executable(named: executable, environment: environment) { return found }
        throw HarnessError("\(executable) is not installed (not in PATH); run `make bootstrap`")
    }
}

/// A new private directory (mode 0700) under the system temporary directory.
public func makeTemporaryDirectory(prefix: String) throws -> URL {
    let base = NSTemporaryDirectory().hasSuffix("/") ? NSTemporaryDirectory() : NSTemporaryDirectory() + "/"
    var template = Array("\(base)\(prefix).XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { buffer in
        mkdtemp(buffer.baseAddress!).map { String(validatingCString: $0) } ?? nil
    }
    guard let made else { throw HarnessError("cannot create a temporary directory: errno \(errno)") }
    return URL(fileURLWithPath: made)
}

/// Processes on this machine, read from `/proc`.
public enum ProcessTable {
    /// Pids of live (not zombie) processes whose initial environment has `name=value`.
    public static func pids(withEnvironment name: String, equalTo value: String) -> [Int32] {
        let needle = Array("\(name)=\(value)".utf8)
        let me = getpid()
        var found: [Int32] = []
        for pid in allPIDs() where pid != me {
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { continue }
            let entries = data.split(separator: 0, omittingEmptySubsequences: true)
            if entries.contains(where: { Array($0) == needle }) && isAlive(pid) { found.append(pid) }
        }
        return found
    }

    /// Pids whose command name (`/proc/PID/comm`) is `name`.
    public static func pids(named name: String) -> [Int32] {
        allPIDs().filter { pid in
            (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) == name && isAlive(pid)
        }
    }

    /// True while the process exists and is not a zombie.
    public static func isAlive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        // The state follows the parenthesised command name.
        guard let close = stat.lastIndex(of: ")") else { return false }
        let rest = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces)
        return !(rest.hasPrefix("Z") || rest.hasPrefix("X"))
    }

    /// Sends `SIGTERM` to each, then `SIGKILL` to those still alive after `grace`; waits until gone.
    public static func terminate(_ pids: [Int32], grace: Duration = .seconds(3)) async {
        let pids = pids.filter { $0 > 1 && $0 != getpid() }
        guard !pids.isEmpty else { return }
        for pid in pids { kill(pid, SIGTERM) }
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline, pids.contains(where: isAlive) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for pid in pids where isAlive(pid) { kill(pid, SIGKILL) }
        for _ in 0..<100 where pids.contains(where: isAlive) {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    private static func allPIDs() -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
    }
}

/// Seconds on `CLOCK_MONOTONIC`, the clock `replay-testcontent` times its frames and tones on.
public enum MonotonicTime {
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
