import Foundation
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SystemTests {
    /// The RTMP extension (org.openreplaykit.rtmp) against what the network and the screen do to a
    /// live stream: a cut, a slow link, a still screen. nginx-rtmp is the ingest; a `TCPProxy` in
    /// front of it is the network; ffprobe and ffmpeg read the stream back from nginx.
    @Suite("replay broadcast: the RTMP extension on a real network")
    struct BroadcastNetworkTests {
        static let service = "org.openreplaykit.rtmp"

        /// Runs `body` with nginx-rtmp, stopping it whatever happens.
        static func withNginx(_ body: (NginxRTMPServer) async throws -> Void) async throws {
            let nginx = try await NginxRTMPServer.start()
            do {
                try await body(nginx)
            } catch {
                await nginx.stop()
                throw error
            }
            await nginx.stop()
        }

        static func broadcast(_ environment: TestEnvironment, to base: String, key: String) async throws -> BackgroundProcess {
            let env: [String: String?] = ["XDG_DATA_HOME": environment.directory.appendingPathComponent("data").path]
            let broadcast = try environment.startReplay(["broadcast", "--service", service, "--setup", "url=\(base)", "--setup", "key=\(key)"],
                                                        environment: env)
            try await BroadcastTests.waitFor("the broadcast URL on stdout") { broadcast.currentOutput.contains(base) }
            return broadcast
        }

        static func extensionLog(_ environment: TestEnvironment) -> String {
            let path = environment.runtimeDirectory.appendingPathComponent("openreplaykit/extension-\(service).log")
            return (try? String(contentsOf: path, encoding: .utf8)) ?? ""
        }

        /// A player (ffprobe) on `url`, started now, line-buffered (stdbuf), so that the first
        /// picture's line shows as it is decoded; half a second of analysis, as a live player would
        /// (ffprobe's default, 5 s, delayed the first picture 2.3 s). It is started while the stream
        /// is not (yet, or again) published, as a viewer who waits for it. (A player that joins a
        /// running stream gets its pictures from the next keyframe: nginx's `wait_video` keeps the
        /// sound back until then, `NginxRTMPServer`; without it ffprobe once in a few runs saw only
        /// sound in its half second, took the stream for sound alone and showed no picture.)
        static func startPlayer(of url: String) throws -> BackgroundProcess {
            try BackgroundProcess("stdbuf", arguments: ["-oL", "ffprobe", "-v", "verbose", "-rw_timeout", "15000000",
                                                        "-analyzeduration", "500000",
                                                        "-select_streams", "v:0", "-show_entries", "frame=width,height",
                                                        "-of", "csv=p=0", "-read_intervals", "%+#90", url])
        }

        /// Seconds from `since` until `player` prints its first decoded picture (its width and
        /// height, also returned); the player is stopped then.
        static func firstPicture(of player: BackgroundProcess, url: String, since: ContinuousClock.Instant,
                                 timeout: Duration = .seconds(15)) async throws -> (seconds: Double, size: String) {
            defer { player.signal(SIGKILL) }
            while ContinuousClock.now - since < timeout {
                if let line = player.currentOutput.split(separator: "\n").first(where: { $0.contains(",") }) {
                    let numbers = line.split(separator: ",").prefix(2).joined(separator: "x")
                    return ((ContinuousClock.now - since) / .seconds(1), numbers)
                }
                if !player.isRunning, player.currentOutput.isEmpty {
                    throw HarnessError("ffprobe read no picture from \(url): \(player.currentError.suffix(1000))")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw HarnessError("no picture from \(url) within \(timeout); ffprobe said: \(player.currentError.suffix(3000))")
        }

        /// Video packet times (seconds) of `seconds` of the live stream `url`, copied by ffmpeg.
        static func videoPacketTimes(of url: String, seconds: Int, in environment: TestEnvironment, name: String) async throws -> [Double] {
            let file = environment.outputPath(name)
            let read = try await ProcessRunner.run("ffmpeg", arguments: ["-nostdin", "-loglevel", "error", "-rw_timeout", "10000000",
                                                                           "-i", url, "-t", "\(seconds)", "-c", "copy", "-y", file],
                                                   timeout: .seconds(Double(seconds) + 30))
            guard read.succeeded else { throw HarnessError("ffmpeg could not read \(url): \(read)") }
            let probe = try await ProcessRunner.run("ffprobe", arguments: ["-v", "error", "-select_streams", "v:0", "-show_entries",
                                                                            "packet=pts_time", "-of", "csv=p=0", file],
                                                    timeout: .seconds(30))
            return probe.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        }

        @Test("A 5-s network cut: the extension says it is reconnecting, connects again by itself, and the stream is readable within 3 s of the network's return",
              .timeLimit(.minutes(3)))
        func networkCut() async throws {
            try await Self.withNginx { nginx in
                let proxy = try await TCPProxy(to: nginx.port)
                try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                    let url = "\(nginx.base)/cut"
                    let firstPlayer = try Self.startPlayer(of: url)
                    let started = ContinuousClock.now
                    let broadcast = try await Self.broadcast(environment, to: "rtmp://127.0.0.1:\(proxy.port)/live", key: "cut")
                    let before: (seconds: Double, size: String)
                    do { before = try await Self.firstPicture(of: firstPlayer, url: url, since: started) } catch {
                        Issue.record("no picture from the start; the extension's log: \(Self.extensionLog(environment).suffix(3000))\nnginx's log: \(nginx.log.suffix(3000))")
                        throw error
                    }
                    #expect(before.size == "640x480")

                    await proxy.stop()
                    let cutAt = ContinuousClock.now
                    try await BroadcastTests.waitFor("`replay broadcast` to say the stream is reconnecting", timeout: .seconds(5)) {
                        broadcast.currentError.contains("stream=reconnecting")
                    }
                    let status = try await environment.replay(["status"])
                    #expect(status.stdout.contains("stream=reconnecting"), "\(status)")
                    // A viewer waits for the stream to come back (the extension cannot publish again
                    // while the network is down).
                    let secondPlayer = try Self.startPlayer(of: url)
                    try await Task.sleep(until: cutAt + .seconds(5), clock: .continuous)

                    try await proxy.start()
                    let back = ContinuousClock.now
                    // When the extension says it is live again, beside ffprobe's first picture.
                    let lives = broadcast.currentError.components(separatedBy: "stream=live").count
                    async let reconnected: Double = {
                        while broadcast.currentError.components(separatedBy: "stream=live").count == lives,
                              ContinuousClock.now - back < .seconds(15) {
                            try await Task.sleep(for: .milliseconds(20))
                        }
                        return (ContinuousClock.now - back) / .seconds(1)
                    }()
                    let after: (seconds: Double, size: String)
                    do { after = try await Self.firstPicture(of: secondPlayer, url: url, since: back) } catch {
                        Issue.record("no picture after the network came back; the extension's log: \(Self.extensionLog(environment).suffix(3000))\nnginx's log: \(nginx.log.suffix(4000))")
                        throw error
                    }
                    print("network cut: live again \(try await reconnected) s and ffprobe read a picture \(after.seconds) s after the network came back (the first picture came \(before.seconds) s after the broadcast was asked for)")
                    #expect(after.seconds <= 3, "readable again within 3 s of the network's return: \(after.seconds) s")
                    #expect(after.size == "640x480")
                    try await BroadcastTests.waitFor("`replay status` to say the stream is live", timeout: .seconds(5)) {
                        broadcast.currentError.components(separatedBy: "stream=").last?.hasPrefix("live") == true
                    }

                    // The stream goes on: a few seconds of it, a picture at least every second.
                    let times = try await Self.videoPacketTimes(of: url, seconds: 3, in: environment, name: "after-cut.flv")
                    #expect(times.count >= 30, "\(times.count) pictures in 3 s after the cut")

                    let stop = try await environment.replay(["stop"])
                    #expect(stop.succeeded, "\(stop)")
                    let ended = try await broadcast.waitForExit(timeout: .seconds(20))
                    #expect(ended.succeeded, "\(ended)")
                    let log = Self.extensionLog(environment)
                    #expect(log.contains("reconnecting") && log.contains("reconnected"), "the extension's log says so: \(log.suffix(3000))")
                    #expect(log.contains("picturesSkipped"), "pictures skipped while down are counted: \(log.suffix(3000))")
                }
                await proxy.stop()
            }
        }

        @Test("A still screen: the stream carries a picture at least every second", .timeLimit(.minutes(2)))
        func stillScreen() async throws {
            try await Self.withNginx { nginx in
                try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480,
                                                                             content: TestContent.Options(mode: .still, audio: false))) { environment in
                    let broadcast = try await Self.broadcast(environment, to: nginx.base, key: "still")
                    try await Task.sleep(for: .seconds(1))
                    let times = try await Self.videoPacketTimes(of: "\(nginx.base)/still", seconds: 5, in: environment, name: "still.flv")
                    let gaps = zip(times, times.dropFirst()).map { $1 - $0 }
                    print("still screen: \(times.count) pictures in 5 s, longest gap \(gaps.max() ?? 0) s")
                    #expect(times.count >= 5, "at least a picture a second: \(times.count) in 5 s")
                    #expect((gaps.max() ?? 99) <= 1.0, "no second without a picture: \(gaps)")
                    let stop = try await environment.replay(["stop"])
                    #expect(stop.succeeded, "\(stop)")
                    _ = try await broadcast.waitForExit(timeout: .seconds(20))
                }
            }
        }

        @Test("The computer's sound and the microphone go out mixed in the one AAC track", .timeLimit(.minutes(2)))
        func soundAndMicrophone() async throws {
            try await Self.withNginx { nginx in
                try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                    let file = try await Self.recordedBroadcast(environment, nginx: nginx, key: "sound", arguments: ["--mic"])
                    let sound = try await ToneAnalyzer.decode(file: file, audioStream: 0, from: 0.5, to: 4.5)
                    print("sound and microphone: 440 Hz (the content) amplitude \(sound.amplitude(of: TestPattern.systemToneFrequency)), "
                        + "3000 Hz (the microphone) amplitude \(sound.amplitude(of: TestPattern.microphoneFrequency))")
                    #expect(sound.isPresent(TestPattern.systemToneFrequency), "the computer's sound is in the track")
                    #expect(sound.isPresent(TestPattern.microphoneFrequency), "the microphone is in the track")
                }
            }
        }

        /// The content flashes and beeps at the same instant; a flash is seen in the first picture
        /// captured after it (up to a frame, 33 ms, late). So for a stream whose sound is within 20 ms
        /// of its pictures, beep − flash lies within [−20 − 33.3, +20] ms, as for a recording
        /// (`RecordingTests.audioVideoOffset`); 10 ms more before and 20 after for FLV's millisecond
        /// times and the AAC blocks (14–27 ms after were seen here). Read from nginx's recording of the publish from its first packet: a player
        /// joining the live stream later gets sound and video each from a time zero of its own
        /// (nginx-rtmp's channels), 0.1–0.6 s apart, which says nothing of the stream.
        @Test("Each beep goes out with its flash (A/V within 20 ms)", .timeLimit(.minutes(2)))
        func beepsWithTheirFlashes() async throws {
            try await Self.withNginx { nginx in
                try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                    let file = try await Self.recordedBroadcast(environment, nginx: nginx, key: "av", arguments: [])
                    let offsets = ToneAnalyzer.avOffsets(flashes: try await ToneAnalyzer.flashTimes(file: file),
                                                         beeps: try await ToneAnalyzer.onsets(frequency: TestPattern.beepFrequency, in: file),
                                                         window: 0.4)
                    print("broadcast A/V: beep minus flash \(offsets.map { Int(($0 * 1000).rounded()) }) ms")
                    #expect(offsets.count >= 3, "a beep with each flash: \(offsets)")
                    for offset in offsets {
                        #expect(offset >= -0.030 - 1.0 / 30 && offset <= 0.040, "beep − flash = \(Int((offset * 1000).rounded())) ms")
                    }
                }
            }
        }

        /// Broadcasts the environment's content for 6 s to nginx's recording application and returns
        /// a copy of what nginx recorded, from the publish's first packet.
        static func recordedBroadcast(_ environment: TestEnvironment, nginx: NginxRTMPServer, key: String,
                                      arguments: [String]) async throws -> String {
            let env: [String: String?] = ["XDG_DATA_HOME": environment.directory.appendingPathComponent("data").path]
            let broadcast = try environment.startReplay(["broadcast", "--service", Self.service] + arguments
                                                        + ["--setup", "url=\(nginx.recordingBase)", "--setup", "key=\(key)"], environment: env)
            try await BroadcastTests.waitFor("the broadcast URL on stdout") { broadcast.currentOutput.contains(nginx.recordingBase) }
            try await Task.sleep(for: .seconds(6))
            do {
                let stop = try await environment.replay(["stop"])
                #expect(stop.succeeded, "\(stop)")
            } catch {
                // A stop that does not come back (seen once in a loaded fresh-clone run): what replayd and the extension said.
                Issue.record("\(error)\nreplayd's log: \(environment.replaydLog.suffix(4000))\nthe extension's log: \(Self.extensionLog(environment).suffix(2000))")
                throw error
            }
            _ = try await broadcast.waitForExit(timeout: .seconds(20))
            try await BroadcastTests.waitFor("nginx's recording of the stream") {
                FileManager.default.fileExists(atPath: nginx.recording(of: key).path)
            }
            try await Task.sleep(for: .milliseconds(500))   // nginx closes the file as the publish ends
            let file = environment.outputPath("\(key).flv")
            try FileManager.default.copyItem(at: nginx.recording(of: key), to: URL(fileURLWithPath: file))
            return file
        }

        @Test("A link slower than the stream: the bitrate ceiling comes down as packets wait, to what the link carries, and the broadcast goes on", .timeLimit(.minutes(3)))
        func slowLink() async throws {
            try await Self.withNginx { nginx in
                // 96 kb/s towards the server, under what the test content takes at 640x480 (about
                // 210 kb/s, 160 of them AAC): the queue grows once the socket buffers are full.
                let proxy = try await TCPProxy(to: nginx.port, bytesPerSecond: 12_000)
                try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                    let broadcast = try await Self.broadcast(environment, to: "rtmp://127.0.0.1:\(proxy.port)/live", key: "slow")
                    do {
                        try await BroadcastTests.waitFor("the ceiling to come down", timeout: .seconds(40)) {
                            Self.extensionLog(environment).contains("bitrate ceiling")
                        }
                    } catch {
                        Issue.record("\(error); the extension's log: \(Self.extensionLog(environment).suffix(3000))")
                    }
                    #expect(broadcast.isRunning, "the broadcast goes on: \(broadcast.currentError)")
                    let stop = try await environment.replay(["stop"])
                    #expect(stop.succeeded, "\(stop)")
                    _ = try await broadcast.waitForExit(timeout: .seconds(20))
                    let lines = Self.extensionLog(environment).split(separator: "\n").filter { $0.contains("bitrate ceiling") }
                    print("slow link (96 kb/s):\n" + lines.joined(separator: "\n"))
                    let ceilings = lines.compactMap { $0.firstMatch(of: /ceiling (\d+) kb\/s/).flatMap { Int($0.1) } }
                    // The video got about 30 kb/s through: the ceiling goes at once to its floor (250 kb/s at
                    // 640x480), not a quarter at a time through rates the encoder never reached.
                    #expect(ceilings.first.map { (250..<1000).contains($0) } == true, "\(lines)")
                    #expect(zip(ceilings, ceilings.dropFirst()).allSatisfy { $1 <= $0 }, "only down while the link stays slow: \(ceilings)")
                }
                await proxy.stop()
            }
        }
    }
}
