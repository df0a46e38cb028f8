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
        let request = try codec.encode(.request(id: 7, try ControlRequest(SetMicrophoneRequest(on: false))))
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

    static func request(_ id: UInt64, _ method: some ControlMethod) -> ControlMessage {
        .request(id: id, try! ControlRequest(method))
    }

    static func event(_ body: some ControlEventBody) -> ControlMessage {
        .event(try! ControlEvent(body))
    }

    static func answer(_ id: UInt64, _ status: SessionStatus?) -> ControlMessage {
        .response(id: id, .success(try! ControlPayload(SessionAnswer(status: status))))
    }

    static let everyKind: [ControlMessage] = [
        hello,
        .hello(Hello(role: .daemon, pid: 1, software: "replayd 0.1")),
        .hello(Hello(role: Hello.Role(rawValue: "app"), pid: 1, software: "SketchPad")),
        request(1, StartRecordingRequest(options: RecordingOptions(outputPath: "/tmp/a b.mp4", durationSeconds: 2.5, microphone: true,
                                                         display: ":77", region: Region(width: 640, height: 480, x: 10, y: 20),
                                                         framesPerSecond: 60, quality: .high, encoder: .x264, separateAudioTracks: true))),
        request(2, StopRecordingRequest()),
        request(3, StatusRequest()),
        request(4, SetMicrophoneRequest(on: true)),
        request(5, SubscribeRequest()),
        .request(id: UInt64.max, ControlRequest(method: "broadcast")),
        answer(3, nil),
        answer(3, status),
        .response(id: 1, .failure(ReplayError(.sessionActive, "a recording is already running"))),
        event(StatusEvent(status: status)),
        event(SessionEndedEvent(status: status, error: nil)),
        event(SessionEndedEvent(status: status, error: ReplayError(.diskFull, "the disk is full"))),
        event(GoodbyeEvent(error: ReplayError(.protocolMismatch, "versions differ"))),
        .event(ControlEvent(name: "fireworks", payload: ControlPayload(fields: ["colour": .string("red"), "count": .integer(3)]))),
    ]

    /// The bytes of a status answer and event are those of protocol version 1 before requests and
    /// events became types of their own: old clients read them as before.
    @Test func statusAnswerAndEventKeepTheirBytes() throws {
        let small = SessionStatus(id: "rec-1", state: .running, clientPID: 7, outputPath: "/a.mp4", display: ":0",
                                  width: 2, height: 2, framesPerSecond: 30)
        let statusJSON = #"{"bytesWritten":0,"clientPID":7,"display":":0","elapsedSeconds":0,"encoder":"","framesDropped":0,"framesPerSecond":30,"framesWritten":0,"height":2,"id":"rec-1","kind":"recording","microphoneOn":false,"microphoneRecorded":false,"outputPath":"/a.mp4","state":"running","systemAudioRecorded":false,"warnings":[],"width":2}"#
        #expect(Array(try codec.encode(Self.answer(9, small)).readableBytesView)
                == Self.frame(#"{"id":9,"status":"# + statusJSON + #","type":"response"}"#))
        #expect(Array(try codec.encode(Self.event(StatusEvent(status: small))).readableBytesView)
                == Self.frame(#"{"event":"status","status":"# + statusJSON + #","type":"event"}"#))
        #expect(Array(try codec.encode(Self.request(4, StopRecordingRequest())).readableBytesView)
                == Self.frame(#"{"id":4,"method":"stopRecording","type":"request"}"#))
    }

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
        try codec.encode(Self.request(9, StatusRequest()), into: &buffer)
        #expect(try codec.decode(buffer: &buffer) == Self.hello)
        #expect(try codec.decode(buffer: &buffer) == Self.request(9, StatusRequest()))
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
        #"{"type":"event"}"#,
        #"{"type":"response","error":{"code":"x","message":"y"}}"#,
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
        let message = try codec.decode(buffer: &buffer)
        guard case .request(5, let request) = message else { Issue.record("not a request: \(String(describing: message))"); return }
        #expect(request.method == "broadcast")
        #expect(request.payload.fields == ["service": .string("x"), "future": .bool(true)])
        // A known request with a field this build does not know decodes as before.
        var known = ByteBuffer(bytes: Self.frame(#"{"type":"request","id":6,"method":"setMicrophone","on":true,"fade":0.5}"#))
        guard case .request(6, let mic) = try codec.decode(buffer: &known) else { Issue.record("not a request"); return }
        #expect(try mic.decode(SetMicrophoneRequest.self) == SetMicrophoneRequest(on: true))
    }

    /// An event this client does not know (a newer replayd's) decodes, and a client that looks for
    /// the events it knows finds none in it: it is ignored, never a broken connection.
    @Test func unknownEventsAreIgnoredByOldClients() throws {
        var buffer = ByteBuffer(bytes: Self.frame(#"{"type":"event","event":"broadcastStarted","service":"org.example","url":"https://x/1"}"#))
        guard case .event(let event) = try codec.decode(buffer: &buffer) else { Issue.record("not an event"); return }
        #expect(event.name == "broadcastStarted")
        #expect(event.decode(StatusEvent.self) == nil)
        #expect(event.decode(SessionEndedEvent.self) == nil)
        #expect(event.decode(GoodbyeEvent.self) == nil)
        // A status with a field added by a newer replayd, and a session kind this build does not know.
        let status = #"{"clientPID":7,"display":":0","elapsedSeconds":1.5,"framesPerSecond":30,"height":2,"id":"clip-1","kind":"clip","outputPath":"","state":"running","width":2,"bytesWritten":0,"framesWritten":3,"framesDropped":0,"microphoneOn":false,"microphoneRecorded":false,"systemAudioRecorded":false,"encoder":"libx264","warnings":[],"bufferedSeconds":12}"#
        var newer = ByteBuffer(bytes: Self.frame(#"{"type":"event","event":"status","status":"# + status + "}"))
        guard case .event(let statusEvent) = try codec.decode(buffer: &newer) else { Issue.record("not an event"); return }
        let decoded = try #require(statusEvent.decode(StatusEvent.self))
        #expect(decoded.status.kind == SessionStatus.Kind(rawValue: "clip"))
        #expect(decoded.status.framesWritten == 3)
    }

    @Test func decoderSplitsAStreamArrivingInPieces() throws {
        let processor = NIOSingleStepByteToMessageProcessor(ControlMessageDecoder())
        var stream = try codec.encode(Self.hello)
        try codec.encode(Self.request(1, StopRecordingRequest()), into: &stream)
        var decoded: [ControlMessage] = []
        while stream.readableBytes > 0 {
            let piece = stream.readSlice(length: min(7, stream.readableBytes))!
            try processor.process(buffer: piece) { decoded.append($0) }
        }
        #expect(decoded == [Self.hello, Self.request(1, StopRecordingRequest())])
    }

    @Test func encoderWritesOneFramePerMessage() throws {
        var out = ByteBuffer()
        try ControlMessageEncoder().encode(data: Self.request(2, StatusRequest()), out: &out)
        #expect(out == (try codec.encode(Self.request(2, StatusRequest()))))
    }
}
