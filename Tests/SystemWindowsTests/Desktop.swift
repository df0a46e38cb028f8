import Foundation
import ReplayTesting
import Testing

/// Every test of the system windows, one at a time: each starts its own X server, window manager
/// and sound server, and they measure focus and timing on two shared cores.
@Suite(.serialized)
struct SystemWindowsTests {}

/// A desktop for the system windows: a private Xvfb with openbox as the window manager (focus,
/// stacking, the close action as a person's Alt+F4) and a private PulseAudio for the preview's
/// sound. Keys and clicks go in through XTEST (`xdotool`), as a person's would.
struct Desktop {
    let environment: TestEnvironment
    let windowManager: BackgroundProcess
    /// Where the windows' screenshots go: `ORK_UI_SCREENSHOTS` when set (to keep them), else the test's folder.
    let screenshotFolder: String

    static func with<T: Sendable>(_ body: (Desktop) async throws -> T) async throws -> T {
        try await TestEnvironment.with(TestEnvironment.Configuration(width: 1280, height: 720, audio: .pulseAudio, content: nil)) { environment in
            let windowManager = try BackgroundProcess("openbox", arguments: ["--sm-disable"], environment: environment.environment)
            let folder = ProcessInfo.processInfo.environment["ORK_UI_SCREENSHOTS"].flatMap { $0.isEmpty ? nil : $0 }
                ?? environment.directory.appendingPathComponent("screenshots").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let desktop = Desktop(environment: environment, windowManager: windowManager, screenshotFolder: folder)
            do {
                try await desktop.waitForWindowManager()
                let result = try await body(desktop)
                await windowManager.terminate(grace: .seconds(2))
                return result
            } catch {
                await windowManager.terminate(grace: .seconds(2))
                throw error
            }
        }
    }

