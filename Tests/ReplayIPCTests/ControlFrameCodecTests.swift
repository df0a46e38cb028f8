import Testing
import NIOCore
@testable import ReplayIPC

@Suite("Control framing: 4-byte big-endian length + one JSON object")
struct ControlFrameCodecTests {
    let codec = ControlFrameCodec()

    static func frame(_ json: String) -> [UInt8] {
        let payload = Array(json.utf8)
        let n = UInt32(payload.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
    }

    static let helloJSON = #"{"pid":42,"role":"client","software":"t","type":"hello","version":1}"#
    static let hello = ControlMessage.hello(Hello(version: 1, role: .client, pid: 42, software: "t"))

    @Test func helloEncodesToExactBytes() throws {
        let buffer = try codec.encode(Self.hello)
        #expect(Array(buffer.readableBytesView) == [0, 0, 0, 0x44] + Array(Self.helloJSON.utf8))
        #expect(Self.frame(Self.helloJSON).prefix(4) == [0, 0, 0, 0x44])
    }

    @Test func requestAndErrorResponseEncodeToExactBytes() throws {
        let request = try codec.encode(.request(id: 7, .setMicrophone(on: false)))
        #expect(Array(request.readableBytesView) == Self.frame(#"{"id":7,"method":"setMicrophone","on":false,"type":"request"}"#))
        #expect(Array(request.readableBytesView.prefix(4)) == [0, 0, 0, 0x3d])

        let response = try codec.encode(.response(id: 3, .failure(ReplayError(.noSession, "nothing is recording."))))
        #expect(Array(response.readableBytesView) == Self.frame(#"{"error":{"code":"no-session","message":"nothing is recording."},"id":3,"type":"response"}"#))
    }

    @Test func decodesExactBytes() throws {
        var buffer = ByteBuffer(bytes: Self.frame(Self.helloJSON))
        #expect(try codec.decode(buffer: &buffer) == Self.hello)
        #expect(buffer.readableBytes == 0)
    }

    static let status = SessionStatus(
        id: "rec-0123abcd", state: .running, clientPID: 4242, outputPath: "/home/u/Videos/Screen Recording 2026-11-22 at 10.00.00.mp4",
        display: ":0", width: 1920, height: 1080, framesPerSecond: 30, elapsedSeconds: 12.5, framesWritten: 375,
        framesDropped: 1, bytesWritten: 1_234_567, microphoneOn: true, microphoneRecorded: true, systemAudioRecorded: true,
        encoder: "libx264", warnings: ["no PulseAudio"])

    static let everyKind: [ControlMessage] = [
        hello,
        .hello(Hello(role: .daemon, pid: 1, software: "replayd 0.1")),
        .request(id: 1, .startRecording(RecordingOptions(outputPath: "/tmp/a b.mp4", durationSeconds: 2.5, microphone: true,
                                                         display: ":77", region: Region(width: 640, height: 480, x: 10, y: 20),
                                                         framesPerSecond: 60, quality: .high, encoder: .x264, separateAudioTracks: true))),
        .request(id: 2, .stopRecording),
        .request(id: 3, .status),
        .request(id: 4, .setMicrophone(on: true)),
        .request(id: 5, .subscribe),
        .request(id: UInt64.max, .unknown(method: "broadcast")),
        .response(id: 3, .success(nil)),
        .response(id: 3, .success(status)),
        .response(id: 1, .failure(ReplayError(.sessionActive, "a recording is already running"))),
        .event(.status(status)),
        .event(.sessionEnded(status, nil)),
        .event(.sessionEnded(status, ReplayError(.diskFull, "the disk is full"))),
        .event(.goodbye(ReplayError(.protocolMismatch, "versions differ"))),
    ]

    @Test(arguments: everyKind)
    func roundTrips(_ message: ControlMessage) throws {
        var buffer = try codec.encode(message)
        #expect(try codec.decode(buffer: &buffer) == message)
        #expect(buffer.readableBytes == 0)
    }

    @Test func waitsForWholeFramesAndConsumesNothingMeanwhile() throws {
        let bytes = Self.frame(Self.helloJSON)
        for cut in [0, 1, 3, 4, 5, bytes.count - 1] {
            var buffer = ByteBuffer(bytes: bytes.prefix(cut))
            #expect(try codec.decode(buffer: &buffer) == nil, "cut at \(cut)")
            #expect(buffer.readableBytes == cut)
        }
    }

    @Test func decodesTwoFramesFromOneBuffer() throws {
        var buffer = try codec.encode(Self.hello)
        try codec.encode(.request(id: 9, .status), into: &buffer)
        #expect(try codec.decode(buffer: &buffer) == Self.hello)
        #expect(try codec.decode(buffer: &buffer) == .request(id: 9, .status))
        #expect(try codec.decode(buffer: &buffer) == nil)
    }

    @Test(arguments: [UInt32(1 << 20) + 1, UInt32.max])
    func refusesOversizedFramesFromTheHeaderAlone(_ length: UInt32) {
        var buffer = ByteBuffer()
        buffer.writeInteger(length, endianness: .big)
        buffer.writeBytes([0x7b])  // only the start of a payload: the length alone is enough to refuse
        #expect(throws: ControlCodecError.self) { try codec.decode(buffer: &buffer) }
        do {
            _ = try codec.decode(buffer: &buffer)
        } catch {
            #expect(error.kind == .frameTooLong)
        }
    }

    @Test func acceptsAFrameOfExactlyTheMaximum() throws {
        let small = ControlFrameCodec(maximumFrameLength: 68)
        var buffer = ByteBuffer(bytes: Self.frame(Self.helloJSON))
        #expect(try small.decode(buffer: &buffer) == Self.hello)
        let smaller = ControlFrameCodec(maximumFrameLength: 67)
        var again = ByteBuffer(bytes: Self.frame(Self.helloJSON))
        #expect(throws: ControlCodecError(.frameTooLong, "a frame of 68 bytes is over the 67-byte limit")) {
            try smaller.decode(buffer: &again)
        }
        #expect(throws: ControlCodecError.self) { try smaller.encode(Self.hello) }
    }

