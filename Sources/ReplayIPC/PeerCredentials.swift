package import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a Unix socket, as the kernel says (SO_PEERCRED): not what the peer
/// claims in its hello.
package struct PeerCredentials: Sendable, Equatable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32

    /// The layout of Linux's `struct ucred` (socket(7): pid_t pid; uid_t uid; gid_t gid), which
    /// Glibc hides from Swift behind `_GNU_SOURCE`. getsockopt fills exactly these 12 bytes.
    private struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// Reads the credentials of a connected Unix-domain socket channel. On the channel's event
    /// loop (as in a child channel initializer) the future is complete at once.
    package static func of(_ channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(PeerCredentialsError())
        }
        precondition(MemoryLayout<UCred>.size == 12)
        let ucred: EventLoopFuture<UCred> = provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET),
                                                                          name: SocketOptionName(SO_PEERCRED))
        return ucred.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
    }

    /// Reads the credentials of a connected Unix-domain socket descriptor (a plain socket, as the
    /// frame ring's handover uses), or nil.
    package static func of(descriptor socket: Int32) -> PeerCredentials? {
        var ucred = UCred()
        var length = socklen_t(MemoryLayout<UCred>.size)
        guard getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &ucred, &length) == 0, length == MemoryLayout<UCred>.size else { return nil }
        return PeerCredentials(pid: ucred.pid, uid: ucred.uid, gid: ucred.gid)
    }
}

package struct PeerCredentialsError: Error, CustomStringConvertible {
    package var description: String { "the channel is not a socket: no peer credentials" }
}
