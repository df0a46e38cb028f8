import Foundation
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension WaylandDesktops {
    /// The person's recordings on sway (issue 27, point 4): the built `replay` against a real, headless
    /// sway 1.7 with xdg-desktop-portal-wlr (no dialog: `chooser_type=none`), PipeWire and pipewire-pulse
    /// (``SwaySession``), everything run as nobody (sway refuses root). xdg-desktop-portal-wlr 0.7 needs
    /// the shim in Support/xdpw-shm-shim.c without a GPU; the session compiles it at start.
    ///
    /// One session, the steps in order: a recording holds a native Wayland window's colour from its
    /// first second (the screen is still when it starts) and the window's new colour once it redraws
    /// itself; a second recording of the still screen has its picture from its first second too
    /// (measured with xdg-desktop-portal-wlr 0.7 in the probe: a second screen cast of a still desktop
    /// got no first picture until something was drawn); an app's own recording is refused (sway 1.7
    /// copies whole outputs only); `replay doctor` names sway.
    @Suite(.serialized)
    struct SwayRecordingTests {
        /// The window's colour before and after it redraws itself, both far from sway's background (#336699).
        static let colour = RGB(0x20, 0xC0, 0x40)
        static let redrawnColour = RGB(0xC0, 0x30, 0xA0)

        @Test("replay record on sway: the portal records a native window from its first second and its redraw; an app's own session is refused; doctor names sway",
              .timeLimit(.minutes(3)))
        func swayRecordings() async throws {
            let configuration = SwaySession.Configuration(xdpwShim: WaylandChecks.support.appendingPathComponent("xdpw-shm-shim.c").path)
            let runtime = try await SwaySession.with(configuration) { session in
                try await recordsTheWindow(session)
                try await recordsTheStillScreenAgain(session)
                try await WaylandChecks.expectAppSessionRefused(session, testApp: session.binary("replay-testapp"), replay: session.binary("replay"),
                                                                naming: ["sway", "1.12", "never cuts"])
                try await WaylandChecks.expectDoctor(session, replay: session.binary("replay"),
                                                     saying: ["sway", "screen-cast portal", "Apps' own sessions: no"])
                return session.runtimeDirectory
            }
            let left = ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: runtime.path)
            #expect(left.isEmpty, "no process of the sway session is left after its tear-down: \(left)")
        }

        /// a. A GTK 4 window (native Wayland) fills the output before the recording starts: still. The
        /// recording has its colour from its first second. About a second in, the window turns another
        /// colour: the end of the recording has that one.
        func recordsTheWindow(_ session: SwaySession) async throws {
            let window = try session.startClient(WaylandChecks.python, arguments: [
                WaylandChecks.support.appendingPathComponent("colour-window.py").path,
                "\(Self.colour.r)", "\(Self.colour.g)", "\(Self.colour.b)", "--title", "colour",
                "--then", "\(Self.redrawnColour.r)", "\(Self.redrawnColour.g)", "\(Self.redrawnColour.b)",
            ])
            try await WaylandChecks.waitForOutput(window, containing: "shown", timeout: .seconds(30), rig: session)
            // The window has drawn itself; give the compositor a moment to show it, then nothing moves.
            try await Task.sleep(for: .milliseconds(500))

            let file = session.outputDirectory.appendingPathComponent("sway.mp4").path
            let replay = try session.startClient(session.binary("replay"), arguments: ["record", "--duration", "3", "--output", file])
            let result: ProcessResult
            do {
                try await WaylandChecks.waitUntilRecording(session, replay: session.binary("replay"), recorder: replay)
                try await Task.sleep(for: .seconds(1))
                window.signal(SIGUSR1)
                try await WaylandChecks.waitForOutput(window, containing: "changed", timeout: .seconds(10), rig: session)
                result = try await replay.waitForExit(timeout: .seconds(30))
            } catch {
                await session.stopClient(replay)
                throw error
            }
            try #require(result.succeeded, "replay record --duration 3 on sway: \(result)\n\(diagnostics(session))")
            #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == file, "replay printed the file: \(result.stdout)")

            let info = try await MediaProbe.probe(file)
            let video = try #require(info.videoStreams.first, "a video stream in \(file)")
            #expect(video.codecName == "h264")
            #expect(video.width == session.configuration.width && video.height == session.configuration.height,
                    "the output's size, \(session.configuration.width)x\(session.configuration.height): got \(video.width ?? 0)x\(video.height ?? 0)")
            let duration = try #require(info.format.duration ?? video.duration, "a duration")
            #expect(abs(duration - 3) <= 0.7, "about 3 s long: \(duration) s")
            let pictures = try await MediaProbe.videoPictures(file).map(\.time).sorted()
            let firstPicture = try #require(pictures.first, "pictures in \(file)")
            #expect(firstPicture - (info.format.startTime ?? 0) <= 1, "a picture in the first second: the first is at \(firstPicture) s")

            let early = try await WaylandChecks.frame(shownAt: 0.5, in: file)
            let earlyShare = WaylandChecks.share(of: Self.colour, in: early)
            #expect(earlyShare > 0.8, "the still window's colour \(Self.colour) at 0.5 s: \(Int(earlyShare * 100)) %")
            let late = try await WaylandChecks.frame(shownAt: duration, in: file)
            let lateShare = WaylandChecks.share(of: Self.redrawnColour, in: late)
            #expect(lateShare > 0.8, "the redrawn colour \(Self.redrawnColour) at the end: \(Int(lateShare * 100)) %")
            WaylandChecks.logger.debug("sway recording", metadata: [
                "duration": "\(duration)", "frames": "\(video.readFrames ?? 0)", "pictures": "\(pictures)",
                "colour at 0.5 s": "\(earlyShare)", "redrawn colour at the end": "\(lateShare)",
            ])
        }

        /// b. Nothing has moved since the first recording: a second one, started at once, should still
        /// have the (redrawn) window from its first second to its end.
        func recordsTheStillScreenAgain(_ session: SwaySession) async throws {
            let file = session.outputDirectory.appendingPathComponent("sway-still.mp4").path
            let result = try await session.run(session.binary("replay"), arguments: ["record", "--duration", "2", "--output", file],
                                               timeout: .seconds(60))
            try #require(result.succeeded, "replay record --duration 2 of the still screen: \(result)\n\(diagnostics(session))")
            let info = try await MediaProbe.probe(file)
            let duration = try #require(info.format.duration ?? info.videoStreams.first?.duration, "a duration")
            #expect(abs(duration - 2) <= 0.7, "about 2 s long: \(duration) s")
            let pictures = try await MediaProbe.videoPictures(file).map(\.time).sorted()
            let firstPicture = try #require(pictures.first, "pictures in \(file)")
            #expect(firstPicture - (info.format.startTime ?? 0) <= 1, "a picture in the first second: the first is at \(firstPicture) s")
            var shares: [Double] = []
            var colours: [RGB] = []
            for time in [0.1, duration / 2, duration] {
                let frame = try await WaylandChecks.frame(shownAt: time, in: file)
                shares.append(WaylandChecks.share(of: Self.redrawnColour, in: frame))
                colours.append(WaylandChecks.commonestColour(in: frame))
            }
            // Started right after the first, this screen cast gets no picture from xdg-desktop-portal-wlr
            // 0.7 until something is drawn (docs/WAYLAND.md, "Not done yet"); started about 6 s after the
            // first (measured once, by hand), it had its picture from the start. Until a picture comes,
            // replayd waits 1.5 s, then records black until one comes.
            withKnownIssue("a still screen on wlroots: the recording has no picture until something is drawn (docs/WAYLAND.md)",
                           isIntermittent: true) {
                for (time, share) in zip([0.1, duration / 2, duration], shares) {
                    #expect(share > 0.8, "the window's colour \(Self.redrawnColour) at \(time) s of the still screen: \(Int(share * 100)) %, mostly \(colours)")
                }
            }
            if shares[0] <= 0.8, let first = try? await WaylandChecks.frame(shownAt: 0, in: file) {
                let black = WaylandChecks.share(of: RGB(0, 0, 0), in: first)
                #expect(black > 0.8, "replayd's stand-in for the picture the desktop did not send is black (\"the first is black until it draws\", its log says): \(Int(black * 100)) % black, mostly \(WaylandChecks.commonestColour(in: first))")
            }
            WaylandChecks.logger.debug("sway recording of the still screen", metadata: [
                "duration": "\(duration)", "pictures": "\(pictures)", "window's colour at 0.1 s, middle, end": "\(shares)",
                "commonest colours": "\(colours)",
            ])
        }

        /// replayd's log and the session's, for a recording that failed.
        func diagnostics(_ session: SwaySession) -> String {
            "replayd's log (end):\n\(WaylandChecks.replaydLog(session).suffix(3000))\n\(session.logTails(lines: 25))"
        }
    }
}
