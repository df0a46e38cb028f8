import Foundation
import ReplayTesting
import Testing

/// Runs a command to completion; returns its status and outputs.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

extension CommandResult {
    /// A finished process's: a death by signal N is status 128 + N, as a shell says.
    init(_ result: ProcessResult) {
        self.init(status: result.terminatedBySignal ? 128 + result.status : result.status, stdout: result.stdout, stderr: result.stderr)
    }
}

/// The tests' children are started by ReplayTesting's `BackgroundProcess` (posix_spawn with default
/// signal handling, exit collected with waitpid), never Foundation's `Process`: its children inherit
/// the signals this process ignores (a SIGTERM then never ends them) and its `waitUntilExit` can wait
/// forever for an exit it missed, blocking a thread of the cooperative pool (a whole run hung so).
enum Command {
    /// The same as the synchronous `run`, waiting without holding a thread of the cooperative pool
    /// (two on this machine: tests that block them starve every test beside them).
    static func run(_ executable: String, _ arguments: [String], stdin: String? = nil, environment: [String: String]? = nil,
                    workingDirectory: URL? = nil, timeout: Double = 60) async throws -> CommandResult {
        let (process, inputFile) = try start(executable, arguments, stdin: stdin, environment: environment, workingDirectory: workingDirectory)
        defer { if let inputFile { try? FileManager.default.removeItem(at: inputFile) } }
        let result: ProcessResult
        do {
            result = try await process.waitForExit(timeout: .milliseconds(Int(timeout * 1000)))
        } catch {
            guard let ended = await process.terminate(grace: .seconds(2)) else { throw TestFailure("`\(executable)` did not end, even killed") }
            result = ended
        }
        return CommandResult(result)
    }

    static func run(_ executable: String, _ arguments: [String], stdin: String? = nil, environment: [String: String]? = nil,
                    workingDirectory: URL? = nil, timeout: Double = 60) throws -> CommandResult {
        let (process, inputFile) = try start(executable, arguments, stdin: stdin, environment: environment, workingDirectory: workingDirectory)
        defer { if let inputFile { try? FileManager.default.removeItem(at: inputFile) } }
        guard let result = process.blockingWait(timeout: timeout) ?? process.blockingTerminate(grace: 2) else {
            throw TestFailure("`\(executable)` did not end, even killed")
        }
        return CommandResult(result)
    }

    /// Starts `executable`, its standard input from a 0600 file holding `stdin` (returned, to remove) or /dev/null.
    private static func start(_ executable: String, _ arguments: [String], stdin: String?, environment: [String: String]?,
                              workingDirectory: URL?) throws -> (BackgroundProcess, URL?) {
        var input = "/dev/null"
        var inputFile: URL?
        if let stdin {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("ork-stdin-\(UUID().uuidString)")
            guard FileManager.default.createFile(atPath: file.path, contents: Data(stdin.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw TestFailure("cannot write \(file.path)")
            }
            input = file.path
            inputFile = file
        }
        do {
            let process = try BackgroundProcess(executable, arguments: arguments,
                                                environment: environment.map { ProcessInfo.processInfo.environment.merging($0) { $1 } },
                                                workingDirectory: workingDirectory?.path, standardInput: input)
            return (process, inputFile)
        } catch {
            if let inputFile { try? FileManager.default.removeItem(at: inputFile) }
            throw error
        }
    }
}

/// The `broadcast-service` binary running on loopback with a database in a temporary folder.
final class ServiceProcess {
    let directory: URL
    let process: BackgroundProcess
    private(set) var httpPort = 0
    private(set) var rtmpPort = 0

    let databaseArgument: String
    var baseURL: String { "http://127.0.0.1:\(httpPort)" }
    var rtmpBase: String { "rtmp://127.0.0.1:\(rtmpPort)/live" }
    var log: String { process.currentError }

    /// The built binary: `$ORK_BIN_DIR/broadcast-service`, else beside the test bundle.
    static var binary: String {
        // Absolute even when ORK_BIN_DIR is relative: some tests run it from another working directory.
        if let dir = ProcessInfo.processInfo.environment["ORK_BIN_DIR"] {
            return URL(fileURLWithPath: dir).absoluteURL.appendingPathComponent("broadcast-service").path
        }
        let bundle = Bundle.main.bundleURL.deletingLastPathComponent()
        let candidates = [bundle.appendingPathComponent("broadcast-service"),
                          URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("broadcast-service")]
        return (candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]).path
    }

    static func makeDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ork-service-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Starts the service and waits for its ready line.
    init(directory: URL, arguments: [String] = [], database: String? = nil) throws {
        self.directory = directory
        self.databaseArgument = database ?? directory.appendingPathComponent("service.sqlite").path
        process = try BackgroundProcess(Self.binary, arguments: ["--host", "127.0.0.1", "--port", "0", "--rtmp-port", "0",
                                                                 "--database", databaseArgument, "--bcrypt-cost", "6", "--log-level", "debug"] + arguments,
                                        environment: ProcessInfo.processInfo.environment.merging(["XDG_DATA_HOME": directory.path]) { $1 })
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let line = process.currentOutput.split(separator: "\n").first(where: { $0.hasPrefix("ready ") }) {
                for part in line.split(separator: " ") {
                    if part.hasPrefix("http=") { httpPort = Int(part.dropFirst(5)) ?? 0 }
                    if part.hasPrefix("rtmp=") { rtmpPort = Int(part.dropFirst(5)) ?? 0 }
                }
                return
            }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        stop()
        throw TestFailure("broadcast-service did not become ready:\n\(log)")
    }