    @Test func refusesEmptyFrames() {
        var buffer = ByteBuffer(bytes: [0, 0, 0, 0])
        #expect(throws: ControlCodecError(.emptyFrame, "a frame of length 0")) { try codec.decode(buffer: &buffer) }
    }

    @Test func truncatedFrameAtEndOfStreamIsAnError() throws {
        var buffer = ByteBuffer(bytes: Self.frame(Self.helloJSON).prefix(10))
        #expect(try codec.decodeLast(buffer: &buffer, seenEOF: false) == nil)
        #expect(throws: ControlCodecError(.truncatedFrame, "the connection ended inside a frame (10 bytes left over)")) {
            try codec.decodeLast(buffer: &buffer, seenEOF: true)
        }
        var empty = ByteBuffer()
        #expect(try codec.decodeLast(buffer: &empty, seenEOF: true) == nil)
    }

    @Test(arguments: [
        "not json",
        "[1,2,3]",
        #"{"type":"teleport"}"#,
        #"{"type":"request","method":"status"}"#,
        #"{"type":"request","id":-1,"method":"status"}"#,
        #"{"type":"request","id":1,"method":"setMicrophone"}"#,
        #"{"type":"event","event":"fireworks"}"#,
    ])
    func malformedPayloadsAreErrorsAndAreConsumed(_ json: String) {
        var buffer = ByteBuffer(bytes: Self.frame(json))
        do {
            _ = try codec.decode(buffer: &buffer)
            Issue.record("decoded \(json)")
        } catch {
            #expect(error.kind == .malformedMessage)
        }
        #expect(buffer.readableBytes == 0)
    }

    @Test func unknownMethodsAndExtraFieldsAreTolerated() throws {
        var buffer = ByteBuffer(bytes: Self.frame(#"{"type":"request","id":5,"method":"broadcast","service":"x","future":true}"#))
        #expect(try codec.decode(buffer: &buffer) == .request(id: 5, .unknown(method: "broadcast")))
    }

    @Test func decoderSplitsAStreamArrivingInPieces() throws {
        let processor = NIOSingleStepByteToMessageProcessor(ControlMessageDecoder())
        var stream = try codec.encode(Self.hello)
        try codec.encode(.request(id: 1, .stopRecording), into: &stream)
        var decoded: [ControlMessage] = []
        while stream.readableBytes > 0 {
            let piece = stream.readSlice(length: min(7, stream.readableBytes))!
            try processor.process(buffer: piece) { decoded.append($0) }
        }
        #expect(decoded == [Self.hello, .request(id: 1, .stopRecording)])
    }

    @Test func encoderWritesOneFramePerMessage() throws {
        var out = ByteBuffer()
        try ControlMessageEncoder().encode(data: .request(id: 2, .status), out: &out)
        #expect(out == (try codec.encode(.request(id: 2, .status))))
    }
}
