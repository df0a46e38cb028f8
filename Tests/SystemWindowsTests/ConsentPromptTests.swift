import Foundation
import ReplayTesting
import Testing

extension SystemWindowsTests {
    /// `replay-ui consent` on a real display with a window manager, answered with real key presses
    /// and clicks (XTEST). One at a time: each starts its own X server.
    @Suite
    struct ConsentPromptTests {
        /// Starts the prompt, waits until it is shown with the keyboard focus, then lets `act` answer it.
        private func prompt(microphone: Bool = false, icon: String? = nil,
                            _ act: (Desktop, String) async throws -> Void) async throws -> String {
            try await Desktop.with { desktop in
                var arguments = ["consent", "--app-name", "SketchPad"]
                if microphone { arguments.append("--microphone") }
                if let icon { arguments += ["--app-icon", icon] }
                let ui = try desktop.startUI(arguments)
                do {
                    let window = try await desktop.waitForWindow(classNamed: "openreplaykit-consent", of: ui)
                    try await desktop.waitForFocus(window)
                    try await act(desktop, window)
                    let answer = try await desktop.answer(of: ui)
                    return try #require(answer["answer"])
                } catch {
                    await ui.terminate(grace: .seconds(1))
                    throw error
                }
            }
        }

        @Test func returnAllows() async throws {
            let answer = try await prompt { desktop, _ in try await desktop.xdotool(["key", "Return"]) }
            #expect(answer == "allow")
        }

        @Test func escapeDenies() async throws {
            let answer = try await prompt { desktop, _ in try await desktop.xdotool(["key", "Escape"]) }
            #expect(answer == "deny")
        }

        /// The focus starts on Don't Allow; Tab moves it to Allow, and Escape still denies.
        @Test func escapeDeniesWhenAllowHasTheFocus() async throws {
            let answer = try await prompt { desktop, _ in
                try await desktop.xdotool(["key", "Tab"])
                try await Task.sleep(for: .milliseconds(200))
                try await desktop.xdotool(["key", "Escape"])
            }
            #expect(answer == "deny")
        }

        /// Return allows even with the focus on Don't Allow (where it starts).
        @Test func returnAllowsWhenDontAllowHasTheFocus() async throws {
            let answer = try await prompt { desktop, _ in
                try await desktop.xdotool(["key", "Return"])
            }
            #expect(answer == "allow")
        }

        /// The two buttons share the bottom row: Don't Allow on the left, Allow on the right.
        @Test(arguments: [("left", "deny"), ("right", "allow")])
        func clickingAButton(side: String, expected: String) async throws {
            let answer = try await prompt { desktop, window in
                // 24 px margins, buttons about 34 px high: their middle is some 50 px above the bottom.
                let frame = try await desktop.geometry(of: window)
                try await desktop.click(in: window, x: side == "left" ? frame.width / 4 : frame.width * 3 / 4, y: frame.height - 50)
            }
            #expect(answer == expected)
        }

        /// Closing the window (the window manager's close: Alt+F4 in openbox, WM_DELETE_WINDOW) denies.
        @Test func closingDenies() async throws {
            let answer = try await prompt { desktop, window in try await desktop.closeThroughWindowManager(window) }
            #expect(answer == "deny")
        }

        /// WM_CLASS, the title, that it asks to stay above, and that it is drawn with the app's icon (a
        /// screenshot with text and buttons, kept with ORK_UI_SCREENSHOTS=DIR to look at).
        @Test func windowIsAPromptAboveTheOthers() async throws {
            let icon = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../dist/desktop/icons/org.openreplaykit.ScreenRecording-64.png").standardized.path
            #expect(FileManager.default.fileExists(atPath: icon))
            let answer = try await prompt(microphone: true, icon: icon) { desktop, window in
                let wmClass = try await desktop.windowClass(of: window)
                #expect(wmClass.contains("\"openreplaykit-consent\""), "WM_CLASS: \(wmClass)")
                let name = try await desktop.xdotool(["getwindowname", window])
                #expect(name == "Allow “SketchPad” to record the screen and the microphone?")
                let state = try await ProcessRunner.run("xprop", arguments: ["-id", window, "_NET_WM_STATE"],
                                                        environment: desktop.environment.environment, timeout: .seconds(5))
                #expect(state.stdout.contains("_NET_WM_STATE_ABOVE"), "\(state.stdout)")
                try await desktop.waitUntilDrawn(window)
                let shot = try await desktop.screenshot(of: window, name: "consent")
                #expect(shot.width >= 300 && shot.height >= 150)
                #expect(distinctColours(shot) > 20, "the prompt looks blank")
                try await desktop.xdotool(["key", "Escape"])
            }
            #expect(answer == "deny")
        }
    }
}
