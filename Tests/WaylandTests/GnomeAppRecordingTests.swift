import Foundation
import ReplayTesting
import Testing

/// One Wayland desktop at a time (WaylandDesktops, WaylandChecks.swift).
extension WaylandDesktops {
    /// An app's own windows on GNOME (issue 27, point 2): the built `replay-testapp` (OpenReplayKit in an
    /// app) records itself on a real headless GNOME Shell with OpenReplayKit's Shell extension from
    /// dist/gnome-shell/ enabled, while another app's window of another colour covers the right half of
    /// its window; during the recording the app's window moves. replayd asks the extension for the app's
    /// windows and records each through Mutter's `RecordWindow`: the recording holds only the app's colour
    /// where its window is (before and after the move), black elsewhere, no pixel of the other app; the
    /// app's tone and not the other's.
    ///
    /// No Wayland client can place its own window on GNOME: a test-only Shell extension
    /// (Support/gnome-test-extension/) does it. replayd's consent prompt (replay-ui, a GTK 4 Wayland
    /// window) is answered through AT-SPI, as a person with a screen reader would (Support/answer-consent.py).
    @Suite(.serialized)
    struct GnomeAppRecordingTests {
        static let support = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support")
        static let extensionFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("dist/gnome-shell/openreplaykit@openreplaykit.org")
        static let placementExtension = support.appendingPathComponent("gnome-test-extension/openreplaykit-tests@openreplaykit.org")
        static let python = "/usr/bin/python3"
        static let own = RGB(0xE0, 0x50, 0x20)
        static let other = RGB(0x20, 0xB0, 0xE0)
        static let ownTone = 660.0
        static let otherTone = 440.0
        /// The app's window, and the other app's over its right half (frame rectangles, stage pixels).
        static let ownFrame = (x: 100, y: 120, width: 640, height: 400)
        static let otherFrame = (x: 420, y: 120, width: 640, height: 400)
        /// Where the app's window moves during the recording (the other app's still over part of it).
        static let movedFrame = (x: 300, y: 250, width: 640, height: 400)

