import Foundation
import Logging
import NIOCore
import RTMP
import ReplayTesting
import Testing

/// The RTMP publishing client's protocol, against the service's own server state machine, in memory.
@Suite("RTMP client: state machine and tags")
struct RTMPClientCodecTests {
    /// A small but valid avcC (Baseline, level 3.0, one SPS and one PPS).
    static let avcC: [UInt8] = [1, 0x42, 0xC0, 0x1E, 0xFF, 0xE1, 0x00, 0x04, 0x67, 0x42, 0xC0, 0x1E, 0x01, 0x00, 0x04, 0x68, 0xCE, 0x3C, 0x80]

    /// Moves bytes between a client and a server state machine until neither has more to say.
    static func exchange(_ client: inout RTMPPublishStateMachine, _ server: inout RTMPConnectionStateMachine, accept: Bool,
                         first: ByteBuffer? = nil) throws -> (client: [RTMPPublishStateMachine.Action], server: [RTMPConnectionStateMachine.Action]) {
        var toServer = [first ?? client.start()]
        var clientActions: [RTMPPublishStateMachine.Action] = [], serverActions: [RTMPConnectionStateMachine.Action] = []
        for _ in 0..<20 where !toServer.isEmpty {
            var toClient: [ByteBuffer] = []
            for bytes in toServer {
                var actions = try server.receive(bytes)
                var index = 0
                while index < actions.count {
                    let action = actions[index]
                    index += 1
                    serverActions.append(action)
                    switch action {
                    case .send(let reply): toClient.append(reply)
                    case .authorize: actions += try server.authorization(accepted: accept)
                    case .media, .close: break
                    }
                }
            }
            toServer = []
            for bytes in toClient {
                for action in client.receive(bytes) {
                    clientActions.append(action)
                    if case .send(let reply) = action { toServer.append(reply) }
                }
            }
        }
        return (clientActions, serverActions)
    }

    @Test func publishesAndItsMediaReachesTheServerUnchanged() throws {
        var client = RTMPPublishStateMachine(app: "live", streamKey: "live_key", tcURL: "rtmp://127.0.0.1:1935/live")
        var server = RTMPConnectionStateMachine()
        let (clientActions, serverActions) = try Self.exchange(&client, &server, accept: true)
        #expect(clientActions.contains(.publishing))
        #expect(serverActions.contains(.authorize(app: "live", streamKey: "live_key")))
        #expect(client.isPublishing && server.isPublishing)

        let configuration = try AVCDecoderConfigurationRecord(decoding: ByteBuffer(bytes: Self.avcC))
        let header = FLVVideoTag.sequenceHeader(configuration)
        let frame = FLVVideoTag(frameType: .interframe, packet: .nalus(ByteBuffer(bytes: [0, 0, 0, 2, 0x41, 0x9A]), compositionTime: -33))
        let audio = FLVAudioTag(packet: .raw(ByteBuffer(bytes: [0x21, 0x10, 0x04])))
        var sent = try client.video(header, timestamp: 0)
        sent.writeImmutableBuffer(try client.video(frame, timestamp: 40))
        sent.writeImmutableBuffer(try client.audio(audio, timestamp: 0x0100_0000))
        let media = try server.receive(sent).compactMap { action -> RTMPMessage? in if case .media(let m) = action { m } else { nil } }
        #expect(media.map(\.typeID) == [9, 9, 8])
        #expect(media.map(\.timestamp) == [0, 40, 0x0100_0000], "extended timestamps too")
        #expect(try FLVVideoTag(decoding: media[0].payload) == header)
        #expect(try FLVVideoTag(decoding: media[1].payload) == frame, "a negative composition time survives")
        #expect(try FLVAudioTag(decoding: media[2].payload) == audio)

        // Unpublishing ends the server's side.
        let end = try server.receive(client.unpublish())
        #expect(end.contains(.close(.unpublished)))
    }

    @Test func aRefusedKeyFailsWithTheServersStatus() throws {
        var client = RTMPPublishStateMachine(app: "live", streamKey: "live_wrong", tcURL: "rtmp://127.0.0.1:1935/live")
        var server = RTMPConnectionStateMachine()
        let (actions, _) = try Self.exchange(&client, &server, accept: false)
        let failure = try #require(actions.compactMap { if case .fail(let error) = $0 { error } else { nil } }.first)
        #expect(failure.code == .publishRefused)
        #expect(failure.status == "NetStream.Publish.BadName")
        #expect("\(failure)".contains("refused to publish this stream key"), "\(failure)")
        #expect(throws: RTMPPublishError.self) { try client.video(.sequenceHeader(try AVCDecoderConfigurationRecord(decoding: ByteBuffer(bytes: Self.avcC))), timestamp: 0) }
    }

