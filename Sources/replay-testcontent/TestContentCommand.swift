import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The command line of `replay-testcontent`.
///
/// It opens one override-redirect window covering the whole screen of `$DISPLAY` and draws, at a
/// steady frame rate on the monotonic clock, the pattern `ReplayTesting.TestPattern` describes:
/// a top band of colour bars in reverse order, eight vertical colour bars (white, yellow, cyan,
/// green, magenta, red, blue, black, exact 0/255 values), and a grey panel with a seven-segment frame
/// counter and a moving orange square. Once a second (at 1 s, 2 s, … after start) the whole window
/// is white for 100 ms while a 1000 Hz beep plays; between beeps a quieter 440 Hz tone plays.
struct TestContentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-testcontent",
        abstract: "Draw moving test content (colour bars, frame counter, flashes) and play test tones.",
        discussion: """
            Opens a full-screen override-redirect window on $DISPLAY. Sound goes to the default \
            PulseAudio sink (PULSE_SERVER); without a server it draws anyway and says so. Ends on \
            SIGTERM, SIGINT or after --duration.
            """)

    @Flag(name: .customLong("no-audio"), help: "Play no sound.")
    var noAudio = false

    @Option(help: "Frames per second.")
    var fps: Int = 30

    @Flag(name: .customLong("static"), help: "Draw one frame, then change nothing (static-screen benchmark).")
    var staticScreen = false

    @Flag(help: "With --static: copy parts of the same picture to the screen again every frame (a client that redraws without changing anything).")
    var repaint = false

    @Flag(help: "A typical desktop: still background, a terminal scrolling text, a small animation.")
    var desktop = false

    @Flag(name: .customLong("small-animation"), help: "The desktop's still background with one 320x180 moving pattern (a still screen where little changes).")
    var smallAnimation = false

    @Flag(name: .customLong("full-motion"), help: "Every pixel changes every frame (full-motion benchmark).")
    var fullMotion = false

    @Flag(name: .customLong("clock-barcode"), help: "The wall clock in milliseconds as a barcode in every frame (make bench's glass-to-glass latency; Benchmarks/service/latency.js reads it).")
    var clockBarcode = false

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(help: "X display to draw on (default: $DISPLAY).")
    var display: String?

    @Option(help: ArgumentHelp("Act as one application instead: a window of this geometry (WxH+X+Y), no full-screen pattern.",
                               discussion: "With --colour, --tone, --move-to, --second, --protected, --protected-audio."))
    var app: String?

    @Option(help: "With --app: the window's colour as RRGGBB.")
    var colour: String = "ff0000"

    @Option(help: "With --app: play a sine of this frequency (Hz).")
    var tone: Double?

    @Option(name: .customLong("move-to"), help: "With --app: move the window to X,Y after --move-after seconds.")
    var moveTo: String?

    @Option(name: .customLong("move-after"), help: "Seconds before --move-to.")
    var moveAfter: Double = 1

    @Option(help: "With --app: open a second window of this geometry (WxH+X+Y) after --second-after seconds.")
    var second: String?

    @Option(name: .customLong("second-colour"), help: "The second window's colour as RRGGBB (default: --colour).")
    var secondColour: String?

    @Option(name: .customLong("second-after"), help: "Seconds before --second opens.")
    var secondAfter: Double = 1

    @Flag(help: "With --app: set _OPENREPLAYKIT_PROTECTED=1 on the windows.")
    var protected = false

    @Option(name: .customLong("flip-every"), help: "With --app: swap the window's colour with its inverse every this many seconds (make bench's capture latency and full-motion app).")
    var flipEvery: Double?

    @Option(name: .customLong("flip-log"), help: "With --flip-every: append each flip's CLOCK_MONOTONIC time (ns, taken before the repaint is sent) and the new colour to this file.")
    var flipLog: String?

    @Flag(name: .customLong("protected-audio"), help: "With --app: the tone's sink-input carries openreplaykit.protected=1.")
    var protectedAudio = false

    func validate() throws {
        guard (1...240).contains(fps) else { throw ValidationError("--fps must be between 1 and 240.") }
        if [staticScreen, desktop, smallAnimation, fullMotion, clockBarcode].filter({ $0 }).count > 1 {
            throw ValidationError("--static, --desktop, --small-animation, --full-motion and --clock-barcode exclude each other.")
        }
        if let duration, !(duration > 0) { throw ValidationError("--duration must be positive.") }
        if repaint && !staticScreen { throw ValidationError("--repaint goes with --static.") }
        if let flipEvery, !(flipEvery > 0) || app == nil { throw ValidationError("--flip-every takes a positive number of seconds and goes with --app.") }
    }

    func run() throws {
        StopSignal.install()
        if let app {
            guard let main = AppContent.geometry(app), let colour = UInt32(colour, radix: 16) else {
                throw ValidationError("--app takes WxH+X+Y and --colour RRGGBB.")
            }
            var secondWindow: AppContent.Window?
            if let second {
                guard let g = AppContent.geometry(second), let c = UInt32(secondColour ?? self.colour, radix: 16) else {
                    throw ValidationError("--second takes WxH+X+Y and --second-colour RRGGBB.")
                }
                secondWindow = AppContent.Window(colour: c, x: g.x, y: g.y, width: g.width, height: g.height)
            }
            let target = moveTo.flatMap { text -> (x: Int, y: Int)? in
                let parts = text.split(separator: ",").compactMap { Int($0) }
                return parts.count == 2 ? (parts[0], parts[1]) : nil
            }
            let content = AppContent(display: display, main: AppContent.Window(colour: colour, x: main.x, y: main.y, width: main.width, height: main.height),
                                     moveTo: target, moveAfter: moveAfter, second: secondWindow, secondAfter: secondAfter,
                                     protectedWindow: protected, tone: noAudio ? nil : tone, protectedAudio: protectedAudio, duration: duration,
                                     flipEvery: flipEvery, flipLog: flipLog)
            do {
                try content.run()
            } catch {
                printError("replay-testcontent: \(error)")
                throw ExitCode(2)
            }
            return
        }
        let mode: ContentMode = staticScreen ? .still : desktop ? .desktop : smallAnimation ? .smallAnimation : fullMotion ? .fullMotion : clockBarcode ? .clockBarcode : .bars
        let renderer: Renderer
        do {
            renderer = try Renderer(displayName: display, mode: mode)
        } catch {
            printError("replay-testcontent: \(error)")
            throw ExitCode(2)
        }
        let start = MonotonicClock.nowNanoseconds()
        var player: TonePlayer?
        if !noAudio {
            let tones = TonePlayer(startNanoseconds: start)
            tones.start()
            player = tones
        }
        defer { player?.stop() }

        let frameNanos = 1_000_000_000 / UInt64(fps)
        let endNanos = duration.map { start + UInt64($0 * 1e9) }
        var lastFrame = -1
        renderer.drawFrame(number: 0, framesPerSecond: fps)
        lastFrame = 0
        writeLine("replay-testcontent: window 0x\(String(renderer.window, radix: 16)) \(renderer.width)x\(renderer.height) on \(renderer.displayName)",
                  to: STDOUT_FILENO)
        // Frame n is shown at start + n / fps and each beep starts at start + k s on CLOCK_MONOTONIC:
        // a tool can check timing against this.
        writeLine("replay-testcontent: clock start \(start / 1_000_000_000).\(String(format: "%09llu", start % 1_000_000_000)) s CLOCK_MONOTONIC",
                  to: STDOUT_FILENO)

        while !StopSignal.requested {
            let now = MonotonicClock.nowNanoseconds()
            if let endNanos, now >= endNanos { break }
            guard renderer.isConnected else {
                printError("replay-testcontent: lost the connection to the X server")
                throw ExitCode(3)
            }
            renderer.handleEvents()
            if mode != .still || repaint {
                let frame = Int((now - start) / frameNanos)
                if frame != lastFrame, mode == .still {
                    renderer.repaint(frame: frame)
                    lastFrame = frame
                } else if frame != lastFrame {
                    renderer.drawFrame(number: frame, framesPerSecond: fps)
                    lastFrame = frame
                }
                MonotonicClock.sleep(untilNanoseconds: start + UInt64(frame + 1) * frameNanos)
            } else {
                MonotonicClock.sleep(untilNanoseconds: now + 50_000_000)
            }
        }
    }
}

func printError(_ message: String) {
    writeLine(message, to: STDERR_FILENO)
}

/// Writes one line straight to a file descriptor (unbuffered, so a test reading the pipe sees it).
func writeLine(_ message: String, to descriptor: Int32) {
    var bytes = Array((message + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
        if n <= 0 { return }
        offset += n
    }
}
