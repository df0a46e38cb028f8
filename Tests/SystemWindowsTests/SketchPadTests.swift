import Foundation
import ReplayTesting
import Testing

extension SystemWindowsTests {
    /// The example app, driven as a person drives it (xdotool's real pointer and keys on a desktop
    /// with a window manager and a sound server) against a real replayd: a stroke drawn while it
    /// records is in the saved movie with its tone; with Protected checked, the canvas is blanked.
    @Suite
    struct SketchPadTests {
        /// The pitch SketchPad is started with, measured in the recording.
        static let tone = 660.0

        @Test func aStrokeIsRecordedWithItsToneAndProtectedBlanksTheCanvas() async throws {
            try await Desktop.with { desktop in
                let environment = desktop.environment
                // The person's consent is the consent tests' subject; here replayd answers Allow itself.
                let replayd = try BackgroundProcess(try Binaries.replayd(), arguments: ["--consent-answer-for-tests", "allow", "--idle-exit", "0"],
                                                    environment: environment.environment)
                defer { Task { _ = await replayd.terminate(grace: .seconds(5)) } }
                for _ in 0..<250 where !FileManager.default.fileExists(atPath: environment.replaydSocket.path) {
                    try await Task.sleep(for: .milliseconds(20))
                }
                let app = try BackgroundProcess(try Binaries.path("sketchpad"), arguments: ["--tone", "\(Int(Self.tone))"],
                                                environment: environment.environment)
                defer { Task { _ = await app.terminate() } }
                let pad = SketchPadDriver(desktop: desktop, app: app)
                let window = try await desktop.waitForWindow(classNamed: "sketchpad", of: app)
                try await desktop.xdotool(["windowactivate", "--sync", window])
                try await desktop.waitForFocus(window)
                let frame = try await desktop.geometry(of: window)

                // Record a stroke: a horizontal line across the canvas at y 300 (the window's own coordinates).
                try await pad.key("ctrl+r", window: window, until: "sketchpad: recording")
                try await Task.sleep(for: .seconds(1))
                try await pad.stroke(in: window, from: (150, 300), to: (650, 300))
                try await Task.sleep(for: .seconds(1.5))
                let shown = try await desktop.screenshot(of: window, name: "sketchpad")
                #expect(shown.pixel(x: 400, y: 300).b > 150 && shown.pixel(x: 400, y: 300).r < 100, "the stroke is drawn: \(shown.pixel(x: 400, y: 300))")
                let saved = try await pad.stopAndSave(window: window)

                let info = try await MediaProbe.probe(saved)
                #expect(info.videoStreams.count == 1 && info.audioStreams.count == 1, "picture and sound: \(info)")
                let last = try await FrameDecoder.frame(at: max(0, (info.format.duration ?? 1) - 0.5), in: saved)
                let ink = last.pixel(x: frame.x + 400, y: frame.y + 300)
                let paper = last.pixel(x: frame.x + 400, y: frame.y + 200)
                #expect(ink.b > 150 && ink.r < 100 && ink.g < 140, "the stroke's blue ink in the recording: \(ink)")
                #expect(paper.isClose(to: RGB(255, 255, 255)), "the white canvas in the recording: \(paper)")
                let sound = try await ToneAnalyzer.load(file: saved)
                #expect(sound.isPresent(frequency: Self.tone), "the stroke's \(Self.tone) Hz tone is in the recording")
                let onsets = sound.onsets(frequency: Self.tone)
                #expect(onsets.count == 1, "one stroke, one tone: \(onsets)")

                // Protected: the same drawing, recorded again, shows nothing of the window.
                try await pad.key("ctrl+p", window: window, until: "sketchpad: protected")
                try await pad.key("ctrl+r", window: window, until: "sketchpad: recording", occurrence: 2)
                try await pad.stroke(in: window, from: (150, 400), to: (650, 400))
                try await Task.sleep(for: .seconds(1.5))
                let protected = try await pad.stopAndSave(window: window, occurrence: 2)
                let blank = try await FrameDecoder.frame(at: 1.0, in: protected)
                for (x, y) in [(400, 300), (400, 200), (400, 400)] {
                    let seen = blank.pixel(x: frame.x + x, y: frame.y + y)
                    #expect(seen.luma < 40, "the protected canvas is blanked at (\(x), \(y)): \(seen)")
                }
            }
        }
    }
}

