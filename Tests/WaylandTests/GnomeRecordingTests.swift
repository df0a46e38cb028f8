import Foundation
import ReplayTesting
import Testing

extension WaylandDesktops {
    /// The person's recordings on a Wayland desktop (issue 27, points 1 and 4): the built `replay`
    /// against a real, headless GNOME Shell with its screen-cast portal, PipeWire and pipewire-pulse
    /// (``GnomeSession``). The portal's dialog is answered through AT-SPI, as a person with a screen
    /// reader would (Support/answer-portal.py).
    ///
    /// One session for the whole suite (it takes 15–100 s to come up on 2 cores), so the steps run in
    /// order in one test: the first recording asks, the second does not (the restore token), and after
    /// `replay privacy reset` the third asks again; an app's own recording is refused and `replay
    /// doctor` says so; last, a recording with no end of its own is stopped from GNOME Shell's
    /// screen-sharing indicator, as a person would (Support/stop-sharing.py).
    @Suite(.serialized)
    struct GnomeRecordingTests {
        static let support = WaylandChecks.support
        static let python = WaylandChecks.python
        /// The window's colour, far from GNOME's greys and blues.
        static let colour = RGB(0x20, 0xC0, 0x40)
        static let toneFrequency = 440.0

        @Test("replay record on GNOME: the portal asks once, holds the window's colour and the tone; the token opens the next without a dialog; privacy reset asks again; an app's own session is refused; doctor; the desktop's stop button ends a recording",
              .timeLimit(.minutes(5)))
        func portalRecordings() async throws {
            let runtime = try await GnomeSession.with { session in
                let window = try session.startClient(Self.python, arguments: [
                    Self.support.appendingPathComponent("colour-window.py").path,
                    "\(Self.colour.r)", "\(Self.colour.g)", "\(Self.colour.b)", "--title", "colour",
                ])
                try await WaylandChecks.waitForOutput(window, containing: "shown", timeout: .seconds(60), rig: session)
                let tone = try session.startClient(Self.python, arguments: [
                    Self.support.appendingPathComponent("tone.py").path, "\(Int(Self.toneFrequency))",
                ])
                try await WaylandChecks.waitForOutput(tone, containing: "playing", timeout: .seconds(20), rig: session)

                try await firstRecordingAsks(session)
                try await secondRecordingUsesTheToken(session)
                try await privacyResetAsksAgain(session)
                try await appSessionsAreRefused(session)
                try await desktopStopButtonEndsTheRecording(session)

                #expect(window.isRunning && tone.isRunning, "the window and the tone outlived the recordings")
                return session.runtimeDirectory
            }
            let left = ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: runtime.path)
            #expect(left.isEmpty, "no process of the GNOME session is left after its tear-down: \(left)")
        }

        /// a. The dialog shows and is answered; the file holds the window's colour and the tone; the
        /// token is kept, 0600.
        func firstRecordingAsks(_ session: GnomeSession) async throws {
            let file = session.outputDirectory.appendingPathComponent("first.mp4").path
            let run = try await record(session, file: file, duration: 4, portal: .answer)
            try #require(run.replay.succeeded, "replay record (first): \(run.replay)\n\(diagnostics(session, run))")
            try #require(run.portalAsExpected, "the dialog was answered: \(run.portal)")

            let info = try await MediaProbe.probe(file)
            let video = try #require(info.videoStreams.first, "a video stream in \(file)")
            #expect(video.codecName == "h264")
            #expect(video.width == session.configuration.width && video.height == session.configuration.height,
                    "the monitor's size, \(session.configuration.width)x\(session.configuration.height): got \(video.width ?? 0)x\(video.height ?? 0)")
            let duration = try #require(info.format.duration ?? video.duration, "a duration")
            #expect(abs(duration - 4) <= 0.7, "about 4 s long: \(duration) s")

