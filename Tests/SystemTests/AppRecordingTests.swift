import Foundation
import ReplayTesting
import Testing

/// An app's own recording end to end: start, stop, discard, a second start, interruption by the
/// person's `replay record`, and an app that disconnects mid-session. These need app-scoped
/// capture in the engine (`VideoSource.application`).
extension SystemTests.AppSessionTests {
    typealias App = SystemTests.AppSessionTests

    /// Another app beside the test app: a red window at (100, 100), 300x300.
    static func otherApp(_ environment: TestEnvironment) async throws -> ReplayTesting.TestApp {
        try await ReplayTesting.TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                              options: .init(colour: 0xff0000, rect: PixelRect(x: 100, y: 100, width: 300, height: 300)))
    }

    /// The step that gives the test app a window of its own (a child process drawing blue).
    static func window() throws -> String {
        "child=" + [try Binaries.testContent(), "--app", "200x200+50+50", "--colour", "0000ff", "--no-audio"].joined(separator: "|")
    }

    @Test func startStopAndDiscardThroughTheLibrary() async throws {
        try await TestEnvironment.with { environment in
            let replayd = try await App.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
            let out = environment.outputPath("app.mp4")
            let lines = try await App.app(environment, [try App.window(), "start", "start", "sleep=2", "stop-to=/nonexistent/folder/x.mp4",
                                                        "stop-to=\(out)", "stop", "start", "sleep=1", "discard",
                                                        "start", "sleep=1", "stop", "discard"])
            #expect(lines[1]["ok"] as? Bool == true, "started: \(lines)")
            #expect(App.code(lines[2]) == -5830, "attemptToStartInRecordingState: \(lines[2])")
            #expect(App.code(try App.line(lines, "stop-to=/nonexistent/folder/x.mp4")) == -5835, "filePermissions")
            #expect(try App.line(lines, "stop-to=\(out)")["ok"] as? Bool == true, "\(lines)")
            #expect(App.code(try App.line(lines, "stop")) == -5829, "stop with nothing recording")
            let info = try await MediaProbe.probe(out)
            #expect(info.videoStreams.count == 1)
            #expect((info.format.duration ?? 0) > 1.5, "\(info.format)")
            #expect(App.appRecordings(environment).isEmpty, "discarded and kept recordings are gone")
        }
    }

    /// An app that plays sound hears "started" when its recording has begun: the sound server's first
    /// samples can take a second, and a recording stopped 2 s after its start lasts 2 s, not one.
    @Test func theStartIsAnsweredWhenTheRecordingHasBegun() async throws {
        try await TestEnvironment.with(.init(content: nil)) { environment in
            let replayd = try await App.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
            let child = [try Binaries.testContent(), "--app", "200x200+50+50", "--colour", "0000ff", "--tone", "700"].joined(separator: "|")
            let out = environment.outputPath("sounding.mp4")
            let lines = try await App.app(environment, ["child=\(child)", "start", "sleep=2", "stop-to=\(out)"])
            #expect(try App.line(lines, "stop-to=\(out)")["ok"] as? Bool == true, "\(lines)")
            let info = try await MediaProbe.probe(out)
            #expect(info.audioStreams.count == 1, "its own sound: \(info)")
            let duration = info.format.duration ?? 0
            #expect(duration > 1.8 && duration < 2.6, "\(duration) s recorded between a start and a stop 2 s apart")
        }
    }

    /// The app's recording holds its own window (drawn by its child process) and not another
    /// app's beside it.
    @Test func theAppsRecordingHoldsOnlyItsOwnWindow() async throws {
        try await TestEnvironment.with(.init(content: nil)) { environment in
            let replayd = try await App.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
            let other = try await App.otherApp(environment)
            defer { Task { await other.stop() } }
            let out = environment.outputPath("own.mp4")
            let child = [try Binaries.testContent(), "--app", "300x300+600+100", "--colour", "00ff00", "--no-audio"].joined(separator: "|")
            let lines = try await App.app(environment, ["child=\(child)", "start", "sleep=2", "stop-to=\(out)"])
            #expect(try App.line(lines, "stop-to=\(out)")["ok"] as? Bool == true, "\(lines)")
            let frame = try await FrameDecoder.frame(at: 1.0, in: out)
            let own = frame.pixel(x: 750, y: 250)
            let others = frame.pixel(x: 250, y: 250)
            #expect(own.isClose(to: RGB(0, 255, 0)), "its own green window: \(own)")
            #expect(others.isClose(to: RGB(0, 0, 0)), "black where the other app's red window is: \(others)")
        }
    }

    /// Another app's window reparented into the app's own during its recording (`xdotool
    /// windowreparent`, as the attack was tried): Composite would draw it into the app's pixmap,
    /// but it is not the app's, so it is black there, and the rest of the app's window still shows.
    @Test func anotherAppsWindowReparentedIntoTheAppsIsBlack() async throws {
        try await TestEnvironment.with(.init(content: nil)) { environment in
            let replayd = try await App.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }
            let other = try await App.otherApp(environment)
            defer { Task { await other.stop() } }
            let victim = try #require(other.output.split(separator: " ").first { $0.hasPrefix("0x") }.map(String.init), "\(other.output)")
            let out = environment.outputPath("reparented.mp4")
            let child = [try Binaries.testContent(), "--app", "400x400+600+100", "--colour", "00ff00", "--no-audio"].joined(separator: "|")
            let app = try await App.startApp(environment, ["child=\(child)", "start", "sleep=4", "stop-to=\(out)"], reporting: "start")
            try #require(app.currentOutput.contains(#""ok":true"#), "the app did not start: \(app.currentOutput)")
            let found = try await ProcessRunner.run("xdotool", arguments: ["search", "--name", "replay-testcontent app"],
                                                    environment: environment.environment, timeout: .seconds(10))
            let own = try #require(found.stdout.split(separator: "\n").map(String.init).first { UInt32($0) != UInt32(victim.dropFirst(2), radix: 16) },
                                   "the app's window among \(found.stdout)")
            // Into the app's window at (0, 0): the red window now covers its top-left 300x300.
            let reparent = try await ProcessRunner.run("xdotool", arguments: ["windowreparent", victim, own],
                                                       environment: environment.environment, timeout: .seconds(10))
            #expect(reparent.succeeded, "\(reparent)")
            let result = try await app.waitForExit(timeout: .seconds(60))
            #expect(App.lines(result.stdout).first { $0["step"] as? String == "stop-to=\(out)" }?["ok"] as? Bool == true, "\(result)")
            // The screen itself shows the red window inside the green one: the attack took place.
            let screen = try await environment.xvfb.screenshot()
            #expect(screen.pixel(x: 700, y: 200).isClose(to: RGB(255, 0, 0)), "red inside the app's window on screen: \(screen.pixel(x: 700, y: 200))")
            let frame = try await FrameDecoder.frame(at: 3.0, in: out)
            #expect(frame.pixel(x: 700, y: 200).isClose(to: RGB(0, 0, 0)), "black where the other app's window is: \(frame.pixel(x: 700, y: 200))")
            #expect(frame.pixel(x: 950, y: 450).isClose(to: RGB(0, 255, 0)), "the app's own green still shows: \(frame.pixel(x: 950, y: 450))")
        }
    }

    @Test func thePersonsRecordingInterruptsTheApp() async throws {
        try await TestEnvironment.with { environment in
            let replayd = try await App.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
            let app = try await App.startApp(environment, [try App.window(), "start", "wait-stopped=60"], reporting: "start", timeout: .seconds(15))
            defer { Task { await app.terminate() } }
            #expect(app.currentOutput.contains("\"ok\":true"), "\(app.currentOutput)")
            #expect(App.appRecordings(environment).count == 1, "the app's file is being written")
            let record = try await environment.replay(["record", "--duration", "2", "-o", environment.outputPath("person.mp4")], timeout: .seconds(60))
            #expect(record.succeeded, "\(record)")
            let result = try await app.waitForExit(timeout: .seconds(30))
            let stopped = try App.line(App.lines(result.stdout), "wait-stopped=60")
            #expect(App.code(stopped) == -5806, "interrupted: \(stopped)")
            #expect(stopped["domain"] as? String == "com.apple.ReplayKit.RPRecordingErrorDomain")
            #expect(App.appRecordings(environment).isEmpty, "the app's recording was discarded")
            #expect(FileManager.default.fileExists(atPath: environment.outputPath("person.mp4")))
        }
    }

    @Test func thePersonsBroadcastInterruptsTheApp() async throws {
        try await TestEnvironment.with { environment in
            // replayd reads the extensions of its own environment: $HOME/.local/share here.
            let folder = try SystemTests.BroadcastTests.installSeed(in: environment.homeDirectory.appendingPathComponent(".local/share"))
            let replayd = try await App.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
            let app = try await App.startApp(environment, [try App.window(), "start", "wait-stopped=60"], reporting: "start", timeout: .seconds(15))
            defer { Task { await app.terminate() } }
            #expect(app.currentOutput.contains("\"ok\":true"), "\(app.currentOutput)")
            let broadcast = try environment.startReplay(["broadcast", "--service", SystemTests.BroadcastTests.seedID])
            let result = try await app.waitForExit(timeout: .seconds(30))
            let stopped = try App.line(App.lines(result.stdout), "wait-stopped=60")
            #expect(App.code(stopped) == -5806, "interrupted: \(stopped)")
            #expect(App.appRecordings(environment).isEmpty, "the app's recording was discarded")
            do {
                // Its extension starts after the app's session has ended (a loaded machine: up to 40 s).
                try await SystemTests.BroadcastTests.waitFor("the broadcast's first picture", timeout: .seconds(40)) {
                    SystemTests.BroadcastTests.events(in: folder).contains { $0.hasPrefix("first picture") }
                }
            } catch {
                let status = try? await environment.replay(["status"])
                let said = "replay broadcast said: \(broadcast.currentOutput) \(broadcast.currentError)"
                let seen = "the extension: \(SystemTests.BroadcastTests.events(in: folder)); replay status: \(status?.stdout ?? "-")"
                Issue.record("\(error)\n\(said)\n\(seen)\nreplayd: \(String(replayd.currentError.suffix(3000)))")
                throw error
            }
            #expect(try await environment.replay(["stop"]).succeeded)
            let ended = try await broadcast.waitForExit(timeout: .seconds(20))
            #expect(ended.succeeded, "\(ended)")
        }
    }

    @Test func anAppThatDisconnectsLosesItsSessionAndItsFile() async throws {
        try await TestEnvironment.with { environment in
            let replayd = try await App.startReplayd(environment, consent: "allow")
            let app = try BackgroundProcess(try Binaries.testApp(), arguments: [try App.window(), "start", "hold"], environment: environment.environment)
            for _ in 0..<300 where !app.currentOutput.contains("hold") { try await Task.sleep(for: .milliseconds(50)) }
            #expect(App.appRecordings(environment).count == 1, "\(app.currentOutput)")
            app.signal(SIGKILL)
            _ = try await app.waitForExit(timeout: .seconds(5))
            // Up to 20 s: the check is that it happens, not how fast.
            var left = App.appRecordings(environment)
            for _ in 0..<400 where !left.isEmpty {
                try await Task.sleep(for: .milliseconds(50))
                left = App.appRecordings(environment)
            }
            #expect(left.isEmpty, "the half file is removed: \(left)")
            #expect(replayd.isRunning)
            #expect(try await environment.replay(["status"]).stdout.contains("nothing is recording"))
        }
    }
}

