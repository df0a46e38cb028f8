import CXCB
import CPulse
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `--app`: acts as one application for the privacy tests. A normal top-level window of one colour
/// at a given place (repainted every 50 ms, so that it keeps drawing), optionally moved, a second
/// window opened later, and `_OPENREPLAYKIT_PROTECTED` set; and a sine of one frequency played
/// through PulseAudio (its sink-input carries this process's `application.process.id`), optionally
/// with `openreplaykit.protected=1`. It sets no `_NET_WM_PID`: its windows are told by X-Resource.
struct AppContent {
    struct Window {
        var colour: UInt32   // 0xRRGGBB
        var x: Int, y: Int, width: Int, height: Int
    }

    var display: String?
    var main: Window
    var moveTo: (x: Int, y: Int)?
    var moveAfter: Double
    var second: Window?
    var secondAfter: Double
    var protectedWindow: Bool
    var tone: Double?
    var protectedAudio: Bool
    var duration: Double?
    /// Swap the main window's colour with its inverse this often (seconds), logging each swap.
    var flipEvery: Double? = nil
    var flipLog: String? = nil

    /// Parses `WxH+X+Y`.
    static func geometry(_ text: String) -> (x: Int, y: Int, width: Int, height: Int)? {
        let parts = text.split(whereSeparator: { $0 == "x" || $0 == "+" }).compactMap { Int($0) }
        guard parts.count == 4, parts[0] > 0, parts[1] > 0 else { return nil }
        return (parts[2], parts[3], parts[0], parts[1])
    }

    func run() throws {
        let name = display ?? getenv("DISPLAY").map { String(cString: $0) }
        guard let name, !name.isEmpty else { throw RendererError(description: "no X display: set DISPLAY or pass --display") }
        var screenNumber: Int32 = 0
        guard let connection = xcb_connect(name, &screenNumber), xcb_connection_has_error(connection) == 0 else {
            throw RendererError(description: "cannot connect to the X display \(name)")
        }
        defer { xcb_disconnect(connection) }
        let screen = xcb_setup_roots_iterator(xcb_get_setup(connection)).data.pointee
        let start = MonotonicClock.nowNanoseconds()
        var player: SinePlayer?
        if let tone {
            let sine = SinePlayer(frequency: tone, protected: protectedAudio)
            sine.start()
            player = sine
        }
        defer { player?.stop() }

        var windows: [(id: UInt32, gc: UInt32, spec: Window)] = []
        func open(_ spec: Window) -> UInt32 {
            let window = xcb_generate_id(connection)
            let values: [UInt32] = [spec.colour, XCB_EVENT_MASK_EXPOSURE.rawValue]
            xcb_create_window(connection, screen.root_depth, window, screen.root, Int16(spec.x), Int16(spec.y),
                              UInt16(spec.width), UInt16(spec.height), 0, UInt16(XCB_WINDOW_CLASS_INPUT_OUTPUT.rawValue),
                              screen.root_visual, XCB_CW_BACK_PIXEL.rawValue | XCB_CW_EVENT_MASK.rawValue, values)
            let title = Array("replay-testcontent app".utf8)
            xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, XCB_ATOM_WM_NAME.rawValue,
                                XCB_ATOM_STRING.rawValue, 8, UInt32(title.count), title)
            let wmClass = Array("replay-testapp\0ReplayTestApp\0".utf8)
            xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, XCB_ATOM_WM_CLASS.rawValue,
                                XCB_ATOM_STRING.rawValue, 8, UInt32(wmClass.count), wmClass)
            if protectedWindow, let atom = Renderer.internAtom(connection, "_OPENREPLAYKIT_PROTECTED") {
                var one: UInt32 = 1
                xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, atom, XCB_ATOM_CARDINAL.rawValue, 32, 1, &one)
            }
            let gc = xcb_generate_id(connection)
            let gcValues: [UInt32] = [spec.colour, 0]
            xcb_create_gc(connection, gc, window, XCB_GC_FOREGROUND.rawValue | XCB_GC_GRAPHICS_EXPOSURES.rawValue, gcValues)
            xcb_map_window(connection, window)
            windows.append((window, gc, spec))
            xcb_flush(connection)
            writeLine("replay-testcontent: app window 0x\(String(window, radix: 16)) \(spec.width)x\(spec.height)+\(spec.x)+\(spec.y) pid \(getpid())",
                      to: STDOUT_FILENO)
            return window
        }
        _ = open(main)
        let flipLogFile = flipLog.flatMap { path -> UnsafeMutablePointer<FILE>? in fopen(path, "a") }
        defer { if let flipLogFile { fclose(flipLogFile) } }
        let flipNanoseconds = flipEvery.map { UInt64($0 * 1e9) }
        var nextFlip = flipNanoseconds.map { start + $0 } ?? .max
        var flips = 0
        var moved = moveTo == nil
        var secondOpen = second == nil
        while !StopSignal.requested {
            let elapsed = Double(MonotonicClock.nowNanoseconds() - start) / 1e9
            if let duration, elapsed >= duration { break }
            guard xcb_connection_has_error(connection) == 0 else { throw RendererError(description: "lost the X server") }
            while let event = xcb_poll_for_event(connection) { free(event) }
            if !moved, let moveTo, elapsed >= moveAfter {
                let values: [UInt32] = [UInt32(bitPattern: Int32(moveTo.x)), UInt32(bitPattern: Int32(moveTo.y))]
                xcb_configure_window(connection, windows[0].id, UInt16(XCB_CONFIG_WINDOW_X.rawValue | XCB_CONFIG_WINDOW_Y.rawValue), values)
                writeLine("replay-testcontent: app window moved to +\(moveTo.x)+\(moveTo.y)", to: STDOUT_FILENO)
                moved = true
            }
            if !secondOpen, let second, elapsed >= secondAfter {
                _ = open(second)
                secondOpen = true
            }
            if let flipNanoseconds, MonotonicClock.nowNanoseconds() >= nextFlip {
                flips += 1
                let colour = flips % 2 == 1 ? ~main.colour & 0xffffff : main.colour
                var value = colour
                xcb_change_gc(connection, windows[0].gc, XCB_GC_FOREGROUND.rawValue, &value)
                // The time the change is sent: the latency measured from it includes the X server's drawing.
                let sent = MonotonicClock.nowNanoseconds()
                if let flipLogFile {
                    fputs("\(sent) \(String(colour, radix: 16))\n", flipLogFile)
                    fflush(flipLogFile)
                }
                nextFlip += flipNanoseconds
                if nextFlip < sent { nextFlip = sent + flipNanoseconds }
            }
            // Keep drawing, as a live application does: every window repainted in its colour.
            for window in windows {
                var rect = xcb_rectangle_t(x: 0, y: 0, width: UInt16(window.spec.width), height: UInt16(window.spec.height))
                xcb_poly_fill_rectangle(connection, window.id, window.gc, 1, &rect)
            }
            xcb_flush(connection)
            MonotonicClock.sleep(untilNanoseconds: min(MonotonicClock.nowNanoseconds() + 50_000_000, nextFlip))
        }
    }
}

