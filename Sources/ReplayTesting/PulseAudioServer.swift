public import Foundation
public import Logging

/// A private PulseAudio server for one test: a null sink `main` (the default sink: what the
/// computer "plays") and a `module-sine-source` `mic` at 3000 Hz (the default source: the
/// "microphone", paced by a clock). It lives in its own temporary folder and touches nothing else.
public final class PulseAudioServer: Sendable {
    /// The folder holding the socket, the cookie, the server's home and its log.
    public let directory: URL
    public let microphoneFrequency: Int
    private let process: BackgroundProcess
    private let logger: Logger

    /// The server's native socket.
    public var socketPath: String { directory.appendingPathComponent("native").path }

    /// What a client needs to use this server and nothing else: `PULSE_SERVER`, `PULSE_COOKIE`,
    /// `PULSE_CLIENTCONFIG` (autospawn off) and a `HOME` in the temporary folder.
    public var clientEnvironment: [String: String] {
        Self.clientEnvironment(server: "unix:\(socketPath)", directory: directory)
    }

    /// Client variables for a server that is not there (a socket nobody listens on), for the
    /// "no PulseAudio" cases. Files go in `directory`.
    public static func deadServerEnvironment(in directory: URL) -> [String: String] {
        clientEnvironment(server: "unix:\(directory.appendingPathComponent("no-pulseaudio-here").path)", directory: directory)
    }

    private static func clientEnvironment(server: String, directory: URL) -> [String: String] {
        let config = directory.appendingPathComponent("client.conf")
        if !FileManager.default.fileExists(atPath: config.path) {
            _ = FileManager.default.createFile(atPath: config.path, contents: Data("autospawn = no\n".utf8))
        }
        return [
            "PULSE_SERVER": server,
            "PULSE_COOKIE": directory.appendingPathComponent("cookie").path,
            "PULSE_CLIENTCONFIG": config.path,
            "HOME": directory.appendingPathComponent("client-home").path,
        ]
    }

    private init(directory: URL, microphoneFrequency: Int, process: BackgroundProcess, logger: Logger) {
        self.directory = directory
        self.microphoneFrequency = microphoneFrequency
        self.process = process
        self.logger = logger
    }

    /// Starts the server and waits until `pactl info` answers; sets `main` and `mic` as defaults.
    public static func start(microphoneFrequency: Int = 3000, logger: Logger = .harness) async throws -> PulseAudioServer {
        let directory = try makeTemporaryDirectory(prefix: "ork-pulse")
        let home = directory.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("client-home"), withIntermediateDirectories: true)
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = nil
        environment["PULSE_SERVER"] = nil
        environment["HOME"] = home.path
        environment["PULSE_RUNTIME_PATH"] = directory.path
        environment["XDG_RUNTIME_DIR"] = directory.path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
        let socket = directory.appendingPathComponent("native").path
        let process: BackgroundProcess
        do {
            process = try BackgroundProcess("pulseaudio", arguments: [
                "-n", "--daemonize=no", "--exit-idle-time=-1", "--system=no", "--use-pid-file=no", "--disable-shm=yes",
                "-L", "module-native-protocol-unix auth-anonymous=1 socket=\(socket)",
                "-L", "module-null-sink sink_name=main rate=48000",
                "-L", "module-sine-source source_name=mic frequency=\(microphoneFrequency) rate=48000",
            ], environment: environment)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        let server = PulseAudioServer(directory: directory, microphoneFrequency: microphoneFrequency, process: process, logger: logger)
        do {
            try await server.waitUntilReady(timeout: .seconds(10))
            for (command, name) in [("set-default-sink", "main"), ("set-default-source", "mic")] {
                let result = try await server.pactl([command, name])
                guard result.succeeded else { throw HarnessError("pactl \(command) \(name) failed: \(result)") }
            }
        } catch {
            await server.stop()
            throw error
        }
        logger.debug("PulseAudio ready", metadata: ["socket": "\(socket)", "pid": "\(process.pid)"])
        return server
    }

    /// Runs `pactl` against this server.
    public func pactl(_ arguments: [String]) async throws -> ProcessResult {
        var environment = ProcessInfo.processInfo.environment
        environment.merge(clientEnvironment) { $1 }
        return try await ProcessRunner.run("pactl", arguments: arguments, environment: environment, timeout: .seconds(10))
    }

    private func waitUntilReady(timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        var last = ""
        while ContinuousClock.now < deadline {
            guard process.isRunning else {
                throw HarnessError("pulseaudio exited at start:\n\(process.currentError.suffix(2000))")
            }
            do {
                let info = try await pactl(["info"])
                if info.succeeded { return }
                last = info.description
            } catch {
                last = "\(error)"
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        throw HarnessError("pulseaudio did not answer `pactl info` within \(timeout): \(last)\npulseaudio said:\n\(process.currentError.suffix(2000))")
    }

    /// Stops the server, waits for it and removes its folder.
    public func stop() async {
        await process.terminate(grace: .seconds(3))
        try? FileManager.default.removeItem(at: directory)
        logger.debug("PulseAudio stopped")
    }
}