        @Test("an app on GNOME records only its own window (another app's over half of it) and its own tone",
              .timeLimit(.minutes(5)))
        func appRecordsOnlyItself() async throws {
            var configuration = GnomeSession.Configuration()
            configuration.shellExtensions = [Self.extensionFolder, Self.placementExtension]
            try await GnomeSession.with(configuration) { session in
                try await Self.waitForName("org.openreplaykit.Shell", session)
                try await Self.waitForName("org.openreplaykit.ShellTests", session)

                // The extension answers replayd alone: gdbus, an ordinary client, is refused.
                let asked = try await session.gdbus(["call", "--session", "--dest", "org.openreplaykit.Shell", "--object-path",
                                                     "/org/openreplaykit/Shell", "--method",
                                                     "org.openreplaykit.Shell1.WindowsOfProcesses", "[uint32 1]"])
                #expect(!asked.succeeded && asked.stderr.contains("AccessDenied"), "another program is refused: \(asked)")

                let replayd = try session.startClient(try Binaries.replayd(), arguments: ["--idle-exit", "0"])
                let otherWindow = try session.startClient(Self.python, arguments: [
                    Self.support.appendingPathComponent("app-window.py").path,
                    "\(Self.other.r)", "\(Self.other.g)", "\(Self.other.b)", "--title", "other", "--size", "640x400",
                ])
                try await Self.waitForOutput(otherWindow, containing: "shown", session: session)
                let otherTone = try session.startClient(Self.python, arguments: [
                    Self.support.appendingPathComponent("tone.py").path, "\(Int(Self.otherTone))",
                ])
                try await Self.waitForOutput(otherTone, containing: "playing", session: session)

                let file = session.outputDirectory.appendingPathComponent("app.mp4").path
                let app = try session.startClient(try Binaries.testApp(), arguments: [
                    "child=" + [Self.python, Self.support.appendingPathComponent("app-window.py").path,
                                "\(Self.own.r)", "\(Self.own.g)", "\(Self.own.b)", "--title", "mine", "--size", "640x400"].joined(separator: "|"),
                    "child=" + [Self.python, Self.support.appendingPathComponent("tone.py").path, "\(Int(Self.ownTone))"].joined(separator: "|"),
                    "sleep=8", "available", "start", "sleep=4", "stop-to=\(file)",
                ])
                // While the app sleeps: its window where the test wants it, the other app's over its right half.
                try await Self.place("mine", Self.ownFrame, session)
                try await Self.place("other", Self.otherFrame, session)

                // The consent prompt (replay-ui, a GTK 4 Wayland window) answered through AT-SPI once the app starts.
                let consent = try session.startClient(Self.python, arguments: [
                    Self.support.appendingPathComponent("answer-consent.py").path, "--timeout", "60",
                ])
                // Two seconds into the recording the app's window moves (the other app's raised over it again).
                let started = ContinuousClock.now + .seconds(60)
                while !app.currentOutput.contains(#""step":"start""#), app.isRunning, ContinuousClock.now < started {
                    try await Task.sleep(for: .milliseconds(100))
                }
                try await Task.sleep(for: .seconds(2))
                try await Self.place("mine", Self.movedFrame, session)
                try await Self.place("other", Self.otherFrame, session)
                let result = try await app.waitForExit(timeout: .seconds(90))
                let answered = try await consent.waitForExit(timeout: .seconds(30))
                #expect(answered.succeeded && answered.stdout.contains("pressed Allow"),
                        "the consent prompt showed on Wayland and Allow was pressed through AT-SPI: \(answered)")
                #expect(answered.stdout.contains("to record the screen?"), "the prompt asks: \(answered.stdout)")
                // Where the windows were: the other app's over the right half of the app's.
                let mine = try #require(try await Self.describe("mine", session), "the app's window")
                let theirs = try #require(try await Self.describe("other", session), "the other app's window")
                #expect(mine.frame == [Self.movedFrame.x, Self.movedFrame.y, Self.movedFrame.width, Self.movedFrame.height], "the app's window: \(mine)")
                #expect(theirs.stacking > mine.stacking && theirs.frame[0] == Self.otherFrame.x,
                        "the other app's window covers the right half of the app's: \(theirs) over \(mine)")
                let lines = result.stdout.split(separator: "\n").compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }
                let log = (try? String(contentsOf: session.runtimeDirectory.appendingPathComponent("openreplaykit/replayd.log"),
                                       encoding: .utf8)) ?? ""
                func line(_ step: String) -> [String: Any]? { lines.first { $0["step"] as? String == step } }
                #expect(line("available")?["available"] as? Bool == true, "isAvailable on GNOME with the extension: \(lines)")
                try #require(line("start")?["ok"] as? Bool == true, "the app's recording started: \(result)\nreplayd: \(replayd.currentError.suffix(3000))\n\(log.suffix(3000))")
                try #require(line("stop-to=\(file)")?["ok"] as? Bool == true, "the app's recording was kept: \(result)\n\(log.suffix(3000))")

