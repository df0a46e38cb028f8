import Foundation
import ReplayTesting
import Testing

extension SystemWindowsTests {
    /// `replay-ui picker` on a real display with a window manager, answered with real key presses and
    /// clicks (XTEST), as a person chooses where to broadcast.
    @Suite
    struct PickerWindowTests {
        static let icon = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../dist/desktop/icons/org.openreplaykit.ScreenRecording-64.png").standardized.path

        /// Four services, the first two with an icon, the others with the generic one.
        static var services: [[String: Any]] { [
            ["identifier": "org.openreplaykit.reference", "displayName": "OpenReplayKit Live", "iconPath": icon],
            ["identifier": "org.openreplaykit.rtmp", "displayName": "RTMP / SRT", "iconPath": icon],
            ["identifier": "com.example.tube", "displayName": "ExampleTube", "iconPath": NSNull()],
            ["identifier": "com.example.cast", "displayName": "Example Cast", "iconPath": "/nonexistent/icon.png"],
        ] }

        /// The picker's answer, its keys exactly these (no other key may appear).
        struct Answer: Decodable, Equatable, Sendable, CustomStringConvertible {
            var action: String
            var identifier: String?
            var microphone: Bool?
            static let cancelled = Answer(action: "cancelled")
            static func start(_ identifier: String, microphone: Bool) -> Answer {
                Answer(action: "start", identifier: identifier, microphone: microphone)
            }
            var description: String { "\(action) \(identifier ?? "-") \(microphone.map { "\($0)" } ?? "-")" }

            static func decode(_ line: String) throws -> Answer {
                let answer = try JSONDecoder().decode(Answer.self, from: Data(line.utf8))
                let keys = (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]).map { Set($0.keys) } ?? []
                let expected: Set<String> = answer.action == "start" ? ["action", "identifier", "microphone"] : ["action"]
                guard keys == expected else { throw HarnessError("the picker answered \(line): keys \(keys.sorted())") }
                return answer
            }
        }

        /// Starts the picker with `services`, waits until it is shown with the keyboard focus, then lets `act` answer it.
        private func picker(services: [[String: Any]] = Self.services, microphone: Bool = false,
                            _ act: (Desktop, String) async throws -> Void) async throws -> Answer {
            try await Desktop.with { desktop in
                let file = desktop.environment.directory.appendingPathComponent("services.json")
                try JSONSerialization.data(withJSONObject: services).write(to: file)
                var arguments = ["picker", "--services", file.path]
                if microphone { arguments.append("--microphone") }
                let ui = try desktop.startUI(arguments)
                do {
                    let window = try await desktop.waitForWindow(classNamed: "openreplaykit-picker", of: ui)
                    try await desktop.waitForFocus(window)
                    try await desktop.waitUntilDrawn(window)
                    try await act(desktop, window)
                    return try Answer.decode(try await desktop.answerLine(of: ui))
                } catch {
                    await ui.terminate(grace: .seconds(1))
                    throw error
                }
            }
        }

        @Test func returnStartsWithTheFirstService() async throws {
            let answer = try await picker { desktop, _ in try await desktop.xdotool(["key", "Return"]) }
            #expect(answer == .start("org.openreplaykit.reference", microphone: false))
        }

        @Test func downDownReturnPicksTheThird() async throws {
            let answer = try await picker { desktop, _ in
                try await desktop.xdotool(["key", "--delay", "100", "Down", "Down", "Return"])
            }
            #expect(answer == .start("com.example.tube", microphone: false))
        }

        /// Down past the end stays on the last; Up comes back.
        @Test func theSelectionStopsAtTheEnds() async throws {
            let answer = try await picker { desktop, _ in
                try await desktop.xdotool(["key", "--delay", "80", "Down", "Down", "Down", "Down", "Down", "Down", "Up", "Return"])
            }
            #expect(answer == .start("com.example.tube", microphone: false))
        }

        @Test func escapeCancels() async throws {
            let answer = try await picker { desktop, _ in try await desktop.xdotool(["key", "Escape"]) }
            #expect(answer == .cancelled)
        }

        /// With the focus on the Microphone check box (clicked: it toggles and takes the focus), Up/Down
        /// still move the selection, Space toggles the box once, Return starts and Escape cancels.
        @Test func keysWorkWhereverTheFocusIs() async throws {
            let started = try await picker { desktop, window in
                let frame = try await desktop.geometry(of: window)
                try await desktop.click(in: window, x: 40, y: PickerLayout(height: frame.height).microphone)
                try await Task.sleep(for: .milliseconds(200))
                try await desktop.xdotool(["key", "--delay", "100", "Down", "Down", "Up", "Return"])
            }
            #expect(started == .start("org.openreplaykit.rtmp", microphone: true))
            let toggledBack = try await picker { desktop, window in
                let frame = try await desktop.geometry(of: window)
                try await desktop.click(in: window, x: 40, y: PickerLayout(height: frame.height).microphone)
                try await Task.sleep(for: .milliseconds(200))
                try await desktop.xdotool(["key", "--delay", "100", "space", "Return"])
            }
            #expect(toggledBack == .start("org.openreplaykit.reference", microphone: false))
            let cancelled = try await picker { desktop, window in
                let frame = try await desktop.geometry(of: window)
                try await desktop.click(in: window, x: 40, y: PickerLayout(height: frame.height).microphone)
                try await Task.sleep(for: .milliseconds(200))
                try await desktop.xdotool(["key", "Escape"])
            }
            #expect(cancelled == .cancelled)
        }

