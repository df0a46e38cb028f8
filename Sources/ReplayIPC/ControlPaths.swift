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

    /// Creates the folder (mode 0700) when missing, and checks that it is a folder of ours that
    /// nobody else can enter: anything else could be a trap laid by another user in /tmp.
    public func prepareDirectory() throws(ReplayError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            let reason = String(cString: strerror(errno))
            throw ReplayError(.permissionDenied, "cannot create \(directory): \(reason). Check that its parent exists and is writable, or set XDG_RUNTIME_DIR.")
        }
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            throw ReplayError(.permissionDenied, "cannot read \(directory): \(String(cString: strerror(errno))).")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw ReplayError(.permissionDenied, "\(directory) is not a folder. Remove it, or set XDG_RUNTIME_DIR.")
        }
        guard info.st_uid == getuid() else {
            throw ReplayError(.permissionDenied, "\(directory) belongs to uid \(info.st_uid), not to you (uid \(getuid())): someone else made it. Remove it, or set XDG_RUNTIME_DIR.")
        }
        if info.st_mode & 0o077 != 0 {
            guard chmod(directory, 0o700) == 0 else {
                throw ReplayError(.permissionDenied, "\(directory) is open to other users and cannot be made private: \(String(cString: strerror(errno))).")
            }
        }
    }
}