            // The screen is still: the compositor sends one picture, and the recording has it from its start.
            let firstPicture = try #require(try await MediaProbe.videoPictures(file).map(\.time).min(), "pictures in \(file)")
            #expect(firstPicture - (info.format.startTime ?? 0) <= 1, "a picture in the first second: the first is at \(firstPicture) s")

            let frameCount = try #require(video.readFrames, "frames counted")
            let middle = frameCount / 2
            let frames = try await FrameDecoder.frames(max(0, middle - 2)...max(0, middle - 2) + 4, in: file)
            for frame in frames {
                let share = WaylandChecks.share(of: Self.colour, in: frame)
                #expect(share > 0.8, "the window's colour \(Self.colour) fills the picture: \(Int(share * 100)) % of frame \(middle)±2")
            }

            try #require(info.audioStreams.count >= 1, "an audio track (the system sound through pipewire-pulse)")
            let audio = try await ToneAnalyzer.load(file: file, from: 0.5, to: max(1, duration - 0.3))
            let amplitude = audio.amplitude(frequency: Self.toneFrequency)
            #expect(audio.isPresent(frequency: Self.toneFrequency), "the \(Int(Self.toneFrequency)) Hz tone, amplitude \(amplitude)")
            let power = audio.relativePower(frequency: Self.toneFrequency)
            #expect(power > 0.5, "the tone is most of the sound: \(Int(power * 100)) % of its power")

