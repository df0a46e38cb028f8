import Foundation

/// A system window of replayd (consent, preview, picker) found by its WM_CLASS instance and answered
/// with real key presses (xdotool), on a display without a window manager: the window is focused first.
public enum SystemWindowKeys {
    /// Waits (up to `timeout`) for a visible window whose WM_CLASS instance is `instance`; its id.
    public static func waitForWindow(_ instance: String, environment: [String: String], timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let found = try await ProcessRunner.run("xdotool", arguments: ["search", "--onlyvisible", "--classname", instance],
                                                    environment: environment, timeout: .seconds(10))
            if let window = found.stdout.split(separator: "\n").first.map(String.init) { return window }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw HarnessError("no visible \(instance) window within \(timeout)")
    }

    /// Waits for the window, focuses it, and presses `keys` (xdotool's key names) a tenth of a second apart.
    public static func press(_ keys: [String], in instance: String, environment: [String: String]) async throws {
        let window = try await waitForWindow(instance, environment: environment)
        try await Task.sleep(for: .milliseconds(500))   // drawn and ready for keys
        _ = try await ProcessRunner.run("xdotool", arguments: ["windowfocus", "--sync", window], environment: environment, timeout: .seconds(10))
        _ = try await ProcessRunner.run("xdotool", arguments: ["key", "--delay", "100"] + keys, environment: environment, timeout: .seconds(10))
    }
}
