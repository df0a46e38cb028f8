package import ReplayIPC
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One replayd per user: an exclusive `flock` on `replayd.pid`, which holds our pid while we run.
/// A second replayd finds the lock taken and exits with a message naming the first.
package final class DaemonLock: Sendable {
    private let fd: Int32
    private let path: String

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    package static func acquire(paths: ControlPaths) throws(ReplayError) -> DaemonLock {
        let fd = open(paths.pidFile, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ReplayError(.permissionDenied, "cannot open \(paths.pidFile): \(String(cString: strerror(errno))).")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let other = (try? String(contentsOfFile: paths.pidFile, encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
            close(fd)
            throw ReplayError(.sessionActive, "replayd is already running (pid \(other), socket \(paths.socket)): use it (`replay status`), or stop it (`kill \(other)`) before starting another.")
        }
        let text = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        return DaemonLock(fd: fd, path: paths.pidFile)
    }

    deinit {
        unlink(path)
        close(fd)
    }
}
