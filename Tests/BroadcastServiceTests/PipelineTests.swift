import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing
@testable import BroadcastMedia
@testable import BroadcastWeb
@testable import RTMP

@Suite("RTMP publish session, fMP4 muxer and live stream, in process")
struct PipelineTests {
    /// Feeds ffmpeg's captured publish in 1000-byte pieces to a state machine, answering `.authorize` with
    /// `accept` and handing media to `pipeline`. Returns the server's replies (decoded), how it closed,
    /// and the keys it asked about.
    static func replay(accept: Bool, pipeline: inout IngestPipeline)
        async throws -> (replies: [RTMPMessage], closed: RTMPConnectionStateMachine.CloseReason?, authorized: [String]) {
        var machine = RTMPConnectionStateMachine()
        var input = Fixtures.ffmpegPublish
        var replies = ByteBuffer()
        var closed: RTMPConnectionStateMachine.CloseReason?
        var authorized: [String] = []
        feeding: while input.readableBytes > 0 {
            var actions = try machine.receive(input.readSlice(length: min(1000, input.readableBytes))!)
            var index = 0
            while index < actions.count {
                let action = actions[index]
                index += 1
                switch action {
                case .send(let bytes): replies.writeImmutableBuffer(bytes)
                case .authorize(let app, let key):
                    authorized.append("\(app)/\(key)")
                    #expect(!machine.isPublishing)
                    actions += try machine.authorization(accepted: accept)
                case .media(let message): try await pipeline.handle(message)
                case .close(let reason):
                    closed = reason
                    break feeding
                }
            }
        }
        #expect(machine.state == .closed)
        #expect(try machine.receive(ByteBuffer(bytes: [1, 2, 3])).isEmpty, "nothing after closing")
        #expect(replies.readableBytes > 1 + 2 * 1536)
        replies.moveReaderIndex(forwardBy: 1 + 2 * 1536)
        var decoder = RTMPChunkDecoder()
        return (try decoder.decodeAll(&replies), closed, authorized)
    }

