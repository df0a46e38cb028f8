import Foundation
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SystemTests {
    /// `replay broadcast` through installed upload extensions: the seed's SampleHandler as an
    /// installed extension (in a temporary XDG_DATA_HOME), the RTMP extension to nginx-rtmp, and
    /// extensions that crash, hang, go over their memory limit or give up.
    @Suite("replay broadcast: upload extensions")
    struct BroadcastTests {
        static let seedID = "org.openreplaykit.test.seed"

        /// Installs the test extension (the seed's SampleHandler) as `identifier` under `dataHome`.
        static func installSeed(_ identifier: String = seedID, in dataHome: URL) throws -> URL {
            let folder = dataHome.appendingPathComponent("openreplaykit/extensions/\(identifier).orkextension")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let executable = folder.appendingPathComponent("seed-upload")
            try? FileManager.default.removeItem(at: executable)
            try Binaries.copyExecutable(from: try Binaries.path("replay-testextension"), to: executable.path)
            let manifest = #"{"identifier": "\#(identifier)", "displayName": "Seed Service", "kind": "broadcast-upload", "executable": "seed-upload", "appGroup": "org.openreplaykit.test", "containingApplication": "org.openreplaykit.test.SeedApp"}"#
            try Data(manifest.utf8).write(to: folder.appendingPathComponent("manifest.json"))
            return folder
        }

        static func events(in folder: URL) -> [String] {
            ((try? String(contentsOf: folder.appendingPathComponent("events.log"), encoding: .utf8)) ?? "")
                .split(separator: "\n").map(String.init)
        }

        static func waitFor(_ what: String, timeout: Duration = .seconds(20), _ condition: () -> Bool) async throws {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if condition() { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw HarnessError("timed out waiting for \(what)")
        }

        /// Asks the window manager to put the window of `classname` in front (xdotool, which waits for
        /// the window to exist), again every 2 s, until `condition` holds (at most 20 s).
        static func bringToFront(_ classname: String, _ what: String, _ environment: TestEnvironment, until condition: () -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                _ = try await ProcessRunner.run("xdotool", arguments: ["search", "--sync", "--classname", classname, "windowactivate"],
                                                environment: environment.environment, timeout: .seconds(10))
                let asked = ContinuousClock.now
                while ContinuousClock.now < asked + .seconds(2) {
                    if condition() { return }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            throw HarnessError("timed out waiting for \(what)")
        }

        static func dataHome(_ environment: TestEnvironment) -> URL {
            environment.directory.appendingPathComponent("data")
        }

        @Test("The seed's SampleHandler, installed: pictures, app sound, annotations on a focus change, then paused, resumed, finished in order",
              .timeLimit(.minutes(3)))
        func seedExtension() async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                let dataHome = Self.dataHome(environment)
                let folder = try Self.installSeed(in: dataHome)
                let env: [String: String?] = ["XDG_DATA_HOME": dataHome.path]
                let windowManager = try BackgroundProcess("openbox", arguments: ["--sm-disable"], environment: environment.environment)
                defer { windowManager.signal(SIGTERM) }

                let listed = try await environment.replay(["services", "--json"], environment: env)
                #expect(listed.succeeded, "\(listed)")
                #expect(listed.stdout.contains(Self.seedID))

                let broadcast = try environment.startReplay(["broadcast", "--service", Self.seedID, "--title", "Seed test", "--setup", "login=yes"],
                                                            environment: env)
                try await Self.waitFor("the first picture and app sound") {
                    let lines = Self.events(in: folder)
                    return lines.contains { $0.hasPrefix("first picture") } && lines.contains { $0.hasPrefix("first app audio") }
                }
                let started = Self.events(in: folder)
                #expect(started.contains { $0.hasPrefix("started") && $0.contains("title=Seed test") && $0.contains("login=yes") }, "\(started)")
                #expect(started.contains("first picture 640x480 at") || started.contains { $0.hasPrefix("first picture 640x480") }, "\(started)")

                // Two applications, one after the other in front, as openbox says. Each is put in front
                // as a person would, through the window manager (xdotool asks openbox with
                // _NET_ACTIVE_WINDOW), not left to openbox's focus of new windows, which its focus-stealing
                // prevention may refuse (once in make test: no annotation in 20 s).
                let first = try BackgroundProcess("xmessage", arguments: ["-name", "first", "first window"], environment: environment.environment)
                defer { first.signal(SIGTERM) }
                try await Self.bringToFront("first", "an annotation for xmessage", environment) { Self.events(in: folder).contains("annotated xmessage") }
                // A second application: the same program under another name (its identifier is its executable's name).
                let other = environment.directory.appendingPathComponent("other-app").path
                try Binaries.copyExecutable(from: "/usr/bin/xmessage", to: other)
                let second = try BackgroundProcess(other, arguments: ["-name", "second", "second window"], environment: environment.environment)
                defer { second.signal(SIGTERM) }
                try await Self.bringToFront("second", "an annotation for the second app", environment) { Self.events(in: folder).contains("annotated other-app") }
                try await Self.bringToFront("first", "the first app annotated again", environment) {
                    Self.events(in: folder).filter { $0 == "annotated xmessage" }.count >= 2
                }

                let status = try await environment.replay(["status"], environment: env)
                #expect(status.stdout.contains("broadcasting to \(Self.seedID)"), "\(status)")

                #expect(try await environment.replay(["broadcast", "pause"], environment: env).succeeded)
                try await Self.waitFor("paused") { Self.events(in: folder).contains("paused") }
                #expect(try await environment.replay(["broadcast", "resume"], environment: env).succeeded)
                try await Self.waitFor("resumed") { Self.events(in: folder).contains("resumed") }
                let stop = try await environment.replay(["stop"], environment: env)
                #expect(stop.succeeded, "\(stop)")
                let ended = try await broadcast.waitForExit(timeout: .seconds(20))
                #expect(ended.succeeded, "\(ended)")

                let lines = Self.events(in: folder)
                let order = ["started", "media engine", "first picture", "annotated xmessage", "annotated other-app", "paused", "resumed", "finished"].map { key in
                    lines.firstIndex { $0.hasPrefix(key) } ?? -1
                }
                #expect(!order.contains(-1) && order == order.sorted(), "events in order: \(lines)")
                #expect(lines.last == "finished", "\(lines)")
                #expect(ProcessTable.isAlive(environment.replaydPID() ?? -1), "replayd goes on")
            }
        }

        enum Misbehaviour: String, CaseIterable, CustomTestStringConvertible, Sendable {
            case crash, hang, memory, fail, notLoggedIn
            var testDescription: String { rawValue }
            var setup: String { self == .notLoggedIn ? "login=no" : "behave=\(rawValue)" }
            /// Words the person must read.
            var keywords: [String] {
                switch self {
                case .crash: ["Seed Service", "crashed", "signal 6"]
                case .hang: ["Seed Service", "heartbeat", "hangs", "pictures were dropped because the extension was not ready"]
                case .memory: ["Seed Service", "MB", "limit of 50 MB"]
                // finishBroadcastWithError offers the service's own app (the manifest's containingApplication).
                case .fail: ["Seed Service", "the test service refused the stream", "gtk-launch org.openreplaykit.test.SeedApp"]
                case .notLoggedIn: ["Seed Service", "Not Logged In", "401", "gtk-launch org.openreplaykit.test.SeedApp"]
                }
            }
        }

        @Test("An extension that crashes, hangs, goes over its memory limit or gives up ends its broadcast with its reason; replayd lives on",
              .timeLimit(.minutes(2)), arguments: Misbehaviour.allCases)
        func misbehavingExtension(_ misbehaviour: Misbehaviour) async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                let dataHome = Self.dataHome(environment)
                _ = try Self.installSeed(in: dataHome)
                let env: [String: String?] = ["XDG_DATA_HOME": dataHome.path]
                let result = try await environment.replay(["broadcast", "--service", Self.seedID, "--setup", misbehaviour.setup],
                                                          environment: env, timeout: .seconds(60))
                #expect(!result.succeeded, "\(result)")
                for keyword in misbehaviour.keywords {
                    #expect(result.stderr.contains(keyword), "\(keyword) in \(result.stderr)")
                }
                // replayd is still there and takes the next session.
                #expect(ProcessTable.isAlive(environment.replaydPID() ?? -1), "replayd goes on")
                let status = try await environment.replay(["status"], environment: env)
                #expect(status.succeeded, "\(status)")
            }
        }

        @Test("An unknown service and a broken manifest are said in words", .timeLimit(.minutes(1)))
        func badServices() async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480, content: nil)) { environment in
                let dataHome = Self.dataHome(environment)
                let broken = dataHome.appendingPathComponent("openreplaykit/extensions/org.example.broken.orkextension")
                try FileManager.default.createDirectory(at: broken, withIntermediateDirectories: true)
                try Data(#"{"identifier": "org.example.broken", "displayName": "Broken", "kind": "broadcast-download", "executable": "x"}"#.utf8)
                    .write(to: broken.appendingPathComponent("manifest.json"))
                let env: [String: String?] = ["XDG_DATA_HOME": dataHome.path]

                let services = try await environment.replay(["services"], environment: env)
                #expect(services.succeeded, "\(services)")
                #expect(services.stderr.contains("org.example.broken.orkextension/manifest.json") && services.stderr.contains("\"kind\""), "\(services)")
                #expect(services.stdout.contains("org.openreplaykit.rtmp"), "the shipped RTMP extension is found beside replay: \(services)")
                #expect(services.stdout.contains("org.openreplaykit.reference"), "the shipped reference-service extension too: \(services)")

                let unknown = try await environment.replay(["broadcast", "--service", "org.example.nothing"], environment: env)
                #expect(!unknown.succeeded)
                #expect(unknown.stderr.contains("org.example.nothing") && unknown.stderr.contains("replay services"), "\(unknown)")

                // Without --service the picker window asks, listing the installed services; Escape cancels.
                async let none = environment.replay(["broadcast"], environment: env)
                try await SystemWindowKeys.press(["Escape"], in: "openreplaykit-picker", environment: environment.environment)
                let cancelled = try await none
                #expect(!cancelled.succeeded)
                #expect(cancelled.stderr.contains("cancelled the broadcast in the picker"), "\(cancelled)")
            }
        }

        @Test("The RTMP extension sends the screen and its sound to nginx-rtmp, read back by ffprobe", .timeLimit(.minutes(3)))
        func rtmpToNginx() async throws {
            let nginx = try await NginxRTMPServer.start()
            do {
                try await sendToNginx(nginx)
            } catch {
                await nginx.stop()
                throw error
            }
            await nginx.stop()
        }

        private func sendToNginx(_ nginx: NginxRTMPServer) async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                let env: [String: String?] = ["XDG_DATA_HOME": Self.dataHome(environment).path]
                let broadcast = try environment.startReplay(["broadcast", "--service", "org.openreplaykit.rtmp", "--mic",
                                                             "--setup", "url=\(nginx.base)", "--setup", "key=seed"], environment: env)
                try await Self.waitFor("the broadcast URL on stdout") { broadcast.currentOutput.contains(nginx.base) }
                try await Task.sleep(for: .seconds(2))
                let file = environment.outputPath("from-nginx.flv")
                let read = try await ProcessRunner.run("ffmpeg", arguments: ["-nostdin", "-loglevel", "error", "-rw_timeout", "10000000",
                                                                               "-i", "\(nginx.base)/seed", "-t", "4", "-c", "copy", "-y", file],
                                                       timeout: .seconds(40))
                #expect(read.succeeded, "\(read)")
                let info = try await MediaProbe.probe(file)
                let video = info.streams.first { $0.codecType == "video" }
                let audio = info.streams.first { $0.codecType == "audio" }
                #expect(video?.codecName == "h264" && video?.width == 640 && video?.height == 480, "\(info.streams)")
                #expect(video?.colorRange == "pc", "the ring's full-range pictures go out marked full range: \(info.streams)")
                #expect(audio?.codecName == "aac", "\(info.streams)")
                #expect((video?.readFrames ?? 0) >= 4, "at least a picture a second: \(String(describing: video?.readFrames))")
                let stop = try await environment.replay(["stop"], environment: env)
                #expect(stop.succeeded, "\(stop)")
                let ended = try await broadcast.waitForExit(timeout: .seconds(20))
                #expect(ended.succeeded, "\(ended)")
            }
        }
    }
}