    private func waitForWindowManager() async throws {
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            let probe = try await ProcessRunner.run("xprop", arguments: ["-root", "_NET_SUPPORTING_WM_CHECK"],
                                                    environment: environment.environment, timeout: .seconds(5))
            if probe.stdout.contains("window id") { return }
            guard windowManager.isRunning else { throw HarnessError("openbox ended: \(windowManager.currentError)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HarnessError("openbox did not come up: \(windowManager.currentError)")
    }

    /// Starts the built `replay-ui` on this display.
    func startUI(_ arguments: [String]) throws -> BackgroundProcess {
        var arguments = arguments
        arguments.insert(contentsOf: ["--display", environment.xvfb.display], at: 1)
        return try BackgroundProcess(try Binaries.path("replay-ui"), arguments: arguments, environment: environment.environment)
    }

    @discardableResult
    func xdotool(_ arguments: [String]) async throws -> String {
        let result = try await ProcessRunner.run("xdotool", arguments: arguments, environment: environment.environment, timeout: .seconds(10))
        guard result.succeeded else { throw HarnessError("xdotool \(arguments.joined(separator: " ")) failed: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Closes `window` as a person does, through the window manager (Alt+F4 in openbox: WM_DELETE_WINDOW),
    /// asking again every 2 s while it is still mapped: on a loaded machine a first Alt+F4 was lost
    /// now and then (sent before openbox had taken the window, the picker's once, the consent's once).
    func closeThroughWindowManager(_ window: String) async throws {
        for _ in 0..<5 {
            try await xdotool(["key", "alt+F4"])
            let deadline = ContinuousClock.now + .seconds(2)
            while ContinuousClock.now < deadline {
                let info = try await ProcessRunner.run("xwininfo", arguments: ["-id", window], environment: environment.environment, timeout: .seconds(5))
                if !info.succeeded || !info.stdout.contains("IsViewable") { return }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// The id of the visible top-level window whose WM_CLASS instance is `instance`.
    func waitForWindow(classNamed instance: String, of process: BackgroundProcess, timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard process.isRunning else { throw HarnessError("replay-ui ended before its window showed: \(process.result.map { "\($0)" } ?? "")") }
            let found = try await ProcessRunner.run("xdotool", arguments: ["search", "--onlyvisible", "--classname", instance],
                                                    environment: environment.environment, timeout: .seconds(10))
            if let window = found.stdout.split(separator: "\n").first { return String(window) }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw HarnessError("no window of class \(instance) after \(timeout); replay-ui says:\n\(process.currentError.suffix(2000))")
    }

    /// Waits until `window` has the keyboard focus and is the window manager's active window.
    func waitForFocus(_ window: String, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        var last = ""
        while ContinuousClock.now < deadline {
            let focus = try await xdotool(["getwindowfocus"])
            let active = try await xdotool(["getactivewindow"])
            if focus == window && active == window { return }
            last = "focus \(focus), active \(active)"
            try await Task.sleep(for: .milliseconds(100))
        }
        throw HarnessError("window \(window) did not get the focus (\(last))")
    }

    /// Waits until `window` is drawn and laid out: its pixels have more than `colours` colours and two
    /// grabs a tenth of a second apart agree. A click before that can land on a widget still moving.
    func waitUntilDrawn(_ window: String, colours: Int = 20, timeout: Duration = .seconds(15)) async throws {
        let deadline = ContinuousClock.now + timeout
        var previous: [UInt8] = []
        var seen = 0
        while ContinuousClock.now < deadline {
            let pixels = try await self.pixels(of: window)
            seen = distinctColours(pixels)
            if seen > colours && pixels.pixels == previous { return }
            previous = pixels.pixels
            try await Task.sleep(for: .milliseconds(100))
        }
        throw HarnessError("window \(window) was not drawn within \(timeout) (\(seen) colours)")
    }

    struct Geometry: Sendable { var x, y, width, height: Int }

    /// Where the window's inside is on the screen (`xwininfo`'s absolute position: xdotool's is off by
    /// the frame under a reparenting window manager).
    func geometry(of window: String) async throws -> Geometry {
        let result = try await ProcessRunner.run("xwininfo", arguments: ["-id", window], environment: environment.environment, timeout: .seconds(5))
        var values: [String: Int] = [:]
        for line in result.stdout.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2 { values[parts[0]] = Int(parts[1]) }
        }
        guard let x = values["Absolute upper-left X"], let y = values["Absolute upper-left Y"],
              let width = values["Width"], let height = values["Height"] else {
            throw HarnessError("no geometry for window \(window): \(result)")
        }
        return Geometry(x: x, y: y, width: width, height: height)
    }

    /// The window's WM_CLASS as `xprop` shows it.
    func windowClass(of window: String) async throws -> String {
        let result = try await ProcessRunner.run("xprop", arguments: ["-id", window, "WM_CLASS"], environment: environment.environment, timeout: .seconds(5))
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Clicks at a point of `window` (its own coordinates), as a person with a mouse.
    func click(in window: String, x: Int, y: Int) async throws {
        try await xdotool(["mousemove", "--window", window, "--sync", "\(x)", "\(y)"])
        try await Task.sleep(for: .milliseconds(150))
        try await xdotool(["click", "1"])
    }

    /// The window's pixels, also saved as `name`.png in the screenshot folder.
    func screenshot(of window: String, name: String) async throws -> RGBImage {
        let frame = try await geometry(of: window)
        let path = screenshotFolder + "/\(name).png"
        let grab = try await ProcessRunner.run("ffmpeg", arguments: [
            "-nostdin", "-v", "error", "-y", "-f", "x11grab", "-draw_mouse", "0",
            "-video_size", "\(frame.width)x\(frame.height)", "-i", "\(environment.xvfb.display)+\(frame.x),\(frame.y)",
            "-frames:v", "1", path,
        ], environment: environment.environment, timeout: .seconds(20))
        guard grab.succeeded else { throw HarnessError("screenshot failed: \(grab)") }
        return try await pixels(of: window)
    }

    /// The window's pixels, cut from a grab of the whole screen.
    private func pixels(of window: String) async throws -> RGBImage {
        let frame = try await geometry(of: window)
        let shot = try await environment.xvfb.screenshot()
        let width = min(frame.width, shot.width - frame.x)
        var pixels: [UInt8] = []
        pixels.reserveCapacity(frame.width * frame.height * 3)
        for row in frame.y..<min(frame.y + frame.height, shot.height) {
            let start = (row * shot.width + frame.x) * 3
            pixels += shot.pixels[start..<(start + width * 3)]
        }
        return RGBImage(width: width, height: pixels.count / 3 / max(1, width), pixels: pixels)
    }

    /// The one line `replay-ui` printed (its JSON answer as it is), after it exited 0.
    func answerLine(of process: BackgroundProcess, timeout: Duration = .seconds(20)) async throws -> String {
        let result = try await process.waitForExit(timeout: timeout)
        guard result.succeeded else { throw HarnessError("replay-ui failed: \(result)") }
        let lines = result.stdout.split(separator: "\n")
        guard lines.count == 1 else { throw HarnessError("replay-ui did not print one line: \(result)") }
        return String(lines[0])
    }

    /// The one JSON answer `replay-ui` printed, after it exited 0.
    func answer(of process: BackgroundProcess, timeout: Duration = .seconds(20)) async throws -> [String: String] {
        let result = try await process.waitForExit(timeout: timeout)
        guard result.succeeded else { throw HarnessError("replay-ui failed: \(result)") }
        let lines = result.stdout.split(separator: "\n")
        guard lines.count == 1, let object = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: String] else {
            throw HarnessError("replay-ui did not print one JSON line: \(result)")
        }
        return object
    }
}

/// Distinct colours in an image: a drawn window has text, buttons and edges; a blank one has one.
func distinctColours(_ image: RGBImage) -> Int {
    var seen = Set<RGB>()
    for y in stride(from: 0, to: image.height, by: 2) {
        for x in stride(from: 0, to: image.width, by: 2) { seen.insert(image.pixel(x: x, y: y)) }
    }
    return seen.count
}
