public import NIOCore

/// The server side of the RTMP "simple" handshake, as a pure state machine over `ByteBuffer`.
///
/// C0 (version 3) and C1 (1536 bytes) in → S0, S1 and S2 out; then C2 (1536 bytes) in → complete.
/// S1 carries a zero version field, which tells digest-capable clients (ffmpeg, librtmp in OBS) to
/// skip the digest check and echo S1 back as C2.
public struct RTMPServerHandshake: Sendable {
    public static let packetSize = 1536
    public static let version: UInt8 = 3

    public enum State: Sendable, Hashable { case waitingForC0C1, waitingForC2, complete }
    public enum Action: Sendable, Equatable {
        /// Send these bytes to the client.
        case send(ByteBuffer)
        /// The handshake is done; what follows in the input is the chunk stream.
        case complete
    }
    public struct Failure: Error, Hashable, CustomStringConvertible {
        public let message: String
        public var description: String { "RTMP handshake: \(message)" }
    }

    public private(set) var state: State = .waitingForC0C1
    private let serverTime: UInt32
    private let random: [UInt8]

    /// - Parameters:
    ///   - serverTime: the epoch written into S1 (milliseconds; any value).
    ///   - random: 1528 bytes for S1; random bytes when nil.
    public init(serverTime: UInt32 = 0, random: [UInt8]? = nil) {
        self.serverTime = serverTime
        if let random, random.count == Self.packetSize - 8 {
            self.random = random
        } else {
            var generator = SystemRandomNumberGenerator()
            self.random = (0..<(Self.packetSize - 8)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
    }

    /// Consumes what it can from `input`; returns nil when it needs more bytes.
    public mutating func feed(_ input: inout ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws(Failure) -> Action? {
        switch state {
        case .waitingForC0C1:
            guard let c0 = input.getInteger(at: input.readerIndex, as: UInt8.self) else { return nil }
            // Version 3 is plain RTMP; 6 is RTMPE (encrypted), which we do not speak.
            guard c0 == Self.version else { throw Failure(message: "unsupported version byte \(c0) (expected 3; RTMPE is not supported)") }
            guard input.readableBytes >= 1 + Self.packetSize else { return nil }
            input.moveReaderIndex(forwardBy: 1)
            let c1 = input.readSlice(length: Self.packetSize)!
            var out = allocator.buffer(capacity: 1 + 2 * Self.packetSize)
            out.writeInteger(Self.version)
            // S1: time, four zero bytes, random.
            out.writeInteger(serverTime)
            out.writeInteger(UInt32(0))
            out.writeBytes(random)
            // S2: C1's time, our time, C1's random echoed.
            out.writeInteger(c1.getInteger(at: c1.readerIndex, as: UInt32.self)!)
            out.writeInteger(serverTime)
            out.writeImmutableBuffer(c1.getSlice(at: c1.readerIndex + 8, length: Self.packetSize - 8)!)
            state = .waitingForC2
            return .send(out)
        case .waitingForC2:
            guard input.readableBytes >= Self.packetSize else { return nil }
            input.moveReaderIndex(forwardBy: Self.packetSize)
            state = .complete
            return .complete
        case .complete:
            return .complete
        }
    }
}

/// The client side of the simple handshake: used by tests and by the relay.
public struct RTMPClientHandshake: Sendable {
    public enum State: Sendable, Hashable { case initial, waitingForS0S1S2, complete }
    public private(set) var state: State = .initial

    public init() {}

    /// C0 + C1, to send first.
    public mutating func start(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out = allocator.buffer(capacity: 1 + RTMPServerHandshake.packetSize)
        out.writeInteger(RTMPServerHandshake.version)
        out.writeInteger(UInt32(0))
        out.writeInteger(UInt32(0))
        out.writeRepeatingByte(0x5A, count: RTMPServerHandshake.packetSize - 8)
        state = .waitingForS0S1S2
        return out
    }

    /// Consumes S0, S1, S2 and returns C2 to send, or nil when more bytes are needed.
    public mutating func feed(_ input: inout ByteBuffer) throws(RTMPServerHandshake.Failure) -> ByteBuffer? {
        guard state == .waitingForS0S1S2 else { return nil }
        guard input.readableBytes >= 1 + 2 * RTMPServerHandshake.packetSize else { return nil }
        let s0 = input.readInteger(as: UInt8.self)!
        guard s0 == RTMPServerHandshake.version else { throw .init(message: "server answered version \(s0)") }
        let s1 = input.readSlice(length: RTMPServerHandshake.packetSize)!
        input.moveReaderIndex(forwardBy: RTMPServerHandshake.packetSize)
        state = .complete
        return s1
    }
}