        @Test func spaceTogglesTheMicrophone() async throws {
            let on = try await picker { desktop, _ in try await desktop.xdotool(["key", "--delay", "100", "space", "Return"]) }
            #expect(on == .start("org.openreplaykit.reference", microphone: true))
            let off = try await picker(microphone: true) { desktop, _ in
                try await desktop.xdotool(["key", "--delay", "100", "Down", "space", "Return"])
            }
            #expect(off == .start("org.openreplaykit.rtmp", microphone: false))
            let kept = try await picker(microphone: true) { desktop, _ in try await desktop.xdotool(["key", "Return"]) }
            #expect(kept == .start("org.openreplaykit.reference", microphone: true))
        }

        /// A click on the fourth row, a click on the Microphone check box, a click on Start Broadcast.
        @Test func clickingARowTheMicrophoneAndStart() async throws {
            let answer = try await picker { desktop, window in
                let frame = try await desktop.geometry(of: window)
                let layout = PickerLayout(height: frame.height)
                try await desktop.click(in: window, x: frame.width / 2, y: layout.rowCentre(3))
                try await Task.sleep(for: .milliseconds(200))
                try await desktop.click(in: window, x: 40, y: layout.microphone)
                try await Task.sleep(for: .milliseconds(200))
                try await desktop.click(in: window, x: frame.width * 3 / 4, y: layout.buttons)
            }
            #expect(answer == .start("com.example.cast", microphone: true))
        }

        @Test func clickingCancelCancels() async throws {
            let answer = try await picker { desktop, window in
                let frame = try await desktop.geometry(of: window)
                try await desktop.click(in: window, x: frame.width / 4, y: PickerLayout(height: frame.height).buttons)
            }
            #expect(answer == .cancelled)
        }

        @Test func closingCancels() async throws {
            let answer = try await picker { desktop, window in try await desktop.closeThroughWindowManager(window) }
            #expect(answer == .cancelled)
        }

        /// WM_CLASS, the title, that it asks to stay above, and that it is drawn (a screenshot, kept with
        /// ORK_UI_SCREENSHOTS=DIR: docs/images/picker.png is one).
        @Test func windowIsAPickerAboveTheOthers() async throws {
            #expect(FileManager.default.fileExists(atPath: Self.icon))
            let answer = try await picker { desktop, window in
                let wmClass = try await desktop.windowClass(of: window)
                #expect(wmClass.contains("\"openreplaykit-picker\""), "WM_CLASS: \(wmClass)")
                #expect(try await desktop.xdotool(["getwindowname", window]) == "Screen Broadcast")
                let state = try await ProcessRunner.run("xprop", arguments: ["-id", window, "_NET_WM_STATE"],
                                                        environment: desktop.environment.environment, timeout: .seconds(5))
                #expect(state.stdout.contains("_NET_WM_STATE_ABOVE"), "\(state.stdout)")
                try await desktop.xdotool(["key", "Down"])
                try await Task.sleep(for: .milliseconds(500))
                let shot = try await desktop.screenshot(of: window, name: "picker")
                #expect(shot.width >= 380 && shot.height >= 300, "\(shot.width)x\(shot.height)")
                #expect(distinctColours(shot) > 40, "the picker looks blank")
                try await desktop.xdotool(["key", "Escape"])
            }
            #expect(answer == .cancelled)
        }

        /// No service installed: the window says so, offers only Cancel, and Return cannot start anything.
        @Test func noServicesSaysSoAndOnlyCancels() async throws {
            let answer = try await picker(services: []) { desktop, window in
                let shot = try await desktop.screenshot(of: window, name: "picker-empty")
                #expect(distinctColours(shot) > 10, "the picker looks blank")
                try await desktop.xdotool(["key", "Return"])
            }
            #expect(answer == .cancelled)
        }

        /// A system recording runs while the picker is up: the picker is on the screen, and in no recorded
        /// frame (each shows, where the picker was, what lies beneath it).
        @Test(.timeLimit(.minutes(3)))
        func thePickerIsInNoFrameOfASystemRecording() async throws {
            try await Desktop.with { desktop in
                let environment = desktop.environment
                // What lies beneath: one application's window of one colour over the whole screen.
                let background = try BackgroundProcess(try Binaries.testContent(), arguments: ["--app", "1280x720+0+0", "--colour", "2060a0"],
                                                       environment: environment.environment)
                do {
                    _ = try await desktop.waitForWindow(classNamed: "replay-testapp", of: background)
                    try await recordWhileThePickerIsUp(desktop)
                    await background.terminate(grace: .seconds(1))
                } catch {
                    await background.terminate(grace: .seconds(1))
                    throw error
                }
            }
        }