    /// Secrets this test made (stream keys, passwords): none may appear in the service's log.
    private(set) var secrets: [String] = []
    func addSecret(_ secret: String) { secrets.append(secret) }

    /// SIGTERM, then SIGKILL after 10 s. Then checks the log for every secret this service was given, and
    /// for any whole stream key at all (those made on `/account` or by the API too): every test of the
    /// suite stops its service through here, so this greps the logs of the whole suite.
    func stop() {
        defer {
            let log = self.log
            for secret in secrets where log.contains(secret) {
                Issue.record("the service logged a secret (\(secret.prefix(8))…)")
            }
            if let key = log.firstMatch(of: /live_[0-9a-fA-F]{32}/) {
                Issue.record("the service logged a stream key (\(key.output.prefix(9))…)")
            }
        }
        process.blockingTerminate(grace: 10)
    }

    /// Runs the binary's administration commands on this service's database.
    func admin(_ arguments: [String], stdin: String? = nil) throws -> CommandResult {
        let result = try Command.run(Self.binary, arguments + ["--database", databaseArgument], stdin: stdin,
                                     environment: ["XDG_DATA_HOME": directory.path])
        if arguments.starts(with: ["key", "create"]) {
            let key = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            if !key.isEmpty { secrets.append(key) }
        }
        if let stdin, arguments.starts(with: ["user", "create"]) { secrets.append(stdin.trimmingCharacters(in: .newlines)) }
        return result
    }

    /// Waits until the log contains `text` (sleeping between looks: the test process's cooperative
    /// threads, two on this machine, stay free for the tests beside it).
    func waitForLog(_ text: String, timeout: Double = 10) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < deadline {
            if log.contains(text) { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return log.contains(text)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// ffmpeg publishing a test pattern and a tone over RTMP.
final class FFmpegPublisher {
    let process: BackgroundProcess

    init(url: String, seconds: Int, size: String = "320x240", directory: URL) throws {
        process = try BackgroundProcess("/usr/bin/ffmpeg", arguments: [
            "-hide_banner", "-loglevel", "warning", "-nostdin", "-re",
            "-f", "lavfi", "-i", "testsrc=size=\(size):rate=30", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-pix_fmt", "yuv420p", "-g", "30",
            "-c:a", "aac", "-b:a", "64k", "-t", "\(seconds)", "-f", "flv", url])
    }

    var log: String { process.currentError }

    /// Waits for it to end (stopping it after `timeout`); its exit status (128 + the signal when killed).
    func wait(timeout: Double = 60) -> Int32 {
        guard let result = process.blockingWait(timeout: timeout) ?? stop() else { return -1 }
        return result.terminatedBySignal ? 128 + result.status : result.status
    }

    /// SIGINT (ffmpeg then closes its stream), SIGKILL after 5 s.
    @discardableResult
    func stop() -> ProcessResult? { process.blockingTerminate(signal: SIGINT, grace: 5) }
}

/// A small HTTP client over curl with a cookie jar (a browser's session for form flows).
struct CurlSession {
    let jar: URL
    /// The source address of the requests (any 127.x address stands for another client).
    let interface: String?

    init(directory: URL, interface: String? = nil) {
        jar = directory.appendingPathComponent("cookies-\(UUID().uuidString).txt")
        self.interface = interface
    }

    struct Response {
        var status: Int
        var body: String
        var headers: String
    }

    func request(_ method: String, _ url: String, form: [String: String]? = nil, json: String? = nil,
                 headers: [String: String] = [:]) throws -> Response {
        let directory = FileManager.default.temporaryDirectory
        let bodyURL = directory.appendingPathComponent("curl-body-\(UUID().uuidString)")
        let headerURL = directory.appendingPathComponent("curl-head-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: bodyURL); try? FileManager.default.removeItem(at: headerURL) }
        var arguments = ["-s", "-X", method, "-o", bodyURL.path, "-D", headerURL.path, "-w", "%{http_code}", "-c", jar.path, "-b", jar.path]
        if let interface { arguments += ["--interface", interface] }
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        if let form { for (k, v) in form.sorted(by: { $0.key < $1.key }) { arguments += ["--data-urlencode", "\(k)=\(v)"] } }
        if let json { arguments += ["-H", "Content-Type: application/json", "--data-binary", json] }
        arguments.append(url)
        let result = try Command.run("/usr/bin/curl", arguments, timeout: 30)
        let response = Response(status: Int(result.stdout) ?? 0,
                                body: (try? String(contentsOf: bodyURL, encoding: .utf8)) ?? "",
                                headers: (try? String(contentsOf: headerURL, encoding: .utf8)) ?? "")
        if let token = response.body.firstMatch(of: /(?:name="csrf" value|data-csrf)="([0-9a-f]+)"/)?.1 {
            try? String(token).write(to: csrfURL, atomically: true, encoding: .utf8)
        }
        return response
    }

    private var csrfURL: URL { jar.appendingPathExtension("csrf") }

    /// The CSRF token of the last page that carried one (the server binds it to this browser's session).
    var csrf: String? { try? String(contentsOf: csrfURL, encoding: .utf8) }

    /// A cookie's value in this session's jar.
    func cookie(_ name: String) -> String? {
        guard let text = try? String(contentsOf: jar, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            if fields.count == 7, fields[5] == name { return String(fields[6]) }
        }
        return nil
    }
}