extension SystemWindowsTests.SketchPadTests {
    /// Capture receives the app's own pictures (SketchPad counts them), and Clip saves the last
    /// seconds with the stroke's tone in them.
    @Test func captureCountsItsPicturesAndClipSavesTheLastSeconds() async throws {
        try await Desktop.with { desktop in
            let environment = desktop.environment
            let replayd = try BackgroundProcess(try Binaries.replayd(), arguments: ["--consent-answer-for-tests", "allow", "--idle-exit", "0"],
                                                environment: environment.environment)
            defer { Task { _ = await replayd.terminate(grace: .seconds(5)) } }
            for _ in 0..<250 where !FileManager.default.fileExists(atPath: environment.replaydSocket.path) {
                try await Task.sleep(for: .milliseconds(20))
            }
            let clips = environment.outputPath("clips")
            let app = try BackgroundProcess(try Binaries.path("sketchpad"), arguments: ["--tone", "\(Int(Self.tone))", "--clip-folder", clips],
                                            environment: environment.environment)
            defer { Task { _ = await app.terminate() } }
            let pad = SketchPadDriver(desktop: desktop, app: app)
            let window = try await desktop.waitForWindow(classNamed: "sketchpad", of: app)
            try await desktop.xdotool(["windowactivate", "--sync", window])

            try await pad.key("ctrl+k", window: window, until: "sketchpad: capturing")
            try await pad.stroke(in: window, from: (150, 200), to: (650, 300))
            try await Task.sleep(for: .seconds(2))
            try await pad.key("ctrl+k", window: window, until: "sketchpad: capture stopped")
            let stopped = try await pad.waitFor("sketchpad: capture stopped")
            let frames = Int(stopped.split(separator: " ")[3]) ?? 0
            #expect(frames >= 3, "the capture's pictures reached the app: \(stopped)")
            #expect(stopped.hasSuffix("\(environment.xvfb.width)x\(environment.xvfb.height)"), "the screen's size: \(stopped)")

            try await pad.key("ctrl+l", window: window, until: "sketchpad: clip buffer on")
            try await Task.sleep(for: .seconds(1))
            try await pad.stroke(in: window, from: (150, 400), to: (650, 400))
            try await Task.sleep(for: .seconds(2))
            try await pad.key("ctrl+l", window: window, until: "sketchpad: clip /")
            let line = try await pad.waitFor("sketchpad: clip /")
            let clip = String(line.dropFirst("sketchpad: clip ".count))
            #expect(clip.hasPrefix(clips + "/"), "saved in --clip-folder: \(clip)")
            let info = try await MediaProbe.probe(clip)
            #expect(info.videoStreams.count == 1 && info.audioStreams.count == 1, "picture and sound: \(info)")
            let sound = try await ToneAnalyzer.load(file: clip)
            #expect(sound.isPresent(frequency: Self.tone), "the stroke's tone is in the clip")
        }
    }
}

/// Drives SketchPad through its keys and the pointer, and follows its event lines.
struct SketchPadDriver {
    let desktop: Desktop
    let app: BackgroundProcess

    /// Presses `keys` in the focused window and waits until SketchPad prints `line` for the `occurrence`-th time.
    func key(_ keys: String, window: String, until line: String, occurrence: Int = 1) async throws {
        try await desktop.xdotool(["windowactivate", "--sync", window])
        try await desktop.xdotool(["key", keys])
        try await waitFor(line, occurrence: occurrence)
    }

    @discardableResult
    func waitFor(_ line: String, occurrence: Int = 1, timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let matches = app.currentOutput.split(separator: "\n").filter { $0.hasPrefix(line) }
            if matches.count >= occurrence { return String(matches[occurrence - 1]) }
            if !app.isRunning { throw HarnessError("sketchpad ended: \(app.currentOutput)\n\(app.currentError)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HarnessError("sketchpad did not print \"\(line)\" (\(occurrence)) within \(timeout):\n\(app.currentOutput)\n\(app.currentError.suffix(2000))")
    }

    /// A drag with the left button from `start` to `end` in 20 steps, as a hand draws.
    func stroke(in window: String, from start: (Int, Int), to end: (Int, Int)) async throws {
        try await desktop.xdotool(["mousemove", "--window", window, "--sync", "\(start.0)", "\(start.1)"])
        try await desktop.xdotool(["mousedown", "1"])
        for step in 1...20 {
            let x = start.0 + (end.0 - start.0) * step / 20, y = start.1 + (end.1 - start.1) * step / 20
            try await desktop.xdotool(["mousemove", "--window", window, "\(x)", "\(y)"])
            try await Task.sleep(for: .milliseconds(15))
        }
        try await desktop.xdotool(["mouseup", "1"])
    }

    /// Stop (Ctrl+T), then Save (Ctrl+S) in the system preview; the path SketchPad heard.
    func stopAndSave(window: String, occurrence: Int = 1) async throws -> String {
        try await key("ctrl+t", window: window, until: "sketchpad: stopped", occurrence: occurrence)
        let preview = try await desktop.waitForWindow(classNamed: "openreplaykit-preview", of: app)
        try await desktop.waitForFocus(preview)
        try await desktop.xdotool(["key", "ctrl+s"])
        let line = try await waitFor("sketchpad: saved ", occurrence: occurrence)
        return String(line.dropFirst("sketchpad: saved ".count))
    }
}
