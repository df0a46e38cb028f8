import Foundation
public import Logging
#if canImport(Glibc)
import Glibc
#endif

/// One process a private desktop session (``GnomeSession``, ``SwaySession``) started, with a name
/// for messages, and what such sessions share to stop their processes and report on them.
struct RigDaemon: Sendable {
    var name: String
    var process: BackgroundProcess

    /// Its standard error then standard output.
    var log: String { process.currentError + process.currentOutput }

    /// Stops `clients`, then `daemons` in order (each one's whole process group: the services a
    /// session bus activated are in its group), then any process left with `runtime` as its
    /// `XDG_RUNTIME_DIR` (a replayd that `replay` started, an accessibility bus a GTK window started).
    static func stop(_ daemons: [RigDaemon], clients: [BackgroundProcess], runtime: URL, label: String, logger: Logger) async {
        for client in clients { await terminateGroup(of: client) }
        for daemon in daemons { await terminateGroup(of: daemon.process) }
        let left = ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: runtime.path)
        if !left.isEmpty {
            logger.debug("\(label): stopping processes left", metadata: ["pids": "\(left)"])
            await ProcessTable.terminate(left, grace: .seconds(3))
        }
        let still = ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: runtime.path)
        if !still.isEmpty { logger.warning("\(label): processes outlived the tear-down", metadata: ["pids": "\(still)"]) }
    }

    /// `SIGTERM` to the process's group, `SIGKILL` to what is left of it after `grace`; collects the leader.
    static func terminateGroup(of process: BackgroundProcess, grace: Duration = .seconds(3)) async {
        let group = process.pid
        if !ProcessGroup.members(group).isEmpty {
            kill(-group, SIGTERM)
            let deadline = ContinuousClock.now + grace
            while ContinuousClock.now < deadline, !ProcessGroup.members(group).isEmpty {
                try? await Task.sleep(for: .milliseconds(50))
            }
            if !ProcessGroup.members(group).isEmpty {
                kill(-group, SIGKILL)
                for _ in 0..<100 where !ProcessGroup.members(group).isEmpty {
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
        }
        await process.terminate(grace: .milliseconds(200))
    }

    /// The end of each daemon's log, the one named `first` (the compositor: it explains most
    /// failures) first.
    static func tails(of daemons: [RigDaemon], lines: Int, first: String) -> String {
        let ordered = daemons.filter { $0.name == first } + daemons.filter { $0.name != first }
        return ordered.map { daemon in
            let tail = daemon.log.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
            let state = daemon.process.result.map { "exited: \($0.terminatedBySignal ? "signal" : "status") \($0.status)" } ?? "running"
            return "--- \(daemon.name) (pid \(daemon.process.pid), \(state)), last \(lines) lines ---\n\(tail)"
        }.joined(separator: "\n")
    }

    /// With `ORK_KEEP_RECORDINGS=DIR`: moves the recordings in `outputs`, with replayd's log and
    /// the daemons' logs, to a folder in DIR named as `directory`.
    static func keepRecordings(from outputs: URL, runtime: URL, daemons: [RigDaemon], directory: URL, logger: Logger) {
        guard let keep = ProcessInfo.processInfo.environment["ORK_KEEP_RECORDINGS"], !keep.isEmpty,
              let recordings = try? FileManager.default.contentsOfDirectory(atPath: outputs.path), !recordings.isEmpty else { return }
        let logs = outputs.appendingPathComponent("logs")
        try? FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        try? FileManager.default.copyItem(at: runtime.appendingPathComponent("openreplaykit/replayd.log"),
                                          to: logs.appendingPathComponent("replayd.log"))
        for daemon in daemons {
            try? daemon.log.write(to: logs.appendingPathComponent("\(daemon.name).log"), atomically: true, encoding: .utf8)
        }
        let kept = URL(fileURLWithPath: keep).appendingPathComponent(directory.lastPathComponent)
        try? FileManager.default.createDirectory(at: kept.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? FileManager.default.moveItem(at: outputs, to: kept)
        logger.info("recordings kept", metadata: ["folder": "\(kept.path)"])
    }

    /// "12.3 s" since `start`.
    static func seconds(since start: ContinuousClock.Instant) -> String {
        let elapsed = (ContinuousClock.now - start).components
        return String(format: "%.1f s", Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)
    }
}

/// The members of a process group, read from `/proc`.
enum ProcessGroup {
    /// Live (not zombie) processes whose process group is `group`.
    static func members(_ group: Int32) -> [Int32] {
        let pids = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
        return pids.filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            // After the command name: state, ppid, pgrp.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, let pgrp = Int32(fields[2]) else { return false }
            return pgrp == group && !(fields[0] == "Z" || fields[0] == "X")
        }
    }
}

/// A private desktop session a test starts and always tears down (``GnomeSession``, ``SwaySession``).
public protocol DesktopRig: Sendable {
    associatedtype Configuration: Sendable
    static func start(_ configuration: Configuration, logger: Logger) async throws -> Self
    func tearDown() async
}

extension DesktopRig {
    /// Starts a session, runs `body` with it and tears it down, also when `body` throws.
    public static func with<T: Sendable>(_ configuration: Configuration, logger: Logger = .harness,
                                         _ body: (Self) async throws -> T) async throws -> T {
        let session = try await start(configuration, logger: logger)
        do {
            let result = try await body(session)
            await session.tearDown()
            return result
        } catch {
            await session.tearDown()
            throw error
        }
    }
}
