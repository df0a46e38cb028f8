import Foundation
public import Logging

/// `replay-testcontent` running on a test display: colour bars, a frame counter, a moving square,
/// a white flash with a 1000 Hz beep once a second, and a 440 Hz tone in between.
public final class TestContent: Sendable {
    /// What to draw and play.
    public struct Options: Sendable {
        public enum Mode: String, Sendable {
            /// Bars, counter, square and flashes, the whole window redrawn every frame.
            case bars
            /// One frame, then nothing changes.
            case still
            /// The still frame, parts of it copied to the screen again every frame without a change
            /// (the counter's panel and the top band in turn).
            case repainting
            /// A still background, a scrolling terminal, a small animation.
            case desktop
        }

        public var mode: Mode
        public var audio: Bool
        public var framesPerSecond: Int

        public init(mode: Mode = .bars, audio: Bool = true, framesPerSecond: Int = 30) {
            self.mode = mode
            self.audio = audio
            self.framesPerSecond = framesPerSecond
        }

        /// Bars at 60 fps, twice the rate `replay` records at by default, for tests that count
        /// pictures. The recorder writes a picture for each tick at which the screen changed; at 30
        /// fps a frame the content draws a few milliseconds late (a busy machine) falls after the
        /// tick it was meant for, that tick finds the screen unchanged and rightly writes nothing.
        /// At 60 fps every tick has a change unless the content stalls for a whole tick.
        public static let twiceTheRecordingRate = Options(framesPerSecond: 60)

        var arguments: [String] {
            var arguments = ["--fps", "\(framesPerSecond)"]
            if !audio { arguments.append("--no-audio") }
            switch mode {
            case .bars: break
            case .still: arguments.append("--static")
            case .repainting: arguments += ["--static", "--repaint"]
            case .desktop: arguments.append("--desktop")
            }
            return arguments
        }
    }

    public let options: Options
    /// The X window id, e.g. `0x200000`.
    public let windowID: String
    private let process: BackgroundProcess
    private let logger: Logger

    public var pid: Int32 { process.pid }

    private init(options: Options, windowID: String, process: BackgroundProcess, logger: Logger) {
        self.options = options
        self.windowID = windowID
        self.process = process
        self.logger = logger
    }

    /// Starts the built `replay-testcontent` on `display` (sound to the server in `pulseEnvironment`,
    /// if any), waits until its window is viewable, and parks the pointer in the bottom-right corner
    /// so that it covers none of the bars.
    public static func start(on display: XvfbServer, pulseEnvironment: [String: String]?, options: Options = Options(),
                             logger: Logger = .harness) async throws -> TestContent {
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = display.display
        for key in ["PULSE_SERVER", "PULSE_COOKIE", "PULSE_CLIENTCONFIG"] { environment[key] = nil }
        if let pulseEnvironment { environment.merge(pulseEnvironment) { $1 } }
        let process = try BackgroundProcess(try Binaries.testContent(), arguments: options.arguments, environment: environment)
        var displayEnvironment = ProcessInfo.processInfo.environment
        displayEnvironment["DISPLAY"] = display.display

        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            guard process.isRunning else {
                throw HarnessError("replay-testcontent exited at start:\n\(process.currentError)")
            }
            if let info = try? await ProcessRunner.run("xwininfo", arguments: ["-name", "replay-testcontent"],
                                                       environment: displayEnvironment, timeout: .seconds(5)),
               info.succeeded, info.stdout.contains("IsViewable"),
               let id = info.stdout.split(separator: "\n").first(where: { $0.contains("Window id:") })?
                   .split(separator: " ").first(where: { $0.hasPrefix("0x") }) {
                _ = try? await ProcessRunner.run("xdotool", arguments: ["mousemove", "\(display.width - 1)", "\(display.height - 1)"],
                                                 environment: displayEnvironment, timeout: .seconds(5))
                try await Task.sleep(for: .milliseconds(150))  // a few frames drawn
                logger.debug("test content up", metadata: ["window": "\(id)", "pid": "\(process.pid)"])
                return TestContent(options: options, windowID: String(id), process: process, logger: logger)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        await process.terminate(grace: .seconds(1))
        throw HarnessError("replay-testcontent's window did not appear on \(display.display) within 10 s:\n\(process.currentError)")
    }

    /// When the content's clock started, in seconds on `CLOCK_MONOTONIC` (see ``MonotonicTime``):
    /// frame n is shown at `clockStart + n / fps`, and the flashes and beeps start at
    /// `clockStart + k` for k = 1, 2, …
    public var clockStart: Double? {
        guard let line = process.currentOutput.split(separator: "\n").first(where: { $0.contains("clock start") }),
              let value = line.split(separator: " ").first(where: { Double($0) != nil }) else { return nil }
        return Double(value)
    }

    /// What the program printed on standard error (a missing sound server, for one).
    public var standardError: String { process.currentError }

    public var isRunning: Bool { process.isRunning }

    /// Ends it with SIGTERM (SIGKILL if it lingers) and waits.
    public func stop() async {
        await process.terminate(grace: .seconds(3))
    }
}
