import Foundation
public import Logging

/// `replay-testcontent --app` on a test display: one application for the privacy tests, with a
/// window of one colour at a known place (which may move, or gain a second window later) and a
/// tone of one frequency.
public final class TestApp: Sendable {
    public struct Options: Sendable {
        /// The window: colour (0xRRGGBB) and place.
        public var colour: UInt32
        public var rect: PixelRect
        /// A continuous sine of this frequency, or none.
        public var tone: Double?
        public var moveTo: (x: Int, y: Int)?
        public var moveAfter: Double = 1
        public var second: (colour: UInt32, rect: PixelRect)?
        public var secondAfter: Double = 1
        public var protectedWindow = false
        public var protectedAudio = false
        /// Every this many seconds the window turns to its inverse colour and back (drawn at once).
        public var flipEvery: Double?
        /// With `flipEvery`: the file each flip's CLOCK_MONOTONIC time (ns) and new colour go to.
        public var flipLog: String?

        public init(colour: UInt32, rect: PixelRect, tone: Double? = nil) {
            self.colour = colour
            self.rect = rect
            self.tone = tone
        }

        var arguments: [String] {
            func geometry(_ r: PixelRect) -> String { "\(r.width)x\(r.height)+\(r.x)+\(r.y)" }
            func hex(_ c: UInt32) -> String { String(format: "%06x", c) }
            var arguments = ["--app", geometry(rect), "--colour", hex(colour)]
            if let tone { arguments += ["--tone", "\(tone)"] } else { arguments.append("--no-audio") }
            if let moveTo { arguments += ["--move-to", "\(moveTo.x),\(moveTo.y)", "--move-after", "\(moveAfter)"] }
            if let second {
                arguments += ["--second", geometry(second.rect), "--second-colour", hex(second.colour), "--second-after", "\(secondAfter)"]
            }
            if protectedWindow { arguments.append("--protected") }
            if protectedAudio { arguments.append("--protected-audio") }
            if let flipEvery { arguments += ["--flip-every", "\(flipEvery)"] }
            if let flipLog { arguments += ["--flip-log", flipLog] }
            return arguments
        }
    }

    public let options: Options
    private let process: BackgroundProcess
    public var pid: Int32 { process.pid }
    /// What it printed (its window ids, moves, tone).
    public var output: String { process.currentOutput }

    private init(options: Options, process: BackgroundProcess) {
        self.options = options
        self.process = process
    }

    /// Starts it on `display` with sound to the server in `pulseEnvironment` and waits until its
    /// window is mapped (and its tone is playing, when it has one).
    public static func start(on display: XvfbServer, pulseEnvironment: [String: String]?, options: Options,
                             logger: Logger = .harness) async throws -> TestApp {
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = display.display
        for key in ["PULSE_SERVER", "PULSE_COOKIE", "PULSE_CLIENTCONFIG", "PULSE_PROP"] { environment[key] = nil }
        if let pulseEnvironment { environment.merge(pulseEnvironment) { $1 } }
        let process = try BackgroundProcess(try Binaries.testContent(), arguments: options.arguments, environment: environment)
        let app = TestApp(options: options, process: process)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            guard process.isRunning else { throw HarnessError("replay-testcontent --app exited at start:\n\(process.currentError)") }
            let output = process.currentOutput
            if output.contains("app window"), options.tone == nil || output.contains("app tone") {
                try await Task.sleep(for: .milliseconds(150))   // mapped and painted
                logger.debug("test app up", metadata: ["pid": "\(process.pid)", "arguments": "\(options.arguments)"])
                return app
            }
            try await Task.sleep(for: .milliseconds(30))
        }
        await process.terminate(grace: .seconds(1))
        throw HarnessError("replay-testcontent --app did not come up within 10 s:\n\(process.currentError)")
    }

    /// Ends it with SIGTERM (SIGKILL if it lingers) and waits.
    public func stop() async {
        await process.terminate(grace: .seconds(2))
    }

    /// Ends it at once (SIGKILL), without waiting: for a `defer` when a test fails half-way.
    public func kill() {
        process.signal(SIGKILL)
    }
}

extension RGB {
    /// A colour given as 0xRRGGBB.
    public init(hex: UInt32) {
        self.init(UInt8(hex >> 16 & 0xff), UInt8(hex >> 8 & 0xff), UInt8(hex & 0xff))
    }
}
