import Testing
import NIOCore
@testable import RTMP

@Suite("RTMP handshake")
struct HandshakeTests {
    @Test func answersFFmpegC0C1WithS0S1S2ThenCompletesOnC2() throws {
        var input = Fixtures.ffmpegPublish
        let c1 = Array(input.getBytes(at: 1, length: 1536)!)
        var handshake = RTMPServerHandshake(serverTime: 7)
        guard case .send(let reply) = try handshake.feed(&input) else { Issue.record("no S0S1S2"); return }
        #expect(reply.readableBytes == 1 + 2 * 1536)
        #expect(reply.getInteger(at: 0, as: UInt8.self) == 3)
        #expect(reply.getInteger(at: 5, as: UInt32.self) == 0, "S1 version field is zero: simple handshake")
        #expect(Array(reply.getBytes(at: 1 + 1536 + 8, length: 1528)!) == Array(c1[8...]), "S2 echoes C1's random")
        #expect(try handshake.feed(&input) == .complete)
        #expect(handshake.state == .complete)
        #expect(input.readerIndex == 1 + 2 * 1536)
    }

    @Test func waitsForMoreBytesAndRefusesOtherVersions() throws {
        var handshake = RTMPServerHandshake()
        var partial = ByteBuffer(bytes: [3, 0, 0])
        #expect(try handshake.feed(&partial) == nil)
        #expect(partial.readableBytes == 3)
        var rtmpe = ByteBuffer(bytes: [6] + [UInt8](repeating: 0, count: 1536))
        #expect(throws: RTMPServerHandshake.Failure.self) { try handshake.feed(&rtmpe) }
    }

    @Test func clientAndServerHandshakeTogether() throws {
        var client = RTMPClientHandshake()
        var server = RTMPServerHandshake()
        var toServer = client.start()
        guard case .send(var toClient) = try server.feed(&toServer) else { Issue.record("no reply"); return }
        var c2 = try #require(try client.feed(&toClient))
        #expect(try server.feed(&c2) == .complete)
        #expect(client.state == .complete)
    }

    @Test func parsesNginxS0S1S2() throws {
        var answer = Fixtures.nginxAnswer
        var client = RTMPClientHandshake()
        _ = client.start()
        #expect(try client.feed(&answer) != nil)
    }
}

@Suite("AMF0")
struct AMF0Tests {
    static let samples: [AMF0Value] = [
        .number(0), .number(-1.5), .number(.infinity), .boolean(true), .boolean(false), .string(""), .string("héllo ✓"),
        .null, .object([]), .object([("app", .string("live")), ("n", .number(3)), ("inner", .object([("x", .null)]))]),
        .ecmaArray([("width", .number(160)), ("encoder", .string("Lavf59"))]), .strictArray([.number(1), .string("a"), .null]),
        .string(String(repeating: "x", count: 70_000)),
    ]

    @Test(arguments: samples) func roundTrips(_ value: AMF0Value) throws {
        var buffer = ByteBuffer()
        AMF0.encode(value, into: &buffer)
        #expect(try AMF0.decode(&buffer) == value)
        #expect(buffer.readableBytes == 0)
    }

    @Test func knownBytes() throws {
        // "connect", 1.0, {app: "live"} as ffmpeg writes them.
        let bytes: [UInt8] = [0x02, 0x00, 0x07] + Array("connect".utf8)
            + [0x00, 0x3F, 0xF0, 0, 0, 0, 0, 0, 0]
            + [0x03, 0x00, 0x03] + Array("app".utf8) + [0x02, 0x00, 0x04] + Array("live".utf8) + [0x00, 0x00, 0x09]
        let values = try AMF0.decodeAll(ByteBuffer(bytes: bytes))
        #expect(values == [.string("connect"), .number(1), .object([("app", .string("live"))])])
        #expect(Array(AMF0.encode(values).readableBytesView) == bytes)
        // Long string marker and undefined.
        #expect(try AMF0.decodeAll(ByteBuffer(bytes: [0x0C, 0, 0, 0, 2, 0x68, 0x69, 0x06])) == [.string("hi"), .null])
    }

