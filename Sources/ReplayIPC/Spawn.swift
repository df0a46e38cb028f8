import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starts a program with `posix_spawn`: standard input from a file (`/dev/null`), standard output
/// and error to files (never pipes, which a daemon it starts might inherit and hold open), in a new
/// session or process group, with default signal handling and an empty signal mask. The one spawn
/// of the project: `replay` starting replayd, replayd starting its helpers, the tests starting servers.
public enum Spawn {
    public enum Output: Sendable, Equatable {
        /// A file, created 0600 when missing; appended to or truncated.
        case file(String, append: Bool)
        /// Where standard output goes (for standard error).
        case standardOutput
    }

    public enum Group: Sendable, Equatable {
        /// The child leads a new session (`setsid`): a daemon, immune to its starter's terminal.
        case newSession
        /// The child leads a new process group: killed as a group, still in its starter's session.
        case newProcessGroup
    }

    /// Waits (blocking: call it off the cooperative pool) until child `pid` has left; waitpid's status.
    public static func waitForExit(_ pid: Int32) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }

    /// Starts `executable` (an absolute path) and returns its pid. `environment` nil passes ours.
    /// `descriptors` are handed to the child as its descriptors 3, 4, … (a socket to a helper, say);
    /// nothing else of ours is inherited (our descriptors are close-on-exec).
    public static func start(_ executable: String, arguments: [String] = [], environment: [String: String]? = nil,
                             standardInput: String = "/dev/null", standardOutput: Output, standardError: Output,
                             descriptors: [Int32] = [], group: Group) throws(ReplayError) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Through close-on-exec copies above any target number, so that each dup2 lands on a
        // different number (which clears close-on-exec in the child) and no copy leaks elsewhere.
        let copies = descriptors.map { fcntl($0, F_DUPFD_CLOEXEC, 64) }
        defer { for copy in copies where copy >= 0 { close(copy) } }
        guard !copies.contains(where: { $0 < 0 }) else {
            throw ReplayError(.internal, "cannot hand descriptors to \(executable): \(String(cString: strerror(errno)))")
        }
        posix_spawn_file_actions_addopen(&actions, 0, standardInput, O_RDONLY, 0)
        for (fd, output) in [(Int32(1), standardOutput), (2, standardError)] {
            switch output {
            case .file(let path, let append):
                posix_spawn_file_actions_addopen(&actions, fd, path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0o600)
            case .standardOutput:
                posix_spawn_file_actions_adddup2(&actions, 1, fd)
            }
        }
        for (index, copy) in copies.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, copy, Int32(3 + index))
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t(), allSignals = sigset_t()
        sigemptyset(&noSignals)
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        switch group {
        case .newSession:
            flags |= spawnSetSID
        case .newProcessGroup:
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = envp.map { posix_spawn(&pid, executable, &actions, &attributes, argv, $0) }
            ?? posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw ReplayError(.daemonUnavailable, "cannot start \(executable): \(String(cString: strerror(result))).")
        }
        return pid
    }

    /// The full path of `name` found in `PATH` (of `environment`, else ours), or nil.
    public static func executable(named name: String, environment: [String: String]? = nil) -> String? {
        let path = environment?["PATH"] ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    /// glibc's `POSIX_SPAWN_SETSID` (2.26+), hidden from Swift behind `__USE_GNU`.
    private static let spawnSetSID: Int32 = 0x80
}
