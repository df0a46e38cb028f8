import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Hands a frame ring's descriptors (its memory, then its eventfd) to one app, once: replayd
/// listens on a socket of its own in its private folder (0700), which the app connects to after
/// replayd answered `appStartCapture` with its path. The control connection cannot carry them
/// (NIO's stream channels do not pass descriptors). Only the process that asked gets them: the
/// kernel's word on the connecting process (`SO_PEERCRED`) must name the app's pid.
public enum RingHandover {
    /// How long replayd waits for the app to come for its ring.
    public static let timeout: Duration = .seconds(10)

    /// Listens at `path` and, on a thread of its own, hands `descriptors` to the first connection
    /// whose process is `pid` (others are closed unanswered), then closes and removes the socket.
    /// `keepAlive` (the ring) is held until then, so that the descriptors stay open.
    /// Returns once listening; `finished` is called with the outcome on that thread.
    public static func offer(_ descriptors: [Int32], to pid: Int32, at path: String, keepAlive: some Sendable,
                             finished: @escaping @Sendable (Result<Void, ReplayError>) -> Void) throws(ReplayError) {
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw ReplayError(.internal, "cannot open a socket for the frame ring: \(String(cString: strerror(errno)))") }
        unlink(path)
        let bound = UnixAddress.with(path) { bind(listener, $0, $1) }
        guard bound == 0, listen(listener, 4) == 0 else {
            let reason = String(cString: strerror(errno))
            close(listener)
            throw ReplayError(.internal, "cannot listen at \(path) for the frame ring: \(reason)")
        }
        chmod(path, 0o600)
        let thread = Thread {
            defer {
                close(listener)
                unlink(path)
                withExtendedLifetime(keepAlive) {}
            }
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                let left = deadline - ContinuousClock.now
                var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
                guard poll(&poller, 1, milliseconds) > 0 else { continue }
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { continue }
                _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
                defer { close(connection) }
                guard PeerCredentials.of(descriptor: connection)?.pid == pid else { continue }
                do throws(ReplayError) {
                    try DescriptorPassing.send([1], descriptors: descriptors, over: connection)
                    finished(.success(()))
                } catch {
                    finished(.failure(error))
                }
                return
            }
            finished(.failure(ReplayError(.internal, "the app did not come for its frame ring within \(timeout)")))
        }
        thread.name = "ring-handover"
        thread.start()
    }

    /// `receive(from:)` on a thread of its own (it blocks until replayd offers, up to its timeout),
    /// for async callers: the app's capture and a broadcast extension.
    public static func receiveOffThePool(from path: String) async throws(ReplayError) -> (memory: Int32, signal: Int32) {
        let received: Result<(memory: Int32, signal: Int32), ReplayError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                do throws(ReplayError) {
                    continuation.resume(returning: .success(try receive(from: path)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            thread.name = "openreplaykit-ring-handover"
            thread.start()
        }
        return try received.get()
    }

    /// The app's side: connects to `path` and receives the ring's descriptors (memory, eventfd),
    /// now open in this process and the caller's. Blocks: call it off the cooperative pool.
    public static func receive(from path: String) throws(ReplayError) -> (memory: Int32, signal: Int32) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ReplayError(.internal, "cannot open a socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard UnixAddress.with(path, { connect(fd, $0, $1) }) == 0 else {
            throw ReplayError(.daemonUnavailable, "cannot reach replayd's frame ring at \(path): \(String(cString: strerror(errno)))")
        }
        let (_, descriptors) = try DescriptorPassing.receive(over: fd)
        guard descriptors.count == 2 else {
            descriptors.forEach { close($0) }
            throw ReplayError(.protocolMismatch, "replayd handed over \(descriptors.count) descriptors for the frame ring, not 2")
        }
        return (descriptors[0], descriptors[1])
    }
}

/// A Unix-domain socket address for `bind` and `connect`.
enum UnixAddress {
    /// Calls `body` with `path` as a `sockaddr_un` (-1 with ENAMETOOLONG when it does not fit).
    static func with(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            errno = ENAMETOOLONG
            return -1
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