    @Test func refusesTruncatedAndUnknownInput() {
        #expect(throws: AMF0Error.self) { try AMF0.decodeAll(ByteBuffer(bytes: [0x00, 1, 2])) }
        #expect(throws: AMF0Error.self) { try AMF0.decodeAll(ByteBuffer(bytes: [0x02, 0, 9, 0x61])) }
        #expect(throws: AMF0Error.self) { try AMF0.decodeAll(ByteBuffer(bytes: [0x0A, 0xFF, 0xFF, 0xFF, 0xFF])) }
        #expect(throws: AMF0Error.self) { try AMF0.decodeAll(ByteBuffer(bytes: [0x11])) }
        let deep = (0..<100).flatMap { _ in [0x0A, 0, 0, 0, 1] as [UInt8] }
        #expect(throws: AMF0Error.self) { try AMF0.decodeAll(ByteBuffer(bytes: deep)) }
    }
}

@Suite("RTMP chunk stream and commands on ffmpeg's real publish")
struct ChunkStreamTests {
    static func decodeFFmpeg() throws -> [RTMPMessage] {
        var decoder = RTMPChunkDecoder()
        var input = Fixtures.ffmpegChunkStream
        let messages = try decoder.decodeAll(&input)
        #expect(input.readableBytes == 0)
        return messages
    }

    @Test func ffmpegPublishFlow() throws {
        let messages = try Self.decodeFFmpeg()
        let commands = try messages.filter { $0.type == .amf0Command }.map { try RTMPCommand(decoding: $0.payload).kind }
        #expect(commands.count >= 5)
        guard case .connect(let app, let tcURL) = commands.first else { Issue.record("first is \(String(describing: commands.first))"); return }
        #expect(app == "live")
        #expect(tcURL == "rtmp://127.0.0.1:19351/live")
        #expect(commands.contains(.releaseStream(name: "testkey")))
        #expect(commands.contains(.fcPublish(name: "testkey")))
        #expect(commands.contains(.createStream))
        #expect(commands.contains(.publish(name: "testkey", type: "live")))
        #expect(commands.contains { if case .deleteStream = $0 { true } else { false } })
        // ffmpeg raises its chunk size before the media.
        #expect(messages.contains { $0.type == .setChunkSize })
    }

    @Test func ffmpegMediaParsesAsH264AndAAC() throws {
        let messages = try Self.decodeFFmpeg()
        let video = try messages.filter { $0.type == .video }.map { try FLVVideoTag(decoding: $0.payload) }
        let audio = try messages.filter { $0.type == .audio }.map { try FLVAudioTag(decoding: $0.payload) }
        #expect(video.count >= 25)
        #expect(audio.count >= 30)
        guard case .sequenceHeader(let avcC) = video.first?.packet else { Issue.record("no AVC sequence header first"); return }
        #expect(video.first?.isKeyframe == true)
        #expect(avcC.naluLengthSize == 4)
        #expect(avcC.profile == 244, "testsrc is RGB, so libx264 encodes High 4:4:4 Predictive")
        let sps = try H264SequenceParameterSet(decoding: avcC.sequenceParameterSets[0])
        #expect(sps.width == 160 && sps.height == 120)
        guard case .nalus(let first, _) = video[1].packet else { Issue.record("no NAL units"); return }
        #expect(video[1].isKeyframe)
        let nalTypes = try avcC.nalUnits(first).map { $0.getInteger(at: $0.readerIndex, as: UInt8.self)! & 0x1F }
        #expect(nalTypes.contains(5), "an IDR slice in the first frame")
        guard case .sequenceHeader(let asc) = audio.first?.packet else { Issue.record("no AAC sequence header first"); return }
        #expect(asc.objectType == 2 && asc.sampleRate == 44100 && asc.channels == 1)
        #expect(audio.dropFirst().allSatisfy { if case .raw(let frame) = $0.packet { frame.readableBytes > 0 } else { false } })
        let videoTimes = messages.filter { $0.type == .video }.map(\.timestamp)
        #expect(videoTimes == videoTimes.sorted())
        #expect((videoTimes.last ?? 0) >= 900, "1 s of video at 30 fps")
    }

