import Foundation
import ReplayTesting
import Testing

extension SystemWindowsTests {
    /// `replay-ui preview` on a real display with a window manager and a sound server, driven by real
    /// keys (XTEST); the files it writes are read back with ffprobe.
    @Suite
    struct PreviewWindowTests {
        /// A 6 s movie as a recording is: H.264 with a keyframe every second, AAC sound.
        private static func makeMovie(_ path: String) async throws {
            let result = try await ProcessRunner.run("ffmpeg", arguments: [
                "-nostdin", "-v", "error", "-y",
                "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30",
                "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                "-t", "6", "-c:v", "libx264", "-preset", "veryfast", "-g", "30", "-keyint_min", "30", "-pix_fmt", "yuv420p",
                "-c:a", "aac", "-shortest", path,
            ], timeout: .seconds(60))
            guard result.succeeded else { throw HarnessError("ffmpeg could not make the test movie: \(result)") }
        }

        private struct Outcome {
            var answer: [String: String]
            var movieLeft: Bool
            var saved: [String]
            /// ffprobe of the file written (read before the test's folder goes).
            var written: MediaInfo?
        }

        private func preview(_ act: (Desktop, String, Int32) async throws -> Void) async throws -> Outcome {
            try await Desktop.with { desktop in
                let movie = desktop.environment.directory.appendingPathComponent("recording.mp4").path
                try await Self.makeMovie(movie)
                let folder = desktop.environment.outputDirectory.path
                let ui = try desktop.startUI(["preview", "--file", movie, "--save-folder", folder])
                do {
                    let window = try await desktop.waitForWindow(classNamed: "openreplaykit-preview", of: ui)
                    try await desktop.waitForFocus(window)
                    try await act(desktop, window, ui.pid)
                    let answer = try await desktop.answer(of: ui, timeout: .seconds(30))
                    let saved = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
                    var written: MediaInfo?
                    if let path = answer["path"], FileManager.default.fileExists(atPath: path) {
                        written = try await MediaProbe.probe(path, countFrames: true)
                    }
                    return Outcome(answer: answer, movieLeft: FileManager.default.fileExists(atPath: movie), saved: saved, written: written)
                } catch {
                    await ui.terminate(grace: .seconds(1))
                    throw error
                }
            }
        }

        @Test func saveKeepsTheWholeRecording() async throws {
            let outcome = try await preview { desktop, window, pid in
                let wmClass = try await desktop.windowClass(of: window)
                #expect(wmClass.contains("\"openreplaykit-preview\""), "WM_CLASS: \(wmClass)")
                try await Task.sleep(for: .seconds(1.5)) // playing
                // With sound: replay-ui has a stream on the (private) sound server.
                let inputs = try await desktop.environment.pulse!.pactl(["list", "sink-inputs"])
                #expect(inputs.stdout.contains("application.process.id = \"\(pid)\""), "no sound stream of replay-ui: \(inputs.stdout)")
                let shot = try await desktop.screenshot(of: window, name: "preview")
                #expect(distinctColours(shot) > 50, "the preview looks blank")
                try await desktop.xdotool(["key", "ctrl+s"])
            }
            #expect(outcome.answer["action"] == "saved")
            let path = try #require(outcome.answer["path"])
            let name = (path as NSString).lastPathComponent
            #expect(name.hasPrefix("Screen Recording ") && name.hasSuffix(".mp4"), "\(name)")
            #expect(name.wholeMatch(of: /Screen Recording \d{4}-\d{2}-\d{2} at \d{2}\.\d{2}\.\d{2}\.mp4/) != nil, "\(name)")
            #expect(outcome.saved == [name])
            #expect(!outcome.movieLeft, "the recording was moved, not copied")
            let duration = try #require(outcome.written?.format.duration)
            #expect(abs(duration - 6) < 0.2, "saved \(duration) s of 6 s")
        }