            let token = Self.tokenPath(session)
            let attributes = try FileManager.default.attributesOfItem(atPath: token)
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
            #expect(mode == 0o600, "the restore token is private (0600): \(String(mode, radix: 8))")
            let contents = try String(contentsOfFile: token, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!contents.isEmpty, "the restore token is in \(token)")
        }

        /// b. With the token, no dialog and a valid file.
        func secondRecordingUsesTheToken(_ session: GnomeSession) async throws {
            let file = session.outputDirectory.appendingPathComponent("second.mp4").path
            let run = try await record(session, file: file, duration: 2, portal: .expectNone)
            try #require(run.replay.succeeded, "replay record (second, with the token): \(run.replay)\n\(diagnostics(session, run))")
            #expect(run.portalAsExpected, "no dialog with the restore token: \(run.portal)")
            let info = try await MediaProbe.probe(file)
            let video = try #require(info.videoStreams.first, "a video stream in \(file)")
            #expect(video.width == session.configuration.width && video.height == session.configuration.height)
            let duration = info.format.duration ?? video.duration ?? 0
            #expect(abs(duration - 2) <= 0.7, "about 2 s long: \(duration) s")
            let frame = try await FrameDecoder.frame(at: min(1, duration / 2), in: file)
            let share = WaylandChecks.share(of: Self.colour, in: frame)
            #expect(share > 0.8, "the window's colour: \(Int(share * 100)) %")
        }

        /// c. `replay privacy reset` forgets the token: the next recording asks again.
        func privacyResetAsksAgain(_ session: GnomeSession) async throws {
            let reset = try await session.run(try Binaries.replay(), arguments: ["privacy", "reset"], timeout: .seconds(30))
            try #require(reset.succeeded, "replay privacy reset: \(reset)")
            #expect(!FileManager.default.fileExists(atPath: Self.tokenPath(session)), "privacy reset deletes the restore token")
            let file = session.outputDirectory.appendingPathComponent("third.mp4").path
            let run = try await record(session, file: file, duration: 2, portal: .answer)
            try #require(run.replay.succeeded, "replay record (third, after privacy reset): \(run.replay)\n\(diagnostics(session, run))")
            #expect(run.portalAsExpected, "the dialog showed again and was answered: \(run.portal)")
            let info = try await MediaProbe.probe(file, countFrames: false)
            #expect(info.videoStreams.first?.width == session.configuration.width)
            #expect(FileManager.default.fileExists(atPath: Self.tokenPath(session)), "a new restore token is kept")
        }

        /// d. An app's own recording is refused on GNOME with WaylandSupport's words (no extension in
        /// this session), and replayd runs on; `replay doctor` says what the desktop offers.
        func appSessionsAreRefused(_ session: GnomeSession) async throws {
            try await WaylandChecks.expectAppSessionRefused(session, testApp: try Binaries.testApp(), replay: try Binaries.replay(),
                                                            naming: ["GNOME", "never cuts"])
            try await WaylandChecks.expectDoctor(session, replay: try Binaries.replay(),
                                                 saying: ["GNOME", "screen-cast portal", "Apps' own sessions: no"])
        }

        /// e. The desktop's own stop button: `replay record` with no end of its own, through the portal
        /// (the token from c: no dialog), is stopped from GNOME Shell's screen-sharing indicator in the top
        /// bar. The fullscreen window hides the top bar, so the overview shows first (as the Super key
        /// would). The recording ends by itself, finished: `replay` exits 0 with the file, says the person
        /// stopped it, and the file plays with the window's colour; replayd runs on.
        func desktopStopButtonEndsTheRecording(_ session: GnomeSession) async throws {
            let file = session.outputDirectory.appendingPathComponent("stopped-from-the-indicator.mp4").path
            let watcher = try session.startClient(Self.python, arguments: [
                Self.support.appendingPathComponent("answer-portal.py").path, "--expect-none", "600",
            ])
            let replay = try session.startClient(try Binaries.replay(), arguments: ["record", "--output", file])
            let result: ProcessResult
            let click: ProcessResult
            let daemons: Set<Int32>
            do {
                try await WaylandChecks.waitUntilRecording(session, replay: try Binaries.replay(), recorder: replay)
                daemons = WaylandChecks.replayds(session)
                // Two seconds of the window before the overview covers it.
                try await Task.sleep(for: .seconds(2))
                try await session.setOverviewActive(true)
                click = try await session.run(Self.python, arguments: [Self.support.appendingPathComponent("stop-sharing.py").path,
                                                                       "--timeout", "20"], timeout: .seconds(40))
                try #require(click.succeeded, "the indicator's stop button was found and clicked: \(click)\n\(diagnostics(session))")
                result = try await replay.waitForExit(timeout: .seconds(30))
            } catch {
                await session.stopClient(replay)
                await session.stopClient(watcher)
                try? await session.setOverviewActive(false)
                throw error
            }
            let sawNoDialog = watcher.isRunning
            await session.stopClient(watcher)
            try? await session.setOverviewActive(false)
            #expect(sawNoDialog, "no dialog with the restore token: \(watcher.currentError)")

            #expect(result.succeeded, "replay record ended by itself, exit 0: \(result)\n\(diagnostics(session))")
            #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == file, "replay printed the file: \(result.stdout)")
            #expect(result.stderr.contains("stopped by the person"), "replay said the person stopped it: \(result.stderr)")
            let log = WaylandChecks.replaydLog(session)
            #expect(log.contains("stopped by the person"), "replayd logged the person's stop: \(log.suffix(2000))")
            let crash = await WaylandChecks.replaydCrash(session)
            #expect(crash == nil, "replayd did not crash when the desktop ended the screen sharing:\n\(crash ?? "")")
            #expect(!daemons.isEmpty && daemons.isSubset(of: WaylandChecks.replayds(session)),
                    "the replayd that recorded runs on (\(daemons) during the recording, \(WaylandChecks.replayds(session)) after)")

            let info = try await MediaProbe.probe(file)
            let video = try #require(info.videoStreams.first, "a video stream in \(file)")
            #expect(video.codecName == "h264")
            #expect(video.width == session.configuration.width && video.height == session.configuration.height)
            let duration = try #require(info.format.duration ?? video.duration, "a duration")
            #expect(duration > 0.5, "more than half a second: \(duration) s")
            #expect((video.readFrames ?? 0) > 0, "its frames decode: \(video.readFrames ?? 0)")
            let problem = try await WaylandChecks.decodingProblem(file)
            #expect(problem == nil, "every frame decodes without an error: \(problem ?? "")")
            let frame = try await WaylandChecks.frame(shownAt: 1, in: file)
            let share = WaylandChecks.share(of: Self.colour, in: frame)
            #expect(share > 0.8, "the window's colour at 1 s, before the overview: \(Int(share * 100)) %")
            WaylandChecks.logger.debug("stopped from the indicator", metadata: [
                "click": "\(click.stdout)", "status": "\(result.status)", "stdout": "\(result.stdout)", "stderr": "\(result.stderr)",
                "duration": "\(duration)", "frames": "\(video.readFrames ?? 0)", "colour at 1 s": "\(share)",
                "replayd crashed": "\(crash != nil)",
            ])
        }

        // MARK: Helpers

        enum PortalExpectation {
            /// The dialog shows: answer it (select the monitor, press Share).
            case answer
            /// No dialog may show while the recording starts.
            case expectNone
        }

        struct RecordingRun {
            var replay: ProcessResult
            /// The dialog's helper did what was expected: answered the dialog, or saw none.
            var portalAsExpected: Bool
            /// What the helper said.
            var portal: String
        }

        /// `replay record --duration N --output FILE` with the session's environment, with the dialog's
        /// helper running beside it: answering the dialog, or watching that none shows until `replay`
        /// has finished. A helper that fails (no dialog to answer, or one where none was expected)
        /// ends the wait at once.
        func record(_ session: GnomeSession, file: String, duration: Int, portal: PortalExpectation) async throws -> RecordingRun {
            let answer = Self.support.appendingPathComponent("answer-portal.py").path
            let helper = try session.startClient(Self.python, arguments: portal == .answer
                ? [answer, "--timeout", "60"]
                : [answer, "--expect-none", "600"])
            let replay = try session.startClient(try Binaries.replay(), arguments: ["record", "--duration", "\(duration)", "--output", file])
            func said() -> String { "\(helper.currentOutput)\(helper.currentError)" }
            let deadline = ContinuousClock.now + .seconds(90 + duration)
            while true {
                if let result = replay.result {
                    switch portal {
                    case .answer:
                        // A recording that ran had its dialog answered already; a helper still waiting saw none.
                        guard let answered = try? await helper.waitForExit(timeout: .seconds(5)) else {
                            await session.stopClient(helper)
                            return RecordingRun(replay: result, portalAsExpected: false, portal: "no dialog showed: \(said())")
                        }
                        return RecordingRun(replay: result, portalAsExpected: answered.succeeded, portal: answered.description)
                    case .expectNone:
                        let sawNone = helper.isRunning
                        await session.stopClient(helper)
                        return RecordingRun(replay: result, portalAsExpected: sawNone, portal: said())
                    }
                }
                if let failed = helper.result, !(portal == .answer && failed.succeeded) {
                    await session.stopClient(replay)
                    throw HarnessError("the dialog's helper failed while `replay record` ran: \(failed)\nreplay so far: \(replay.currentError)\n\(diagnostics(session))")
                }
                if ContinuousClock.now >= deadline {
                    await session.stopClient(replay)
                    await session.stopClient(helper)
                    throw HarnessError("`replay record --duration \(duration)` still runs after \(90 + duration) s\nthe dialog's helper said: \(said())\n\(diagnostics(session))")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }

        /// replayd's log and the session's, for a recording that failed.
        func diagnostics(_ session: GnomeSession, _ run: RecordingRun? = nil) -> String {
            let replaydLog = (try? String(contentsOf: session.runtimeDirectory.appendingPathComponent("openreplaykit/replayd.log"),
                                          encoding: .utf8)) ?? "(none)"
            return (run.map { "the dialog's helper: \($0.portal)\n" } ?? "")
                + "replayd's log (end):\n\(replaydLog.suffix(3000))\n\(session.logTails(lines: 25))"
        }

        /// `$XDG_STATE_HOME/openreplaykit/portal-restore-token`.
        static func tokenPath(_ session: GnomeSession) -> String {
            session.stateDirectory.appendingPathComponent("openreplaykit/portal-restore-token").path
        }
    }
}
