import Foundation
public import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A private X server (Xvfb) on a free display number, for one test.
public final class XvfbServer: Sendable {
    /// N in `:N`.
    public let displayNumber: Int
    public let width: Int
    public let height: Int
    private let process: BackgroundProcess
    private let logger: Logger

    /// The display name, `:N`.
    public var display: String { ":\(displayNumber)" }
    /// `DISPLAY` for clients.
    public var environment: [String: String] { ["DISPLAY": display] }
    /// The server's pid.
    public var pid: Int32 { process.pid }

    private init(displayNumber: Int, width: Int, height: Int, process: BackgroundProcess, logger: Logger) {
        self.displayNumber = displayNumber
        self.width = width
        self.height = height
        self.process = process
        self.logger = logger
    }

    /// Starts `Xvfb :N -screen 0 WxHx24 -nolisten tcp -noreset` on the first free N from
    /// `firstDisplayNumber` on (no `/tmp/.X11-unix/XN`, no `/tmp/.XN-lock`) and waits until
    /// `xdpyinfo` answers. Another display number is tried when the server does not come up.
    public static func start(width: Int = 1280, height: Int = 720, firstDisplayNumber: Int = 90,
                             logger: Logger = .harness) async throws -> XvfbServer {
        // One start at a time in this process: two tests starting at once both found :N free, and the
        // one whose Xvfb lost the race took the other's server for its own (xdpyinfo answered) until
        // the other test ended it.
        await startTurn.acquire()
        defer { startTurn.release() }
        return try await startOnFreeDisplay(width: width, height: height, firstDisplayNumber: firstDisplayNumber, logger: logger)
    }

    private static let startTurn = AsyncTurn()

    private static func startOnFreeDisplay(width: Int, height: Int, firstDisplayNumber: Int, logger: Logger) async throws -> XvfbServer {
        var number = firstDisplayNumber
        var failures: [String] = []
        while number < firstDisplayNumber + 200 && failures.count < 5 {
            defer { number += 1 }
            guard !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)"),
                  !FileManager.default.fileExists(atPath: "/tmp/.X\(number)-lock") else { continue }
            let process = try BackgroundProcess("Xvfb", arguments: [
                ":\(number)", "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp", "-noreset",
            ])
            let server = XvfbServer(displayNumber: number, width: width, height: height, process: process, logger: logger)
            // Ready, and it is our server that answers (an Xvfb that found the display taken exits).
            if await server.waitUntilReady(timeout: .seconds(10)), process.isRunning {
                logger.debug("Xvfb ready", metadata: ["display": "\(server.display)", "pid": "\(process.pid)"])
                return server
            }
            failures.append(":\(number): \(process.currentError.suffix(300))")
            await process.terminate(grace: .seconds(1))
        }
        throw HarnessError("Xvfb did not start on any free display:\n" + failures.joined(separator: "\n"))
    }

    private func waitUntilReady(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard process.isRunning else { return false }
            if let probe = try? await ProcessRunner.run("xdpyinfo", arguments: ["-display", display], timeout: .seconds(5)),
               probe.succeeded {
                return true
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// The whole screen as RGB pixels (the pointer left out), grabbed by `ffmpeg -f x11grab`.
    public func screenshot() async throws -> RGBImage {
        let result = try await ProcessRunner.run("ffmpeg", arguments: [
            "-nostdin", "-v", "error", "-f", "x11grab", "-draw_mouse", "0", "-video_size", "\(width)x\(height)",
            "-i", display, "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-",
        ], timeout: .seconds(20))
        guard result.succeeded, result.standardOutput.count == width * height * 3 else {
            throw HarnessError("screenshot of \(display) failed: \(result)")
        }
        return RGBImage(width: width, height: height, pixels: [UInt8](result.standardOutput))
    }

    /// Changes the screen's size (`xrandr --fb`, RandR; up to the size the server was started with)
    /// and returns the size the server says it has now (`xdpyinfo`'s "dimensions"), e.g. "640x360".
    /// xrandr complains that the output no longer fits, but the framebuffer does change size.
    @discardableResult
    public func resize(to size: String) async throws -> String {
        let xrandr = try ProcessRunner.resolve("xrandr", environment: environment)
        _ = try await ProcessRunner.run(xrandr, arguments: ["--fb", size], environment: environment, timeout: .seconds(10))
        let probe = try await ProcessRunner.run("xdpyinfo", arguments: [], environment: environment, timeout: .seconds(10))
        guard let line = probe.stdout.split(separator: "\n").first(where: { $0.contains("dimensions:") }),
              let now = line.split(separator: " ").first(where: { $0.contains("x") && $0.first?.isNumber == true }) else {
            throw HarnessError("xdpyinfo on \(display) gave no dimensions: \(probe.stdout.prefix(400))")
        }
        return String(now)
    }

    /// Stops the server (SIGTERM, then SIGKILL), waits for it and removes its lock and socket files.
    public func stop() async {
        await process.terminate(grace: .seconds(3))
        let lock = "/tmp/.X\(displayNumber)-lock"
        if let owner = (try? String(contentsOfFile: lock, encoding: .utf8)).flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
           owner == process.pid {
            try? FileManager.default.removeItem(atPath: lock)
            try? FileManager.default.removeItem(atPath: "/tmp/.X11-unix/X\(displayNumber)")
        }
        logger.debug("Xvfb stopped", metadata: ["display": "\(display)"])
    }
}

extension Logger {
    /// The harness's logger; its level comes from `ORK_TEST_LOG_LEVEL` (default `info`).
    public static var harness: Logger {
        var logger = Logger(label: "ReplayTesting")
        logger.logLevel = ProcessInfo.processInfo.environment["ORK_TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        return logger
    }
}

/// A turn that one task holds at a time, handed to the waiting tasks in order (not reentrant).
final class AsyncTurn: Sendable {
    private struct State {
        var held = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted: Bool = state.withLock { state in
                if state.held {
                    state.waiting.append(continuation)
                    return false
                }
                state.held = true
                return true
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next: CheckedContinuation<Void, Never>? = state.withLock { state in
            if state.waiting.isEmpty {
                state.held = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
