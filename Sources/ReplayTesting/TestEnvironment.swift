public import Foundation
public import Logging
import Synchronization

/// Everything a system test of `replay` needs, private to that test: an Xvfb display with the test
/// content on it, a PulseAudio server, and a private `XDG_RUNTIME_DIR` (mode 0700) and `HOME`, so
/// that the `replayd` that `replay` starts on demand is this test's own.
///
/// Use ``with(_:logger:_:)``: it tears everything down however the body ends.
public final class TestEnvironment: Sendable {
    /// How the sound server is set up.
    public enum Audio: Sendable {
        /// A private PulseAudio (null sink `main`, sine-source `mic` at 3000 Hz).
        case pulseAudio
        /// `PULSE_SERVER` points at a socket nobody listens on.
        case deadServer
    }

    public struct Configuration: Sendable {
        public var width: Int
        public var height: Int
        public var audio: Audio
        /// The test content to run; nil for an empty screen.
        public var content: TestContent.Options?

        public init(width: Int = 1280, height: Int = 720, audio: Audio = .pulseAudio,
                    content: TestContent.Options? = TestContent.Options()) {
            self.width = width
            self.height = height
            self.audio = audio
            self.content = content
        }
    }

    public let xvfb: XvfbServer
    public let pulse: PulseAudioServer?
    public let content: TestContent?
    /// The test's own folder; everything below is removed at tear-down.
    public let directory: URL
    public let runtimeDirectory: URL

    /// What replayd has logged so far (`openreplaykit/replayd.log` in the runtime folder), "" before it has.
    public var replaydLog: String {
        (try? String(contentsOf: runtimeDirectory.appendingPathComponent("openreplaykit/replayd.log"), encoding: .utf8)) ?? ""
    }
    public let homeDirectory: URL
    /// A folder for recordings (also `XDG_VIDEOS_DIR`).
    public let outputDirectory: URL
    /// The environment `replay` runs with: `DISPLAY`, `XDG_RUNTIME_DIR`, `HOME`, `XDG_VIDEOS_DIR`
    /// and the PulseAudio client variables, over ours without any other display or session's.
    public let environment: [String: String]
    private let logger: Logger
    private let started = Mutex<[BackgroundProcess]>([])

    private init(xvfb: XvfbServer, pulse: PulseAudioServer?, content: TestContent?, directory: URL,
                 environment: [String: String], logger: Logger) {
        self.xvfb = xvfb
        self.pulse = pulse
        self.content = content
        self.directory = directory
        self.runtimeDirectory = directory.appendingPathComponent("runtime")
        self.homeDirectory = directory.appendingPathComponent("home")
        self.outputDirectory = directory.appendingPathComponent("home/Videos")
        self.environment = environment
        self.logger = logger
    }

    /// The screen's pattern.
    public var pattern: TestPattern { TestPattern(width: xvfb.width, height: xvfb.height) }