extension SystemTests.AppSessionTests {
    /// In-app capture through the library: the app's own pictures (its green window, black where
    /// another app's red window is) and its own sound come to its handler in time order, through the
    /// frame ring replayd hands it once.
    @Test func theAppsCaptureHoldsOnlyItsOwnWindowAndSound() async throws {
        try await TestEnvironment.with(.init(content: nil)) { environment in
            let replayd = try await App.startReplayd(environment, consent: "allow")
            defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
            let other = try await App.otherApp(environment)
            defer { Task { await other.stop() } }
            let child = [try Binaries.testContent(), "--app", "300x300+600+100", "--colour", "00ff00", "--tone", "700"].joined(separator: "|")
            let lines = try await App.app(environment, ["child=\(child)", "capture=3@750,250@250,250", "capture=1"])
            let capture = try App.line(lines, "capture=3@750,250@250,250")
            #expect(capture["ok"] as? Bool == true, "\(lines)")
            let video = capture["video"] as? Int ?? 0
            // A still window: the first picture, then one a second (pictures follow changes, as ReplayKit's).
            #expect(video >= 3, "pictures arrive: \(capture)")
            #expect(capture["timesIncrease"] as? Bool == true, "in time order: \(capture)")
            #expect(capture["width"] as? Int == environment.xvfb.width && capture["height"] as? Int == environment.xvfb.height, "\(capture)")
            #expect((capture["audioApp"] as? Int ?? 0) > 50, "its own sound, in chunks: \(capture)")
            #expect((capture["appPeak"] as? Double ?? 0) > 0.05, "the app's tone is heard: \(capture)")
            #expect((capture["audioMic"] as? Int ?? -1) == 0, "no microphone unless enabled: \(capture)")
            let ycbcr = { (key: String) -> [Int] in ((capture[key] as? String) ?? "").split(separator: ",").compactMap { Int($0) } }
            let own = ycbcr("ycbcr0"), others = ycbcr("ycbcr1")
            // Full range ('420f'): black Y 0, green Y 150 Cb 44 Cr 21 (video range's 16 and 144, 54, 34 would fail).
            #expect(FullRangeLevels.isClose(own, to: FullRangeLevels.green, tolerance: 5), "its own green window, full range: \(own)")
            #expect(FullRangeLevels.isClose(others, to: FullRangeLevels.black), "black (full range) where the other app's red window is: \(others)")
            // A second capture after the first stopped: the ring is handed over again.
            #expect(try App.line(lines, "capture=1")["ok"] as? Bool == true, "\(lines)")
        }
    }
}
