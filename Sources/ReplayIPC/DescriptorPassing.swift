import CSocketShim
#if canImport(Glibc)
import Glibc
#endif

/// Hands open file descriptors to another process over a connected Unix socket (`SCM_RIGHTS`):
/// how replayd gives an app or an extension the shared memory of a frame ring once, after which
/// frames travel without a copy per delivery. NIO's stream channels cannot carry descriptors, so
/// this speaks to a plain socket descriptor; it blocks, so call it off the cooperative pool.
public enum DescriptorPassing {
    /// Most descriptors one message carries.
    public static let maximumDescriptors = Int(ORK_MAX_FDS)

    /// Sends `bytes` (at least one) with `descriptors` (the receiver gets its own copies; ours stay open).
    public static func send(_ bytes: [UInt8], descriptors: [Int32], over socket: Int32) throws(ReplayError) {
        guard !bytes.isEmpty, descriptors.count <= maximumDescriptors else {
            throw ReplayError(.badRequest, "a descriptor message carries 1 or more bytes and at most \(maximumDescriptors) descriptors")
        }
        let sent = bytes.withUnsafeBytes { raw in
            descriptors.withUnsafeBufferPointer { fds in
                ork_send_fds(socket, raw.baseAddress, raw.count, fds.baseAddress, Int32(fds.count))
            }
        }
        guard sent == bytes.count else {
            throw ReplayError(.daemonUnavailable, sent < 0
                ? "cannot pass descriptors: \(String(cString: strerror(Int32(-sent))))"
                : "cannot pass descriptors: only \(sent) of \(bytes.count) bytes went out")
        }
    }

    /// Receives one message: its bytes (empty at end of stream) and the descriptors it carried, now
    /// open in this process (close-on-exec) and the caller's to close.
    public static func receive(over socket: Int32, maximumBytes: Int = 4096) throws(ReplayError) -> (bytes: [UInt8], descriptors: [Int32]) {
        var bytes = [UInt8](repeating: 0, count: max(1, maximumBytes))
        var fds = [Int32](repeating: -1, count: maximumDescriptors)
        var count: Int32 = 0
        let received = bytes.withUnsafeMutableBytes { raw in
            fds.withUnsafeMutableBufferPointer { fds in
                ork_receive_fds(socket, raw.baseAddress, raw.count, fds.baseAddress, Int32(fds.count), &count)
            }
        }
        let descriptors = Array(fds.prefix(Int(count)))
        guard received >= 0 else {
            for fd in descriptors { close(fd) }
            throw ReplayError(.badRequest, "cannot receive descriptors: \(String(cString: strerror(Int32(-received))))")
        }
        return (Array(bytes.prefix(received)), descriptors)
    }
}

/// An anonymous shared-memory file (memfd) mapped into this process: the memory of a frame ring.
/// Its size is sealed, so that a peer it is handed to can map it without fearing that it shrinks.
/// Owns the descriptor and the mapping; both are released in `deinit`.
///
/// `@unchecked Sendable`: the descriptor, size and base address never change after `init`; what
/// is written into the memory is the ring's business (it synchronises its readers and writers).
public final class SharedMemory: @unchecked Sendable {
    public let descriptor: Int32
    public let size: Int
    public let baseAddress: UnsafeMutableRawPointer

    /// Creates `size` bytes of shared memory, zeroed, named `name` in /proc (for debugging only).
    public init(name: String, size: Int) throws(ReplayError) {
        let fd = ork_memfd_create(name, size)
        guard fd >= 0 else {
            throw ReplayError(.internal, "cannot create \(size) bytes of shared memory: \(String(cString: strerror(-fd)))")
        }
        let sealed = ork_memfd_seal_size(fd)
        guard sealed == 0 else {
            close(fd)
            throw ReplayError(.internal, "cannot seal the shared memory's size: \(String(cString: strerror(-sealed)))")
        }
        descriptor = fd
        self.size = size
        baseAddress = try Self.map(fd, size: size, writable: true, code: .internal)
    }

    /// Maps shared memory received from a peer (the descriptor becomes this object's, and is
    /// closed with it). Its size is what the file says, not what the peer claims.
    public init(adopting fd: Int32, writable: Bool = false) throws(ReplayError) {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size > 0 else {
            close(fd)
            throw ReplayError(.badRequest, "the descriptor received is not shared memory")
        }
        descriptor = fd
        size = Int(info.st_size)
        baseAddress = try Self.map(fd, size: size, writable: writable, code: .badRequest)
    }

    /// Maps `size` bytes of `fd`, shared; closes `fd` when it cannot.
    private static func map(_ fd: Int32, size: Int, writable: Bool, code: ReplayError.Code) throws(ReplayError) -> UnsafeMutableRawPointer {
        guard let base = mmap(nil, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0), base != MAP_FAILED else {
            let error = errno
            close(fd)
            throw ReplayError(code, "cannot map the shared memory: \(String(cString: strerror(error)))")
        }
        return base
    }

    deinit {
        munmap(baseAddress, size)
        close(descriptor)
    }
}
