import CSocketShim
import Foundation
import ReplaySystem
#if canImport(Glibc)
import Glibc
#endif

/// Starts replayd on demand: when nobody listens on the socket, spawn the daemon executable in a
/// session of its own (setsid), stdin from /dev/null, stdout and stderr appended to its log, and
/// wait for the socket to answer.
public enum DaemonLauncher {
    /// True when something listens on `socketPath` now. Never blocks: a listener whose queue is full
    /// (it is busy, or its accepting task waits for the thread this runs on) counts as listening
    /// without waiting for it, so callers polling from the cooperative pool cannot starve the server
    /// they wait for.
    public static func isListening(socketPath: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return UnixAddress.with(socketPath) { connect(fd, $0, $1) } == 0 || errno == EAGAIN
    }

    /// The executable `name` (replayd, replay-ui) beside the running one (resolved through /proc/self/exe), or nil.
    public static func besideCurrentExecutable(named name: String = "replayd") -> String? {
        guard let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        let candidate = (me as NSString).deletingLastPathComponent + "/" + name
        return access(candidate, X_OK) == 0 ? candidate : nil
    }

    /// Makes sure replayd listens at `paths.socket`, starting `executable` when it does not. replayd
    /// says "listening" on a pipe it inherits (`--ready-fd 3`) once its socket answers: no polling.
    public static func ensureRunning(paths: ControlPaths, executable: String?, arguments: [String] = [],
                                     timeout: Duration = .seconds(5)) async throws(ReplayError) {
        if isListening(socketPath: paths.socket) { return }
        guard let executable else {
            throw ReplayError(.daemonUnavailable, "replayd is not running and no replayd executable was found beside this program. Start it yourself (`replayd &`, or `systemctl --user start replayd`).")
        }
        try paths.prepareDirectory()
        var ends: [Int32] = [-1, -1]
        let made = ork_pipe_cloexec(&ends)
        guard made == 0 else {
            throw ReplayError(.internal, "cannot start replayd: no pipe: \(String(cString: strerror(-made))).")
        }
        let pid: pid_t
        do {
            defer { close(ends[1]) }
            pid = try Spawn.start(executable, arguments: arguments + ["--ready-fd", "3"], standardOutput: .file(paths.logFile, append: true),
                                  standardError: .standardOutput, descriptors: [ends[1]], group: .newSession)
        } catch {
            close(ends[0])
            throw error
        }
        let readEnd = ends[0]
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        // The wait blocks in poll(2): on a thread of its own.
        let said = await DedicatedThread.run(named: "replayd-ready") { () -> String in
            defer { close(readEnd) }
            var descriptor = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, milliseconds) > 0 else { return "" }
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = read(readEnd, &buffer, buffer.count)
            return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : "ended"
        }
        if said.hasPrefix("listening") { return }
        if said == "ended" {
            // It left without listening. Exit status 2: another replayd holds the lock (it won a race).
            var status: Int32 = 0
            if waitpid(pid, &status, 0) == pid, (status >> 8) & 0xff == 2 {
                try await waitForSocket(paths.socket, timeout: timeout)
                return
            }
            throw ReplayError(.daemonUnavailable, "replayd (\(executable)) exited at start\(lastLine(of: paths.logFile).map { ": \($0)" } ?? ""). Its log: \(paths.logFile).")
        }
        throw ReplayError(.daemonUnavailable, "replayd (pid \(pid)) did not open \(paths.socket) within \(timeout). Its log: \(paths.logFile).")
    }

    /// The socket of a replayd that another client started: it has no pipe to us, so we look.
    private static func waitForSocket(_ socket: String, timeout: Duration) async throws(ReplayError) {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if isListening(socketPath: socket) { return }
            try? await Task.sleep(for: .milliseconds(50))
        }
        throw ReplayError(.daemonUnavailable, "another replayd is starting but did not open \(socket) within \(timeout).")
    }

    private static func lastLine(of path: String) -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return text.split(separator: "\n").last.map(String.init)
    }
}