    @Test func anUnknownApplicationIsRefusedAtConnect() throws {
        var client = RTMPPublishStateMachine(app: "other", streamKey: "k", tcURL: "rtmp://127.0.0.1:1935/other")
        var server = RTMPConnectionStateMachine()
        let (actions, _) = try Self.exchange(&client, &server, accept: true)
        let failure = try #require(actions.compactMap { if case .fail(let error) = $0 { error } else { nil } }.first)
        #expect(failure.code == .connectRefused && failure.status == "NetConnection.Connect.Rejected", "\(failure)")
    }

    @Test func theServerEndingThePublishIsReported() throws {
        var client = RTMPPublishStateMachine(app: "live", streamKey: "live_key", tcURL: "rtmp://127.0.0.1:1935/live")
        var server = RTMPConnectionStateMachine()
        _ = try Self.exchange(&client, &server, accept: true)
        var ended = ByteBuffer()
        var encoder = RTMPChunkEncoder()
        encoder.setChunkSize(RTMPConnectionStateMachine.outgoingChunkSize)
        encoder.encode(RTMPServerMessages.onStatus(level: "error", code: "NetStream.Publish.BadName", description: "Broadcast ended: the stream key was revoked",
                                                   messageStreamID: 1), into: &ended)
        let failure = client.receive(ended).compactMap { if case .fail(let error) = $0 { error } else { nil } }.first
        #expect(failure?.code == .publishEnded)
        #expect(failure.map { "\($0)".contains("revoked") } == true)
    }

    @Test func answersPings() throws {
        var client = RTMPPublishStateMachine(app: "live", streamKey: "live_key", tcURL: "rtmp://127.0.0.1:1935/live")
        var server = RTMPConnectionStateMachine()
        _ = try Self.exchange(&client, &server, accept: true)
        var body = ByteBuffer()
        body.writeInteger(UInt16(6))
        body.writeInteger(UInt32(12345))
        var ping = ByteBuffer()
        var encoder = RTMPChunkEncoder()
        encoder.setChunkSize(RTMPConnectionStateMachine.outgoingChunkSize)
        encoder.encode(RTMPMessage(chunkStreamID: 2, timestamp: 0, typeID: 4, messageStreamID: 0, payload: body), into: &ping)
        guard case .send(var reply)? = client.receive(ping).first else { Issue.record("no ping response"); return }
        var decoder = RTMPChunkDecoder()
        let pong = try #require(try decoder.decodeMessage(&reply))
        #expect(pong.typeID == 4 && Array(pong.payload.readableBytesView) == [0, 7, 0, 0, 0x30, 0x39])
    }

    @Test(arguments: [
        ("rtmp://127.0.0.1:1935/live/live_abc", "127.0.0.1", 1935, "live", "live_abc"),
        ("rtmp://example.com/live/key?x=1", "example.com", 1935, "live", "key?x=1"),
        ("rtmp://[::1]:19350/app/a/b", "::1", 19350, "app", "a/b"),
    ])
    func parsesURLs(url: String, host: String, port: Int, app: String, key: String) throws {
        let target = try RTMPPublishTarget(url: url)
        #expect(target == RTMPPublishTarget(host: host, port: port, app: app, streamKey: key))
    }

    @Test(arguments: ["http://x/live/k", "rtmp://host/live", "rtmp://host:99999/live/k", "rtmp:///live/k"])
    func refusesBadURLs(url: String) {
        #expect(throws: RTMPPublishError.self) { try RTMPPublishTarget(url: url) }
    }
}

/// The client over real sockets: publishing a real H.264 + AAC recording to nginx-rtmp (ffprobe reads it
/// back) and to the service (it goes live; a wrong key is refused; a revoked key ends the publish).
@Suite("RTMP client against real servers", .serialized, .timeLimit(.minutes(3)))
struct RTMPClientSystemTests {
    static let logger = Logger(label: "test.rtmp-client")
    /// The tests' publishers wait up to 30 s for the publish to start (the client's default is 10 s):
    /// this process's cooperative pool (two threads here) is shared with tests that wait for a
    /// subprocess without giving their thread back, and once in a `make test` it was starved long
    /// enough for a publish to nginx to time out although nginx had answered.
    static let setupTimeout: TimeAmount = .seconds(30)

    /// Sends the recording's tags at their pace (decoded and re-encoded by the RTMP module on the way).
    static func send(_ tags: [FLVFileTag], _ session: RTMPPublishSession, after each: (FLVFileTag) async throws -> Void = { _ in }) async throws {
        let start = ContinuousClock.now
        for tag in tags {
            try await Task.sleep(until: start + .milliseconds(Int(tag.timestamp)), clock: .continuous)
            switch tag.type {
            case 9: try await session.send(try FLVVideoTag(decoding: tag.body), timestamp: tag.timestamp)
            case 8: try await session.send(try FLVAudioTag(decoding: tag.body), timestamp: tag.timestamp)
            default: continue
            }
            try await each(tag)
        }
    }