        private func recordWhileThePickerIsUp(_ desktop: Desktop) async throws {
            let environment = desktop.environment
            let movie = environment.outputPath("with-picker.mp4")
            let recorder = try environment.startReplay(["record", "-o", movie, "--duration", "8", "--no-system-audio"])
            // Recording once the movie has its first bytes.
            let started = ContinuousClock.now + .seconds(30)
            while ((try? FileManager.default.attributesOfItem(atPath: movie))?[.size] as? Int ?? 0) == 0 {
                if let result = recorder.result { throw HarnessError("`replay record` ended before recording: \(result)") }
                guard ContinuousClock.now < started else { throw HarnessError("`replay record` wrote nothing within 30 s") }
                try await Task.sleep(for: .milliseconds(100))
            }
            try await Task.sleep(for: .seconds(1))

            let file = environment.directory.appendingPathComponent("services.json")
            try JSONSerialization.data(withJSONObject: Self.services).write(to: file)
            let ui = try desktop.startUI(["picker", "--services", file.path])
            let area: PixelRect
            let shown: RGBImage
            do {
                let window = try await desktop.waitForWindow(classNamed: "openreplaykit-picker", of: ui)
                try await desktop.waitForFocus(window)
                try await Task.sleep(for: .seconds(1.5))
                let frame = try await desktop.geometry(of: window)
                area = PixelRect(x: frame.x + 4, y: frame.y + 4, width: frame.width - 8, height: frame.height - 8)
                shown = Self.crop(try await environment.xvfb.screenshot(), to: area)
                try await desktop.xdotool(["key", "Escape"])
                _ = try await desktop.answerLine(of: ui)
            } catch {
                await ui.terminate(grace: .seconds(1))
                throw error
            }
            try await Task.sleep(for: .seconds(1))
            let beneath = Self.crop(try await environment.xvfb.screenshot(), to: area)
            #expect(Self.matchingShare(shown, beneath) < 0.5, "the picker was on the screen")

            let recorded = try await recorder.waitForExit(timeout: .seconds(60))
            #expect(recorded.succeeded, "\(recorded)")
            let frames = try await FrameDecoder.allFrames(in: movie, crop: area)
            #expect(frames.count >= 40, "\(frames.count) frames in 8 s")
            // The picker's pixels are in no frame.
            let likePicker = frames.indices.filter { Self.matchingShare(frames[$0], shown) > 0.3 }
            #expect(likePicker.isEmpty, "\(likePicker.count) of \(frames.count) frames show the picker (\(area)): frames \(likePicker.prefix(10))")
            // Where it was, they show what lies beneath it, except at most a few frames of black when it
            // appears (before the capture has the windows beneath it composited: ScreenCapture's doing, not the picker's).
            let unlike = frames.indices.filter { Self.matchingShare(frames[$0], beneath) <= 0.95 }
            let details = unlike.prefix(5).map { index in
                "frame \(index): \(Int(Self.matchingShare(frames[index], beneath) * 100)) %, centre \(frames[index].pixel(x: area.width / 2, y: area.height / 2)) (beneath: \(beneath.pixel(x: area.width / 2, y: area.height / 2)))"
            }
            #expect(unlike.count <= 5, "\(unlike.count) of \(frames.count) frames do not show what lies beneath the picker (\(area)): \(details)")
            if !unlike.isEmpty { print("picker recording: \(unlike.count) of \(frames.count) frames differ from what lies beneath: \(details)") }
        }

        static func crop(_ image: RGBImage, to area: PixelRect) -> RGBImage {
            var pixels: [UInt8] = []
            pixels.reserveCapacity(area.width * area.height * 3)
            for row in area.y..<(area.y + area.height) {
                let start = (row * image.width + area.x) * 3
                pixels += image.pixels[start..<(start + area.width * 3)]
            }
            return RGBImage(width: area.width, height: area.height, pixels: pixels)
        }

        /// The share of pixels of `image` within 40 of `reference`'s, per channel.
        static func matchingShare(_ image: RGBImage, _ reference: RGBImage) -> Double {
            guard image.width == reference.width, image.height == reference.height, image.width > 0 else { return 0 }
            var matching = 0
            for y in 0..<image.height {
                for x in 0..<image.width where image.pixel(x: x, y: y).isClose(to: reference.pixel(x: x, y: y), tolerance: 40) {
                    matching += 1
                }
            }
            return Double(matching) / Double(image.width * image.height)
        }
    }
}

/// Where the picker's parts are in its 420-pixel-wide window (24 px margins, 12 px spacing), measured
/// on its screenshot (docs/images/picker.png, 420×468): the list's rows from the top (under the title and
/// the hint), 68 px each; the buttons' row and the Microphone check box from the bottom.
struct PickerLayout {
    var height: Int
    var buttons: Int { height - 42 }
    var microphone: Int { height - 83 }
    func rowCentre(_ index: Int) -> Int { 122 + index * 68 }
}