                let info = try await MediaProbe.probe(file)
                let video = try #require(info.videoStreams.first, "a video stream in \(file)")
                #expect(video.width == session.configuration.width && video.height == session.configuration.height,
                        "the monitor's size: got \(video.width ?? 0)x\(video.height ?? 0)")
                // (The app's pictures come when it draws: times, not frame numbers.) From the first picture to 1 s the window
                // where it was placed first; in the last half second where it moved to.
                let length = try #require(info.format.duration ?? video.duration, "a duration")
                for (time, frame) in [(0.0, Self.ownFrame), (0.5, Self.ownFrame), (1.0, Self.ownFrame), (length - 0.4, Self.movedFrame), (length - 0.1, Self.movedFrame)] {
                    let picture = try await FrameDecoder.frame(at: time, in: file)
                    let census = Self.census(picture, frame: frame)
                    #expect(census.foreign == 0, "no pixel of the other app's window at \(time) s: \(census)")
                    #expect(census.ownInside > 0.97, "the app's own colour fills its window at \(frame), the covered part included, at \(time) s: \(census)")
                    #expect(census.blackOutside > 0.97, "black outside the app's window at \(time) s: \(census)")
                }

                let doctor = try await session.run(try Binaries.replay(), arguments: ["doctor"], timeout: .seconds(30))
                #expect(doctor.stdout.contains("Apps' own sessions: yes"), "replay doctor with the extension: \(doctor)")

                try await Self.theExtensionDisabledRefusesApps(session)

                let duration = try #require(info.format.duration ?? video.duration, "a duration")
                try #require(info.audioStreams.count >= 1, "an audio track (the app's sound)")
                let audio = try await ToneAnalyzer.load(file: file, from: 0.5, to: max(1, duration - 0.3))
                #expect(audio.isPresent(frequency: Self.ownTone), "the app's \(Int(Self.ownTone)) Hz tone, amplitude \(audio.amplitude(frequency: Self.ownTone))")
                #expect(!audio.isPresent(frequency: Self.otherTone), "not the other app's \(Int(Self.otherTone)) Hz tone, amplitude \(audio.amplitude(frequency: Self.otherTone))")
            }
        }

        /// With the extension disabled, an app's recording is refused with the command that enables it,
        /// `isAvailable` is false, and `replay doctor` names the fix.
        static func theExtensionDisabledRefusesApps(_ session: GnomeSession) async throws {
            let disabled = try await session.run("gnome-extensions", arguments: ["disable", "openreplaykit@openreplaykit.org"], timeout: .seconds(30))
            try #require(disabled.succeeded, "gnome-extensions disable: \(disabled)")
            let deadline = ContinuousClock.now + .seconds(20)
            while try await session.gdbus(["call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                                           "--method", "org.freedesktop.DBus.NameHasOwner", "org.openreplaykit.Shell"]).stdout.contains("true") {
                guard ContinuousClock.now < deadline else { throw HarnessError("the extension still owns its name after being disabled") }
                try await Task.sleep(for: .milliseconds(200))
            }
            let app = try await session.run(try Binaries.testApp(), arguments: ["available", "start"], timeout: .seconds(60))
            let steps = app.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(steps.first { $0["step"] as? String == "available" }?["available"] as? Bool == false, "isAvailable without the extension: \(app.stdout)")
            let start = steps.first { $0["step"] as? String == "start" }
            let description = start?["description"] as? String ?? ""
            #expect(start?["ok"] as? Bool == false && description.contains("gnome-extensions enable openreplaykit@openreplaykit.org"),
                    "refused, naming the command that enables the extension: \(app.stdout)")
            let doctor = try await session.run(try Binaries.replay(), arguments: ["doctor"], timeout: .seconds(30))
            #expect(doctor.stdout.contains("MISSING  OpenReplayKit's GNOME Shell extension") && doctor.stdout.contains("Apps' own sessions: no")
                    && doctor.stdout.contains("gnome-extensions enable openreplaykit@openreplaykit.org"), "replay doctor without the extension: \(doctor)")
        }

        /// Pixels of the app's colour inside its frame, black outside it, and any of the other app's colour (every 2nd pixel).
        struct Census: CustomStringConvertible {
            var ownInside = 0.0, blackOutside = 0.0
            var foreign = 0
            var description: String { "own colour inside \(Int(ownInside * 1000)) ‰, black outside \(Int(blackOutside * 1000)) ‰, other app's pixels \(foreign)" }
        }

        static func census(_ image: RGBImage, frame: (x: Int, y: Int, width: Int, height: Int)) -> Census {
            var inside = 0, own = 0, outside = 0, black = 0, foreign = 0
            for y in stride(from: 0, to: image.height, by: 2) {
                for x in stride(from: 0, to: image.width, by: 2) {
                    let pixel = image.pixel(x: x, y: y)
                    if pixel.isClose(to: other, tolerance: 40) { foreign += 1 }
                    // Two pixels off each edge: chroma subsampling blurs them.
                    let isInside = x >= frame.x + 2 && x < frame.x + frame.width - 2 && y >= frame.y + 2 && y < frame.y + frame.height - 2
                    let isOutside = x < frame.x - 2 || x >= frame.x + frame.width + 2 || y < frame.y - 2 || y >= frame.y + frame.height + 2
                    if isInside {
                        inside += 1
                        if pixel.isClose(to: self.own, tolerance: 40) { own += 1 }
                    } else if isOutside {
                        outside += 1
                        if pixel.isClose(to: RGB(0, 0, 0), tolerance: 24) { black += 1 }
                    }
                }
            }
            return Census(ownInside: Double(own) / Double(max(1, inside)), blackOutside: Double(black) / Double(max(1, outside)),
                          foreign: foreign)
        }

        /// Places the window titled `title` (waits for it to exist) through the test Shell extension.
        static func place(_ title: String, _ frame: (x: Int, y: Int, width: Int, height: Int), _ session: GnomeSession) async throws {
            let deadline = ContinuousClock.now + .seconds(30)
            while true {
                let placed = try await session.gdbus(["call", "--session", "--dest", "org.openreplaykit.ShellTests", "--object-path",
                                                      "/org/openreplaykit/ShellTests", "--method", "org.openreplaykit.ShellTests1.Place",
                                                      title, "\(frame.x)", "\(frame.y)", "\(frame.width)", "\(frame.height)"])
                // A Wayland client takes its new size a moment later: placed once the frame is where it was asked.
                if placed.stdout.contains("true"), let now = try await describe(title, session), now.frame == [frame.x, frame.y, frame.width, frame.height] {
                    return
                }
                guard ContinuousClock.now < deadline else {
                    throw HarnessError("the window titled \(title) is not at \(frame): \(placed), \(String(describing: try await describe(title, session)))")
                }
                try await Task.sleep(for: .milliseconds(300))
            }
        }

        /// The frame (x, y, width, height) and stacking position of the window titled `title`, through the test Shell extension.
        static func describe(_ title: String, _ session: GnomeSession) async throws -> (frame: [Int], stacking: Int)? {
            let answer = try await session.gdbus(["call", "--session", "--dest", "org.openreplaykit.ShellTests", "--object-path",
                                                  "/org/openreplaykit/ShellTests", "--method", "org.openreplaykit.ShellTests1.Describe", title])
            // "((100, 120, 640, 400, 5),)"
            let numbers = answer.stdout.split(whereSeparator: { !($0.isNumber || $0 == "-") }).compactMap { Int($0) }
            guard answer.succeeded, numbers.count == 5, numbers[4] >= 0 else { return nil }
            return (Array(numbers.prefix(4)), numbers[4])
        }

        static func waitForName(_ name: String, _ session: GnomeSession) async throws {
            let deadline = ContinuousClock.now + .seconds(30)
            while true {
                let owned = try await session.gdbus(["call", "--session", "--dest", "org.freedesktop.DBus", "--object-path",
                                                     "/org/freedesktop/DBus", "--method", "org.freedesktop.DBus.NameHasOwner", name])
                if owned.stdout.contains("true") { return }
                guard ContinuousClock.now < deadline else {
                    throw HarnessError("the Shell extension owning \(name) did not start: \(owned)\n\(session.logTails(lines: 30))")
                }
                try await Task.sleep(for: .milliseconds(200))
            }
        }

        static func waitForOutput(_ process: BackgroundProcess, containing text: String, session: GnomeSession) async throws {
            let deadline = ContinuousClock.now + .seconds(60)
            while !process.currentOutput.contains(text) {
                if let result = process.result { throw HarnessError("\(process.arguments) exited before \"\(text)\": \(result)") }
                guard ContinuousClock.now < deadline else {
                    throw HarnessError("\(process.arguments) did not print \"\(text)\": \(process.currentOutput)\(process.currentError)\n\(session.logTails(lines: 20))")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}