/// Plays a continuous sine (amplitude 0.3) to the default sink; with `protected`, its sink-input
/// carries `openreplaykit.protected=1` (set on the client's property list, which PulseAudio merges
/// into the stream's).
final class SinePlayer: Sendable {
    private let frequency: Double
    private let protected: Bool
    private let stopFlag = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)

    init(frequency: Double, protected: Bool) {
        self.frequency = frequency
        self.protected = protected
    }

    func start() {
        if protected { setenv("PULSE_PROP", "openreplaykit.protected=1", 1) }
        let thread = Thread { [self] in
            self.play()
            self.finished.store(true, ordering: .releasing)
        }
        thread.name = "sine"
        thread.start()
    }

    func stop() {
        stopFlag.store(true, ordering: .releasing)
        let deadline = MonotonicClock.nowNanoseconds() + 1_000_000_000
        while !finished.load(ordering: .acquiring) && MonotonicClock.nowNanoseconds() < deadline {
            MonotonicClock.sleep(untilNanoseconds: MonotonicClock.nowNanoseconds() + 5_000_000)
        }
    }

    private func play() {
        let rate = 48_000, frames = 480
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(rate), channels: 2)
        var attributes = pa_buffer_attr(maxlength: .max, tlength: UInt32(pa_usec_to_bytes(40_000, &spec)),
                                        prebuf: .max, minreq: .max, fragsize: .max)
        var error: Int32 = 0
        guard let stream = pa_simple_new(nil, "replay-testcontent app", PA_STREAM_PLAYBACK, nil, "app tone",
                                         &spec, nil, &attributes, &error) else {
            printError("replay-testcontent: no sound, PulseAudio refused a playback stream: \(String(cString: pa_strerror(error)))")
            return
        }
        defer { pa_simple_free(stream) }
        writeLine("replay-testcontent: app tone \(frequency) Hz", to: STDOUT_FILENO)
        var phase = 0.0
        let step = 2 * Double.pi * frequency / Double(rate)
        var samples = [Float](repeating: 0, count: frames * 2)
        while !stopFlag.load(ordering: .acquiring) {
            for i in 0..<frames {
                let value = Float(0.3 * sin(phase))
                phase += step
                samples[2 * i] = value
                samples[2 * i + 1] = value
            }
            phase = phase.truncatingRemainder(dividingBy: 2 * Double.pi)
            // pa_simple_write blocks while the server's buffer is full: the sink's clock paces it.
            if samples.withUnsafeBytes({ pa_simple_write(stream, $0.baseAddress, $0.count, &error) }) < 0 {
                printError("replay-testcontent: sound stopped: \(String(cString: pa_strerror(error)))")
                return
            }
        }
    }
}