    @Test func ffmpegMetadata() throws {
        let data = try Self.decodeFFmpeg().first { $0.type == .amf0Data }
        let values = try AMF0.decodeAll(try #require(data).payload)
        #expect(values.first == .string("@setDataFrame"))
        #expect(values.dropFirst().first == .string("onMetaData"))
        #expect(values.last?["width"] == .number(160))
    }

    @Test func nginxAnswerDecodes() throws {
        var answer = Fixtures.nginxAnswer
        answer.moveReaderIndex(forwardBy: 1 + 2 * 1536)
        var decoder = RTMPChunkDecoder()
        let messages = try decoder.decodeAll(&answer)
        #expect(messages.contains { $0.type == .windowAcknowledgementSize })
        let names = messages.filter { $0.type == .amf0Command }.compactMap { try? RTMPCommand(decoding: $0.payload) }
        #expect(names.contains { $0.name == "_result" })
        #expect(names.contains { $0.name == "onStatus" && $0.arguments.first?["code"] == .string("NetStream.Publish.Start") })
    }

    @Test(arguments: [1, 2, 127, 128, 4096, 65536]) func encoderDecoderRoundTrip(chunkSize: Int) throws {
        var encoder = RTMPChunkEncoder()
        var decoder = RTMPChunkDecoder()
        var out = ByteBuffer()
        if chunkSize != 128 {
            encoder.encode(RTMPServerMessages.setChunkSize(UInt32(chunkSize)), into: &out)
            encoder.setChunkSize(chunkSize)
        }
        var rng = SeededGenerator(seed: UInt64(chunkSize))
        let sent: [RTMPMessage] = (0..<40).map { i in
            let payload = ByteBuffer(bytes: (0..<Int.random(in: 0...3000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            let csid: UInt32 = [3, 4, 63, 64, 319, 320, 65599][i % 7]
            let timestamp: UInt32 = i % 5 == 0 ? 0xFFFFFF + UInt32(i) : UInt32(i * 33)
            return RTMPMessage(chunkStreamID: csid, timestamp: timestamp, typeID: 9, messageStreamID: 1, payload: payload)
        }
        for message in sent { encoder.encode(message, into: &out) }
        var received = try decoder.decodeAll(&out)
        if chunkSize != 128 { #expect(received.removeFirst().type == .setChunkSize) }
        #expect(received == sent)
        #expect(decoder.chunkSize == chunkSize)
    }

    @Test func compressedHeadersAndDeltas() throws {
        // fmt 0 then fmt 1 (new length and delta), fmt 2 (delta only), fmt 3 (repeat), on chunk stream 4.
        var b = ByteBuffer()
        b.writeBytes([0x04, 0, 0, 100, 0, 0, 2, 9, 1, 0, 0, 0, 0xAA, 0xBB])
        b.writeBytes([0x44, 0, 0, 10, 0, 0, 1, 8, 0xCC])
        b.writeBytes([0x84, 0, 0, 20, 0xDD])
        b.writeBytes([0xC4, 0xEE])
        var decoder = RTMPChunkDecoder()
        let messages = try decoder.decodeAll(&b)
        #expect(messages.map(\.timestamp) == [100, 110, 130, 150])
        #expect(messages.map(\.typeID) == [9, 8, 8, 8])
        #expect(messages.map { $0.payload.readableBytes } == [2, 1, 1, 1])
        #expect(messages.allSatisfy { $0.messageStreamID == 1 })
    }

    @Test func bytewiseFeedingGivesTheSameMessages() throws {
        let whole = try Self.decodeFFmpeg()
        var decoder = RTMPChunkDecoder()
        var pending = ByteBuffer()
        var messages: [RTMPMessage] = []
        var input = Fixtures.ffmpegChunkStream
        while let slice = input.readSlice(length: min(97, input.readableBytes)), slice.readableBytes > 0 {
            pending.writeImmutableBuffer(slice)
            messages += try decoder.decodeAll(&pending)
            pending.discardReadBytes()
        }
        #expect(messages == whole)
    }

    @Test func refusesOversizedMessagesAndHeaderlessChunks() {
        var decoder = RTMPChunkDecoder(maximumMessageSize: 1000)
        var big = ByteBuffer(bytes: [0x04, 0, 0, 0, 0x01, 0, 0, 9, 1, 0, 0, 0])
        #expect(throws: RTMPChunkError(code: .messageTooLarge(length: 65536, limit: 1000))) { try decoder.decodeMessage(&big) }
        var fresh = RTMPChunkDecoder()
        var headerless = ByteBuffer(bytes: [0xC5, 1, 2, 3])
        #expect(throws: RTMPChunkError(code: .noPreviousHeader(chunkStreamID: 5))) { try fresh.decodeMessage(&headerless) }
        // Many interleaved partial messages: bounded in total.
        var interleaved = RTMPChunkDecoder(maximumMessageSize: 1000)
        var many = ByteBuffer()
        for csid in UInt8(3)..<UInt8(19) { many.writeBytes([csid, 0, 0, 0, 0, 0x03, 0xE8, 9, 1, 0, 0, 0] + [UInt8](repeating: 0, count: 128)) }
        #expect(throws: RTMPChunkError(code: .tooMuchBuffered(15 * 128 + 128))) { try interleaved.decodeAll(&many) }
        #expect(interleaved.bufferedBytes == 15 * 128)
        var zeroChunk = ByteBuffer(bytes: [0x02, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(throws: RTMPChunkError(code: .invalidChunkSize(0))) { try fresh.decodeMessage(&zeroChunk) }
    }
}

@Suite("Codecs never crash on hostile input")
struct FuzzTests {
    @Test func randomBytes() {
        var rng = SeededGenerator(seed: 42)
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 0...600, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var decoder = RTMPChunkDecoder(maximumMessageSize: 1 << 16)
            var b = ByteBuffer(bytes: bytes)
            _ = try? decoder.decodeAll(&b)
            _ = try? AMF0.decodeAll(ByteBuffer(bytes: bytes))
            _ = try? RTMPCommand(decoding: ByteBuffer(bytes: bytes))
            _ = try? FLVVideoTag(decoding: ByteBuffer(bytes: [0x17, 0] + bytes))
            _ = try? FLVVideoTag(decoding: ByteBuffer(bytes: bytes))
            _ = try? FLVAudioTag(decoding: ByteBuffer(bytes: [0xAF] + bytes))
            _ = try? H264SequenceParameterSet(decoding: [0x67] + bytes)
            var hs = RTMPServerHandshake()
            var hb = ByteBuffer(bytes: [3] + bytes)
            _ = try? hs.feed(&hb)
        }
    }

    @Test func truncatedAndMutatedCapture() throws {
        let capture = Array(Fixtures.ffmpegChunkStream.readableBytesView)
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<300 {
            var bytes = Array(capture.prefix(Int.random(in: 0...capture.count, using: &rng)))
            for _ in 0..<Int.random(in: 0...4, using: &rng) where !bytes.isEmpty {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            var decoder = RTMPChunkDecoder()
            var b = ByteBuffer(bytes: bytes)
            guard let messages = try? decoder.decodeAll(&b) else { continue }
            for message in messages {
                _ = try? RTMPCommand(decoding: message.payload)
                _ = try? AMF0.decodeAll(message.payload)
                if let tag = try? FLVVideoTag(decoding: message.payload) {
                    if case .sequenceHeader(let avcC) = tag.packet {
                        _ = try? H264SequenceParameterSet(decoding: avcC.sequenceParameterSets[0])
                    }
                }
                _ = try? FLVAudioTag(decoding: message.payload)
            }
        }
    }
}
