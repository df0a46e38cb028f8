import Testing
@testable import ReplayIPC
#if canImport(Glibc)
import Glibc
#endif

@Suite("File descriptors over a Unix socket (SCM_RIGHTS) and shared memory")
struct DescriptorPassingTests {
    /// A connected pair of Unix stream sockets, closed after `body`.
    func withSocketPair(_ body: (Int32, Int32) throws -> Void) throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        try body(pair[0], pair[1])
    }

    /// The memory handed over once is the same memory: what one side writes after the hand-over,
    /// the other reads, with no copy per delivery.
    @Test func sharedMemoryHandedOverOnceIsShared() throws {
        try withSocketPair { a, b in
            let ring = try SharedMemory(name: "test-ring", size: 1 << 20)
            try DescriptorPassing.send(Array("ring".utf8), descriptors: [ring.descriptor], over: a)
            let (bytes, descriptors) = try DescriptorPassing.receive(over: b)
            #expect(String(decoding: bytes, as: UTF8.self) == "ring")
            #expect(descriptors.count == 1)
            #expect(descriptors[0] != ring.descriptor, "the receiver gets a descriptor of its own")
            let mapped = try SharedMemory(adopting: descriptors[0])
            #expect(mapped.size == 1 << 20)
            // Written after the hand-over, at both ends of the memory.
            ring.baseAddress.storeBytes(of: 0xC0FFEE as UInt32, as: UInt32.self)
            ring.baseAddress.storeBytes(of: 0xBEEF as UInt32, toByteOffset: (1 << 20) - 4, as: UInt32.self)
            #expect(mapped.baseAddress.load(as: UInt32.self) == 0xC0FFEE)
            #expect(mapped.baseAddress.load(fromByteOffset: (1 << 20) - 4, as: UInt32.self) == 0xBEEF)
            // Sealed: the receiver cannot be made to fault by the memory shrinking under it.
            #expect(ftruncate(ring.descriptor, 4096) != 0)
            // Close-on-exec: an extension's own children do not inherit the ring.
            #expect(fcntl(mapped.descriptor, F_GETFD) & FD_CLOEXEC != 0)
        }
    }

    @Test func severalDescriptorsAndPlainMessages() throws {
        try withSocketPair { a, b in
            let memories = try (0..<3).map { try SharedMemory(name: "m\($0)", size: 4096 * ($0 + 1)) }
            try DescriptorPassing.send([1, 2, 3], descriptors: memories.map(\.descriptor), over: a)
            try DescriptorPassing.send([4], descriptors: [], over: a)
            let first = try DescriptorPassing.receive(over: b, maximumBytes: 3)
            #expect(first.bytes == [1, 2, 3])
            let sizes = try first.descriptors.map { try SharedMemory(adopting: $0).size }
            #expect(sizes == [4096, 8192, 12288])
            let second = try DescriptorPassing.receive(over: b)
            #expect(second.bytes == [4] && second.descriptors.isEmpty)
            shutdown(a, Int32(SHUT_WR))
            #expect(try DescriptorPassing.receive(over: b).bytes.isEmpty, "end of stream")
        }
    }

    @Test func badInputIsAClearError() throws {
        try withSocketPair { a, _ in
            #expect(throws: ReplayError.self) { try DescriptorPassing.send([], descriptors: [], over: a) }
            #expect(throws: ReplayError.self) {
                try DescriptorPassing.send([1], descriptors: Array(repeating: 0, count: DescriptorPassing.maximumDescriptors + 1), over: a)
            }
            // A descriptor that is not shared memory (a socket has no size) is refused when adopted.
            #expect(throws: ReplayError.self) { try SharedMemory(adopting: dup(a)) }
        }
    }
}