        /// Start moved 2 s on (20 presses of Right on the Start handle, which has the focus first),
        /// End 1.5 s back (Tab to the End handle, 15 presses of Left): 2.0–4.5 s is kept, cut at the
        /// keyframe of 2.0 s (one every second) without re-encoding.
        @Test func trimmingWithTheKeyboardSavesAShorterMovie() async throws {
            let outcome = try await preview { desktop, _, _ in
                try await desktop.xdotool(["key", "--delay", "40", "--repeat", "20", "Right"])
                try await desktop.xdotool(["key", "Tab"])
                try await desktop.xdotool(["key", "--delay", "40", "--repeat", "15", "Left"])
                try await Task.sleep(for: .milliseconds(300))
                try await desktop.xdotool(["key", "ctrl+s"])
            }
            #expect(outcome.answer["action"] == "saved")
            let info = try #require(outcome.written)
            let duration = try #require(info.format.duration)
            #expect(abs(duration - 2.5) < 0.2, "kept \(duration) s, expected 2.5 s")
            #expect(info.videoStreams.count == 1 && info.audioStreams.count == 1)
            // 75 frames, less the B-frames before the end that need the frame after it (x264 veryfast: up to 3).
            let frames = try #require(info.videoStreams.first?.frameCount)
            #expect((71...75).contains(frames), "\(frames) frames for 2.5 s at 30 fps")
            #expect(!outcome.movieLeft)
        }

        /// The Start handle dragged with the mouse from its left end a third of the way along its
        /// trough: the saved movie is shorter, and starts at a keyframe.
        @Test func draggingTheStartHandleTrims() async throws {
            let outcome = try await preview { desktop, window, _ in
                // The Start handle's knob rests at the left end of its trough, on the trim row
                // (about 72 px above the bottom, 88 px in, in an 800 px wide window).
                let frame = try await desktop.geometry(of: window)
                let y = frame.height - 72
                try await desktop.xdotool(["mousemove", "--window", window, "--sync", "88", "\(y)"])
                try await desktop.xdotool(["mousedown", "1"])
                for x in stride(from: 98, through: 168, by: 10) {
                    try await desktop.xdotool(["mousemove", "--window", window, "--sync", "\(x)", "\(y)"])
                    try await Task.sleep(for: .milliseconds(30))
                }
                try await desktop.xdotool(["mouseup", "1"])
                try await Task.sleep(for: .milliseconds(300))
                try await desktop.xdotool(["key", "ctrl+s"])
            }
            #expect(outcome.answer["action"] == "saved")
            let duration = try #require(outcome.written?.format.duration)
            #expect(duration < 5.1 && duration > 2, "kept \(duration) s of 6 s")
            #expect(!outcome.movieLeft)
        }

        /// Share… (clicked) opens GTK's file chooser; a path typed into its name field is where the movie goes.
        @Test func shareSavesWhereThePersonChooses() async throws {
            let target = FileManager.default.temporaryDirectory.appendingPathComponent("ork-share-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: target) }
            let chosen = target.appendingPathComponent("shared movie.mp4").path
            let outcome = try await preview { desktop, window, _ in
                // Share… sits left of Save at the bottom right: some 120 px from the right, 30 px from the bottom.
                // On a loaded machine the first click can come before the button is laid out: click again
                // (every 5 s, while the preview still has the focus) until the chooser opens.
                let frame = try await desktop.geometry(of: window)
                let deadline = ContinuousClock.now + .seconds(30)
                try await desktop.click(in: window, x: frame.width - 125, y: frame.height - 30)
                var clicked = ContinuousClock.now
                while true {
                    let focused = try await desktop.xdotool(["getwindowfocus", "getwindowname"])
                    if focused == "Share the Recording" { break }
                    guard ContinuousClock.now < deadline else { throw HarnessError("the file chooser did not open (focus: \(focused))") }
                    if ContinuousClock.now - clicked >= .seconds(5), try await desktop.xdotool(["getwindowfocus"]) == window {
                        // The pointer is already there: `mousemove --sync` would wait for a move forever.
                        try await desktop.xdotool(["click", "1"])
                        clicked = ContinuousClock.now
                    }
                    try await Task.sleep(for: .milliseconds(100))
                }
                try await desktop.xdotool(["key", "ctrl+a"])
                try await desktop.xdotool(["type", "--delay", "20", chosen])
                try await Task.sleep(for: .milliseconds(300))
                try await desktop.xdotool(["key", "Return"])
            }
            #expect(outcome.answer == ["action": "shared", "path": chosen])
            #expect(outcome.saved.isEmpty)
            #expect(!outcome.movieLeft)
            let duration = try #require(outcome.written?.format.duration)
            #expect(abs(duration - 6) < 0.2)
        }

        @Test func escapeCancelsAndDeletesTheRecording() async throws {
            let outcome = try await preview { desktop, _, _ in
                try await desktop.xdotool(["key", "Escape"])
            }
            #expect(outcome.answer == ["action": "cancelled"])
            #expect(!outcome.movieLeft)
            #expect(outcome.saved.isEmpty)
        }
    }
}