    /// Starts everything; on failure what was started is stopped again.
    public static func start(_ configuration: Configuration = Configuration(), logger: Logger = .harness) async throws -> TestEnvironment {
        let directory = try makeTemporaryDirectory(prefix: "ork-system")
        let runtime = directory.appendingPathComponent("runtime")
        let home = directory.appendingPathComponent("home")
        let videos = home.appendingPathComponent("Videos")
        var xvfb: XvfbServer?
        var pulse: PulseAudioServer?
        do {
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try FileManager.default.createDirectory(at: videos, withIntermediateDirectories: true)
            xvfb = try await XvfbServer.start(width: configuration.width, height: configuration.height, logger: logger)
            let pulseEnvironment: [String: String]
            switch configuration.audio {
            case .pulseAudio:
                pulse = try await PulseAudioServer.start(logger: logger)
                pulseEnvironment = pulse!.clientEnvironment
            case .deadServer:
                pulseEnvironment = PulseAudioServer.deadServerEnvironment(in: directory)
            }
            var environment = ProcessInfo.processInfo.environment.filter { key, _ in
                !(key.hasPrefix("XDG_") || key.hasPrefix("PULSE_") || ["DISPLAY", "WAYLAND_DISPLAY", "HOME", "TERM",
                  "DBUS_SESSION_BUS_ADDRESS", "ORK_BIN_DIR"].contains(key))
            }
            environment.merge(pulseEnvironment) { $1 }
            environment["DISPLAY"] = xvfb!.display
            environment["XDG_RUNTIME_DIR"] = runtime.path
            environment["HOME"] = home.path
            environment["XDG_VIDEOS_DIR"] = videos.path
            var content: TestContent?
            if var options = configuration.content {
                if case .deadServer = configuration.audio { options.audio = false }
                content = try await TestContent.start(on: xvfb!, pulseEnvironment: pulse?.clientEnvironment, options: options, logger: logger)
            }
            return TestEnvironment(xvfb: xvfb!, pulse: pulse, content: content, directory: directory,
                                   environment: environment, logger: logger)
        } catch {
            await pulse?.stop()
            await xvfb?.stop()
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Starts an environment, runs `body` with it and tears it down, also when `body` throws.
    public static func with<T: Sendable>(_ configuration: Configuration = Configuration(), logger: Logger = .harness,
                                         _ body: (TestEnvironment) async throws -> T) async throws -> T {
        let environment = try await start(configuration, logger: logger)
        do {
            let result = try await body(environment)
            await environment.tearDown()
            return result
        } catch {
            await environment.tearDown()
            throw error
        }
    }

    /// A path in the output folder.
    public func outputPath(_ name: String) -> String { outputDirectory.appendingPathComponent(name).path }

    /// `environment` with `overrides` applied (a nil value removes the variable).
    public func environment(with overrides: [String: String?]) -> [String: String] {
        var result = environment
        for (key, value) in overrides { result[key] = value }
        return result
    }

    /// Runs the built `replay` with `arguments` to completion.
    public func replay(_ arguments: [String], environment overrides: [String: String?] = [:],
                       timeout: Duration = .seconds(60)) async throws -> ProcessResult {
        let process = try startReplay(arguments, environment: overrides)
        do {
            return try await process.waitForExit(timeout: timeout)
        } catch {
            await process.terminate(grace: .seconds(2))
            // A command that did not come back (a `replay stop` that hung once in a full run, with
            // nothing on its stderr): what replayd said, and where its threads were.
            throw HarnessError("\(error)\nreplayd's log (end): \(replaydLog.suffix(3000))\nreplayd's threads: \(await replaydThreads())")
        }
    }

    /// replayd's threads' stacks (`gdb -batch`, when gdb is there), for a command that hung.
    public func replaydThreads() async -> String {
        guard let pid = replaydPID(), FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") else { return "(no replayd or no gdb)" }
        let result = try? await ProcessRunner.run("/usr/bin/gdb", arguments: ["-p", "\(pid)", "-batch", "-ex", "thread apply all bt 15"],
                                                  timeout: .seconds(30))
        return String((result?.stdout ?? "").split(separator: "\n").filter { $0.hasPrefix("Thread") || $0.hasPrefix("#") }
            .joined(separator: "\n").suffix(8000))
    }

    /// Starts the built `replay` in the background (stopped at tear-down if still running).
    public func startReplay(_ arguments: [String], environment overrides: [String: String?] = [:],
                            standardInput: String = "/dev/null") throws -> BackgroundProcess {
        let process = try BackgroundProcess(try Binaries.replay(), arguments: arguments,
                                            environment: environment(with: overrides),
                                            workingDirectory: directory.path, standardInput: standardInput)
        started.withLock { $0.append(process) }
        logger.debug("replay started", metadata: ["arguments": "\(arguments)", "pid": "\(process.pid)"])
        return process
    }

    /// `$XDG_RUNTIME_DIR/openreplaykit/replayd.pid`.
    public var replaydPIDFile: URL { runtimeDirectory.appendingPathComponent("openreplaykit/replayd.pid") }
    /// `$XDG_RUNTIME_DIR/openreplaykit/replayd.sock`.
    public var replaydSocket: URL { runtimeDirectory.appendingPathComponent("openreplaykit/replayd.sock") }

    /// The pid of this environment's `replayd`: from its pid file, else the live process named
    /// `replayd` whose environment has this `XDG_RUNTIME_DIR`.
    public func replaydPID() -> Int32? {
        if let text = try? String(contentsOf: replaydPIDFile, encoding: .utf8),
           let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), ProcessTable.isAlive(pid) {
            return pid
        }
        let mine = Set(ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: runtimeDirectory.path))
        return ProcessTable.pids(named: "replayd").first { mine.contains($0) }
    }

    /// Processes still running with this environment's `XDG_RUNTIME_DIR` (replay, replayd, …).
    public func leftoverProcesses() -> [Int32] {
        ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: runtimeDirectory.path)
    }

    /// Stops everything: `replay` processes, this environment's `replayd` (pid file and any process
    /// with this `XDG_RUNTIME_DIR`), the test content, PulseAudio and Xvfb; removes the folder.
    /// With `ORK_KEEP_RECORDINGS=DIR` the recordings (and replayd's log) are moved to a folder in DIR
    /// first.
    public func tearDown() async {
        for process in started.withLock({ $0 }) { await process.terminate(grace: .seconds(2)) }
        var pids = leftoverProcesses()
        if let daemon = replaydPID(), !pids.contains(daemon) { pids.append(daemon) }
        if !pids.isEmpty {
            logger.debug("stopping leftover processes", metadata: ["pids": "\(pids)"])
            await ProcessTable.terminate(pids, grace: .seconds(3))
        }
        await content?.stop()
        await pulse?.stop()
        await xvfb.stop()
        if let keep = ProcessInfo.processInfo.environment["ORK_KEEP_RECORDINGS"], !keep.isEmpty,
           let recordings = try? FileManager.default.contentsOfDirectory(atPath: outputDirectory.path), !recordings.isEmpty {
            // replayd's log goes with them: what it said about the recordings.
            try? FileManager.default.copyItem(atPath: runtimeDirectory.appendingPathComponent("openreplaykit/replayd.log").path,
                                              toPath: outputDirectory.appendingPathComponent("replayd.log").path)
            let kept = URL(fileURLWithPath: keep).appendingPathComponent(directory.lastPathComponent)
            try? FileManager.default.createDirectory(at: kept.deletingLastPathComponent(), withIntermediateDirectories: true)
            try? FileManager.default.moveItem(at: outputDirectory, to: kept)
            logger.info("recordings kept", metadata: ["folder": "\(kept.path)"])
        }
        try? FileManager.default.removeItem(at: directory)
    }
}