    @Test func acceptsFFmpegsPublishAndMuxesItsMedia() async throws {
        let stream = LiveStream()
        var pipeline = IngestPipeline(stream: stream, threadPool: .singleton, logger: Logger(label: "test"))
        let (replies, closed, authorized) = try await Self.replay(accept: true, pipeline: &pipeline)
        let commands = try replies.filter { $0.type == .amf0Command }.map { try RTMPCommand(decoding: $0.payload) }
        #expect(commands.first?.name == "_result")
        #expect(commands.first?.arguments.first?["code"] == .string("NetConnection.Connect.Success"))
        #expect(commands.contains { $0.name == "_result" && $0.arguments.first == .number(1) }, "createStream answers stream 1")
        #expect(commands.contains { $0.name == "onStatus" && $0.arguments.first?["code"] == .string("NetStream.Publish.Start") })
        #expect(replies.contains { $0.type == .setChunkSize })
        #expect(authorized == ["live/testkey"])
        #expect(closed == .unpublished, "deleteStream ends the session")
        await pipeline.finish()
        #expect(pipeline.videoFrames == 30)

        // What the muxer made of one second of ffmpeg's H.264 + AAC.
        let initSegment = try #require(stream.initSegment)
        #expect(initSegment.getString(at: 4, length: 4) == "ftyp")
        #expect(String(decoding: initSegment.readableBytesView, as: UTF8.self).contains("moov"))
        #expect(stream.mimeType == "video/mp4; codecs=\"avc1.F4000B,mp4a.40.2\"")
        #expect(stream.fragmentsReceived >= 8, "~100 ms fragments: \(stream.fragmentsReceived)")
        let playlist = try #require(stream.hlsPlaylist())
        #expect(playlist.contains("#EXT-X-MAP:URI=\"init.mp4\"") && playlist.contains("seg0.m4s") && playlist.contains("#EXT-X-ENDLIST"))
        let segment = try #require(stream.hlsSegment(0))
        #expect(segment.getString(at: 4, length: 4) == "moof")

        // init + segment decode with ffmpeg, all 30 frames.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ork-mux-\(UUID().uuidString).mp4")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(initSegment.readableBytesView + segment.readableBytesView).write(to: file)
        let probe = try await Command.run("ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=codec_name,nb_read_frames,width,height",
                                                "-of", "compact", file.path])
        #expect(probe.stdout.contains("codec_name=h264|width=160|height=120|nb_read_frames=30"), "\(probe.stdout) \(probe.stderr)")
        #expect(probe.stdout.contains("codec_name=aac"))
    }

    @Test func refusesAnUnknownKeyWithBadName() async throws {
        var pipeline = IngestPipeline(stream: LiveStream(), threadPool: .singleton, logger: Logger(label: "test"))
        let (replies, closed, _) = try await Self.replay(accept: false, pipeline: &pipeline)
        let commands = try replies.filter { $0.type == .amf0Command }.map { try RTMPCommand(decoding: $0.payload) }
        #expect(commands.last?.name == "onStatus")
        #expect(commands.last?.arguments.first?["code"] == .string("NetStream.Publish.BadName"))
        #expect(closed == .streamKeyRefused)
        #expect(pipeline.videoFrames == 0, "no media reaches the pipeline")
    }

    @Test func refusesOtherApplicationsAndPlay() throws {
        // A connect to another application than `live`.
        var machine = RTMPConnectionStateMachine()
        var client = RTMPClientHandshake()
        var bytes = client.start()
        bytes.writeBytes([UInt8](repeating: 0, count: 1536))
        let encoder = RTMPChunkEncoder()
        encoder.encode(RTMPMessage(chunkStreamID: 3, timestamp: 0, typeID: 20, messageStreamID: 0,
                                   payload: RTMPCommand(name: "connect", transactionID: 1, commandObject: .object([("app", .string("vod"))])).encode()),
                       into: &bytes)
        let actions = try machine.receive(bytes)
        #expect(actions.last == .close(.unknownApplication("vod")))
        // Media before publishing is ignored; play is refused.
        var player = RTMPConnectionStateMachine()
        var playerHandshake = RTMPClientHandshake()
        var more = playerHandshake.start()
        more.writeBytes([UInt8](repeating: 0, count: 1536))
        let encoder2 = RTMPChunkEncoder()
        for command in [RTMPCommand(name: "connect", transactionID: 1, commandObject: .object([("app", .string("live"))])),
                        RTMPCommand(name: "createStream", transactionID: 2)] {
            encoder2.encode(RTMPMessage(chunkStreamID: 3, timestamp: 0, typeID: 20, messageStreamID: 0, payload: command.encode()), into: &more)
        }
        encoder2.encode(RTMPMessage(chunkStreamID: 6, timestamp: 0, typeID: 9, messageStreamID: 1, payload: ByteBuffer(bytes: [0x17, 1, 0, 0, 0])), into: &more)
        encoder2.encode(RTMPMessage(chunkStreamID: 3, timestamp: 0, typeID: 20, messageStreamID: 1,
                                    payload: RTMPCommand(name: "play", transactionID: 3, arguments: [.string("k")]).encode()), into: &more)
        let playActions = try player.receive(more)
        #expect(!playActions.contains { if case .media = $0 { true } else { false } })
        #expect(playActions.last == .close(.playRefused))
    }

    /// Up to `frameFragmentViewers` viewers every frame is its own fragment (and the end may close one
    /// more, with the last sound); beyond, ~100 ms ones.
    @Test(arguments: [(viewers: 1, fragments: 30...31), (viewers: 2, fragments: 8...12)])
    func fragmentsFollowTheSizeOfTheAudience(viewers: Int, fragments: ClosedRange<Int>) async throws {
        let stream = LiveStream()
        let watching = (0..<viewers).map { _ in TestViewer() }
        let ids = watching.map { stream.subscribe($0) }
        var pipeline = IngestPipeline(stream: stream, threadPool: .singleton, logger: Logger(label: "test"),
                                      fragmentDuration: 100, frameFragmentViewers: 1)
        _ = try await Self.replay(accept: true, pipeline: &pipeline)
        await pipeline.finish()
        #expect(pipeline.videoFrames == 30)
        #expect(fragments.contains(stream.fragmentsReceived), "\(viewers) viewers: \(stream.fragmentsReceived) fragments for 30 frames")
        for id in ids { stream.unsubscribe(id) }
    }

    static func fragment(_ tag: UInt8, keyframe: Bool, start: Int64, duration: Int64 = 100) -> MP4Fragment {
        MP4Fragment(bytes: ByteBuffer(bytes: [tag]), startsWithKeyframe: keyframe, startTime: start, duration: duration)
    }

    /// A viewer in memory, on a real event loop: collects the payloads of the WebSocket frames it gets.
    final class TestViewer: LiveViewer, @unchecked Sendable {
        // @unchecked: `received`/`finished` are behind `lock`; the rest is only touched on `eventLoop`.
        let eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let lock = NSLock()
        var received: [UInt8] = []
        var texts: [String] = []
        var finished = false
        /// Flushes to accept before reporting the viewer as fallen behind.
        var flushesAccepted = Int.max

        func write(_ messages: ArraySlice<LiveMessage>) {
            for message in messages {
                var frame = message.frame
                let opcode = frame.readInteger(as: UInt8.self)! & 0x0F
                let short = frame.readInteger(as: UInt8.self)!
                if short == 126 { frame.moveReaderIndex(forwardBy: 2) } else if short == 127 { frame.moveReaderIndex(forwardBy: 8) }
                lock.withLock {
                    if opcode == 1 { texts.append(String(buffer: frame)) } else { received += Array(frame.readableBytesView) }
                }
            }
        }

        func flush() -> Bool {
            flushesAccepted -= 1
            return flushesAccepted >= 0
        }

        func finish() { lock.withLock { finished = true } }

        /// Waits for the loop to run what was scheduled before.
        func settle() async throws { try await eventLoop.submit {}.get() }
    }

    @Test func aJoiningViewerStartsAtTheLatestKeyframe() async throws {
        let stream = LiveStream()
        stream.setInitSegment(ByteBuffer(bytes: [0xAA]), mimeType: "video/mp4")
        for (i, key) in [true, false, false, true, false].enumerated() {
            stream.publish(Self.fragment(UInt8(i), keyframe: key, start: Int64(i) * 100))
        }
        let viewer = TestViewer()
        let id = stream.subscribe(viewer)
        stream.publish(Self.fragment(5, keyframe: false, start: 500))
        stream.sendToViewers(text: #"{"type":"viewers","viewerCount":1}"#)
        stream.end()
        try await viewer.settle()
        try await viewer.settle()
        viewer.lock.withLock {
            #expect(viewer.received == [0xAA, 3, 4, 5])
            #expect(viewer.texts == [#"{"type":"stream","mime":"video/mp4"}"#, #"{"type":"viewers","viewerCount":1}"#])
            #expect(viewer.finished)
        }
        stream.unsubscribe(id)
    }

    @Test func aViewerWhoJoinsBeforeTheFirstMediaGetsTheInitSegmentFirst() async throws {
        let stream = LiveStream()
        let viewer = TestViewer()
        _ = stream.subscribe(viewer)
        stream.setInitSegment(ByteBuffer(bytes: [0xAA]), mimeType: "video/mp4")
        stream.publish(Self.fragment(1, keyframe: true, start: 0))
        stream.end()
        try await viewer.settle()
        try await viewer.settle()
        viewer.lock.withLock {
            #expect(viewer.received == [0xAA, 1])
            #expect(viewer.finished)
        }
    }

    @Test func aViewerThatFallsBehindIsDisconnectedWithoutHoldingOthersBack() async throws {
        let stream = LiveStream()
        stream.setInitSegment(ByteBuffer(bytes: [0xAA]), mimeType: "video/mp4")
        let slow = TestViewer(), fine = TestViewer()
        slow.flushesAccepted = 2
        _ = stream.subscribe(slow)
        _ = stream.subscribe(fine)
        #expect(stream.viewerCount == 2)
        for i in 0..<10 {
            stream.publish(Self.fragment(UInt8(i), keyframe: i == 0, start: Int64(i) * 100))
            try await slow.settle()
        }
        // The two viewers may be on different loops: let the fine one's loop write what it was given.
        try await fine.settle()
        #expect(stream.viewerCount == 1)
        #expect(stream.viewersDropped == 1)
        #expect(fine.lock.withLock { fine.received } == [0xAA] + Array(0..<10))
    }

    @Test func webSocketFramesAreBuiltOnce() {
        let small = WebSocketFraming.frame(binary: ByteBuffer(bytes: [1, 2, 3]))
        #expect(Array(small.readableBytesView) == [0x82, 3, 1, 2, 3])
        let medium = WebSocketFraming.frame(binary: ByteBuffer(repeating: 7, count: 300))
        #expect(Array(medium.readableBytesView.prefix(4)) == [0x82, 126, 0x01, 0x2C] && medium.readableBytes == 304)
        let large = WebSocketFraming.frame(binary: ByteBuffer(repeating: 7, count: 70_000))
        #expect(Array(large.readableBytesView.prefix(10)) == [0x82, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70] && large.readableBytes == 70_010)
        #expect(Array(WebSocketFraming.frame(text: "hi").readableBytesView) == [0x81, 2, 0x68, 0x69])
        #expect(WebSocketFraming.jsonString("a\"b\\c\n") == #""a\"b\\c\u000a""#)
    }

    @Test func viewerCountEventsAreCoalesced() {
        var coalescer = ViewerCountCoalescer(interval: .milliseconds(500))
        let t0 = ContinuousClock.now
        #expect(coalescer.countChanged(at: t0) == .publishNow)
        // Changes within the interval: one timer, for the end of the interval.
        #expect(coalescer.countChanged(at: t0 + .milliseconds(100)) == .publishAt(t0 + .milliseconds(500)))
        #expect(coalescer.countChanged(at: t0 + .milliseconds(200)) == .none)
        #expect(coalescer.timerFired(at: t0 + .milliseconds(500)) == .publishNow)
        #expect(coalescer.timerFired(at: t0 + .milliseconds(501)) == .none)
        // Quiet for an interval: at once again.
        #expect(coalescer.countChanged(at: t0 + .milliseconds(1100)) == .publishNow)
    }

    @Test func viewerBacklogLimitsOutstandingMedia() {
        var backlog = ViewerBacklog(limit: 3000)
        #expect(backlog.admits())
        backlog.wrote(2000)
        backlog.wrote(1000)
        #expect(backlog.admits())
        backlog.wrote(100)
        #expect(!backlog.admits())
        backlog.taken(2000)
        #expect(backlog.admits() && backlog.milliseconds == 1100)
    }

    @Test func hlsSegmentsCloseAtKeyframesAfterTheTarget() {
        let stream = LiveStream(hlsSegmentTarget: 1000, hlsSegmentsKept: 2)
        stream.setInitSegment(ByteBuffer(bytes: [0]), mimeType: "video/mp4")
        #expect(stream.hlsPlaylist() == nil)
        // Keyframes every 500 ms, fragments of 100 ms, 3.5 s.
        for i in 0..<35 { stream.publish(Self.fragment(UInt8(i), keyframe: i % 5 == 0, start: Int64(i) * 100)) }
        let playlist = stream.hlsPlaylist() ?? ""
        #expect(playlist.contains("#EXT-X-MEDIA-SEQUENCE:1"))
        #expect(playlist.contains("#EXTINF:1.000,\nseg1.m4s\n#EXTINF:1.000,\nseg2.m4s"))
        #expect(stream.hlsSegment(2).map { Array($0.readableBytesView) } == Array(20..<30).map(UInt8.init))
        #expect(stream.hlsSegment(0) == nil, "only the newest segments are kept")
    }

    /// A new init segment mid-stream (a new picture size): the segments of the old one leave the
    /// playlist, which names the new init segment anew (a player loads it).
    @Test func aNewInitSegmentStartsTheHLSPlaylistAndTheJoinersBurstAgain() {
        let stream = LiveStream(hlsSegmentTarget: 1000, hlsSegmentsKept: 4)
        stream.setInitSegment(ByteBuffer(bytes: [0]), mimeType: "video/mp4")
        for i in 0..<25 { stream.publish(Self.fragment(UInt8(i), keyframe: i % 5 == 0, start: Int64(i) * 100)) }
        #expect(stream.hlsPlaylist()?.contains("#EXT-X-MAP:URI=\"init.mp4\"") == true)
        stream.setInitSegment(ByteBuffer(bytes: [1]), mimeType: "video/mp4")
        #expect(stream.hlsPlaylist() == nil, "no segment of the new size yet")
        #expect(stream.initSegment.map { Array($0.readableBytesView) } == [1])
        for i in 25..<50 { stream.publish(Self.fragment(UInt8(i), keyframe: i % 5 == 0, start: Int64(i) * 100)) }
        let playlist = stream.hlsPlaylist() ?? ""
        #expect(playlist.contains("#EXT-X-MAP:URI=\"init-1.mp4\""), "\(playlist)")
        #expect(!playlist.contains("seg0.m4s") && !playlist.contains("seg1.m4s"), "the old size's segments are gone: \(playlist)")
        #expect(stream.hlsSegment(2).map { Array($0.readableBytesView) } == Array(25..<35).map(UInt8.init))
    }

    @Test func escapingAndRateLimits() {
        #expect(HTML.escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
        let limiter = RateLimiter(limit: 2, window: 10)
        #expect(limiter.allow("k", now: 0) && limiter.allow("k", now: 1))
        #expect(!limiter.allow("k", now: 2))
        #expect(limiter.allow("other", now: 2))
        #expect(limiter.allow("k", now: 11.5))
        #expect(Token.streamKey().count == 37)
        #expect(Token.shortID() != Token.shortID())
    }
}
