import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where replayd's socket, pid file and log live: `$XDG_RUNTIME_DIR/openreplaykit/` (mode 0700),
/// or `/tmp/openreplaykit-UID` (0700, owned by us: checked) when `XDG_RUNTIME_DIR` is unset.
public struct ControlPaths: Sendable, Equatable {
    public var directory: String
    public var socket: String { directory + "/replayd.sock" }
    public var pidFile: String { directory + "/replayd.pid" }
    public var logFile: String { directory + "/replayd.log" }

    public init(directory: String) {
        self.directory = directory
    }

    /// The folder for this user, from the environment (not created).
    public static func forCurrentUser(environment: [String: String]? = nil) -> ControlPaths {
        let environment = environment ?? ProcessInfo.processInfo.environment
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return ControlPaths(directory: runtime + "/openreplaykit")
        }
        return ControlPaths(directory: "/tmp/openreplaykit-\(getuid())")
    }

    /// Checks, without changing anything, that the folder holding `socketPath` is a real folder (not
    /// a symbolic link) of ours that nobody else can enter, and that the socket in it is ours: a client
    /// must not talk to a replayd another user planted (it would hear our passwords and file names).
    public static func checkPrivate(socketPath: String) throws(ReplayError) {
        let directory = (socketPath as NSString).deletingLastPathComponent
        let refusal = "replay will not talk to a replayd found there"
        guard let mode = try ours(directory, refusal: refusal) else {
            throw ReplayError(.daemonUnavailable, "cannot reach replayd: \(directory): \(String(cString: strerror(errno))). Is it running? `replay record` starts it.")
        }
        guard mode & 0o077 == 0 else {
            throw ReplayError(.permissionDenied, "\(directory) is open to other users (mode \(String(mode & 0o777, radix: 8))): \(refusal). `chmod 700 \(directory)`, then try again.")
        }
        var info = stat()
        if lstat(socketPath, &info) == 0, info.st_uid != getuid() {
            throw ReplayError(.permissionDenied, "\(socketPath) belongs to uid \(info.st_uid), not to you (uid \(getuid())): replay will not talk to it. Remove it, then try again.")
        }
    }

    /// Creates the folder (mode 0700) when missing, and checks that it is a folder of ours that
    /// nobody else can enter: anything else could be a trap laid by another user in /tmp.
    public func prepareDirectory() throws(ReplayError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            let reason = String(cString: strerror(errno))
            throw ReplayError(.permissionDenied, "cannot create \(directory): \(reason). Check that its parent exists and is writable, or set XDG_RUNTIME_DIR.")
        }
        guard let mode = try Self.ours(directory, refusal: "replayd will not use it") else {
            throw ReplayError(.permissionDenied, "cannot read \(directory): \(String(cString: strerror(errno))).")
        }
        if mode & 0o077 != 0 {
            guard chmod(directory, 0o700) == 0 else {
                throw ReplayError(.permissionDenied, "\(directory) is open to other users and cannot be made private: \(String(cString: strerror(errno))).")
            }
        }
    }

    /// `directory`'s mode when it is a real folder (not a link) owned by us; nil when it cannot be
    /// read (errno says why); a folder someone else made, or a link, is refused.
    private static func ours(_ directory: String, refusal: String) throws(ReplayError) -> mode_t? {
        var info = stat()
        guard lstat(directory, &info) == 0 else { return nil }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw ReplayError(.permissionDenied, "\(directory) is not a folder (a link or a file someone put there): \(refusal). Remove it, or set XDG_RUNTIME_DIR.")
        }
        guard info.st_uid == getuid() else {
            throw ReplayError(.permissionDenied, "\(directory) belongs to uid \(info.st_uid), not to you (uid \(getuid())): someone else made it, and \(refusal). Remove it, or set XDG_RUNTIME_DIR.")
        }
        return info.st_mode
    }
}