    /// Runs a command without blocking a thread of the cooperative pool; killed after `timeout`, and
    /// when the test is cancelled.
    static func run(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(30)) async throws -> CommandResult {
        let process = try BackgroundProcess(executable, arguments: arguments)
        let result: ProcessResult
        do {
            result = try await process.waitForExit(timeout: timeout)
        } catch {
            await process.terminate(grace: .seconds(1))
            guard let ended = process.result, !Task.isCancelled else { throw error }
            result = ended
        }
        return CommandResult(status: result.terminatedBySignal ? 128 + result.status : result.status,
                             stdout: result.stdout + result.stderr, stderr: result.stdout + result.stderr)
    }

    @Test func publishesToNginxAndFFprobeReadsItBack() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // Long enough that the player, however late a loaded machine starts it, joins while media flows
        // (a player that joins after the last tag waits for media that never comes).
        let tags = try FLVFile.tags(of: try FLVFile.make(seconds: 10, directory: directory))
        #expect(tags.contains { $0.type == 9 } && tags.contains { $0.type == 8 })
        let nginx = try await NginxRTMPServer.start()
        do {
            let url = "\(nginx.base)/clienttest"
            try await RTMPPublisher.publish(to: try RTMPPublishTarget(url: url), setupTimeout: RTMPClientSystemTests.setupTimeout, logger: Self.logger) { session in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await Self.send(tags, session) }
                    // A player joins while the client publishes: nginx hands it what the client sent.
                    try await Task.sleep(for: .seconds(1.5))
                    let probe = try await Self.run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "compact", url])
                    #expect(probe.stdout.contains("codec_name=h264|width=320|height=240"), "\(probe.stdout)")
                    #expect(probe.stdout.contains("codec_name=aac"), "\(probe.stdout)")
                    try await group.waitForAll()
                }
            }
        } catch {
            await nginx.stop()
            throw error
        }
        await nginx.stop()
    }

    @Test func publishesToTheServiceAndRefusalsAreClear() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let tags = try FLVFile.tags(of: try FLVFile.make(seconds: 9, directory: directory))
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "kim"], stdin: "kim-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "kim"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        service.addSecret(key)

        // A wrong key: refused with the server's status, before any media.
        do {
            try await RTMPPublisher.publish(to: try RTMPPublishTarget(url: "\(service.rtmpBase)/live_wrong"), setupTimeout: Self.setupTimeout, logger: Self.logger) { _ in }
            Issue.record("a wrong stream key was accepted")
        } catch let error as RTMPPublishError {
            #expect(error.code == .publishRefused && error.status == "NetStream.Publish.BadName", "\(error)")
        }
        #expect(await service.waitForLog("RTMP publish refused"))

        // The right key: live in the directory, HLS readable; then the key is revoked and the publish ends.
        let api = CurlSession(directory: directory)
        var checked = false
        do {
            try await RTMPPublisher.publish(to: try RTMPPublishTarget(url: "\(service.rtmpBase)/\(key)"), setupTimeout: Self.setupTimeout, logger: Self.logger) { session in
                try await Self.send(tags, session) { tag in
                    guard !checked, tag.timestamp >= 3000 else { return }
                    checked = true
                    let live = ServiceSystemTests.json(try api.request("GET", service.baseURL + "/api/live").body)["broadcasts"] as? [[String: Any]] ?? []
                    let entry = try #require(live.first, "live after publishing: \(service.log)")
                    #expect(entry["broadcaster"] as? String == "kim")
                    let hls = try #require(entry["hlsURL"] as? String)
                    let probe = try await Self.run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "compact", hls])
                    #expect(probe.stdout.contains("codec_name=h264|width=320|height=240"), "\(probe.stdout)")
                    #expect(probe.stdout.contains("codec_name=aac"), "\(probe.stdout)")
                    #expect(try await Self.run(ServiceProcess.binary, ["key", "revoke", key, "--database", service.databaseArgument]).status == 0)
                }
                // The recording may run out before the service notices (it checks keys every 2 s): wait for it.
                for _ in 0..<100 where session.failure == nil { try await Task.sleep(for: .milliseconds(100)) }
                if let failure = session.failure { throw failure }
            }
            Issue.record("the publish went on after its key was revoked")
        } catch let error as RTMPPublishError {
            #expect(checked)
            #expect(error.code == .publishEnded && "\(error)".contains("revoked"), "\(error)")
        }
        #expect(await service.waitForLog("Broadcast ended"))
    }
}
