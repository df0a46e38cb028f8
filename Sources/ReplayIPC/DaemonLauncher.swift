import Foundation
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

    /// Makes sure replayd listens at `paths.socket`, starting `executable` when it does not.
    public static func ensureRunning(paths: ControlPaths, executable: String?, arguments: [String] = [],
                                     timeout: Duration = .seconds(5)) async throws(ReplayError) {
        if isListening(socketPath: paths.socket) { return }
        guard let executable else {
            throw ReplayError(.daemonUnavailable, "replayd is not running and no replayd executable was found beside this program. Start it yourself (`replayd &`, or `systemctl --user start replayd`).")
        }
        try paths.prepareDirectory()
        let pid = try spawn(executable, arguments: arguments, log: paths.logFile)
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var exited = false
        while clock.now < deadline {
            if isListening(socketPath: paths.socket) { return }
            var status: Int32 = 0
            if !exited, waitpid(pid, &status, WNOHANG) == pid {
                exited = true
                // Exit status 2: another replayd holds the lock (it won a race): wait for its socket.
                if isListening(socketPath: paths.socket) { return }
                if (status >> 8) & 0xff == 2 { continue }
                throw ReplayError(.daemonUnavailable, "replayd (\(executable)) exited at start\(lastLine(of: paths.logFile).map { ": \($0)" } ?? ""). Its log: \(paths.logFile).")
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        throw ReplayError(.daemonUnavailable, "replayd (pid \(pid)) did not open \(paths.socket) within \(timeout). Its log: \(paths.logFile).")
    }

    private static func spawn(_ executable: String, arguments: [String], log: String) throws(ReplayError) -> pid_t {
        try Spawn.start(executable, arguments: arguments, standardOutput: .file(log, append: true),
                        standardError: .standardOutput, group: .newSession)
    }

    private static func lastLine(of path: String) -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return text.split(separator: "\n").last.map(String.init)
    }
}
