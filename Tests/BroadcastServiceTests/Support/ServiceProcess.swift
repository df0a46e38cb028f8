import Foundation
import Testing

/// Runs a command to completion; returns its status and outputs.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

enum Command {
    static func run(_ executable: String, _ arguments: [String], stdin: String? = nil, environment: [String: String]? = nil,
                    timeout: Double = 60) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
        process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ork-cmd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("out"), err = directory.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        let input = Pipe()
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        if let stdin {
            input.fileHandleForWriting.write(Data(stdin.utf8))
            try input.fileHandleForWriting.close()
        }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return CommandResult(status: process.terminationStatus,
                             stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                             stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }
}

/// The `broadcast-service` binary running on loopback with a database in a temporary folder.
final class ServiceProcess {
    let directory: URL
    let process = Process()
    private(set) var httpPort = 0
    private(set) var rtmpPort = 0
    let stdoutURL: URL
    let stderrURL: URL

    let databaseArgument: String
    var baseURL: String { "http://127.0.0.1:\(httpPort)" }
    var rtmpBase: String { "rtmp://127.0.0.1:\(rtmpPort)/live" }
    var log: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// The built binary: `$ORK_BIN_DIR/broadcast-service`, else beside the test bundle.
    static var binary: String {
        if let dir = ProcessInfo.processInfo.environment["ORK_BIN_DIR"] { return dir + "/broadcast-service" }
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
        stdoutURL = directory.appendingPathComponent("stdout-\(UUID().uuidString).log")
        stderrURL = directory.appendingPathComponent("stderr-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: Self.binary)
        self.databaseArgument = database ?? directory.appendingPathComponent("service.sqlite").path
        process.arguments = ["--host", "127.0.0.1", "--port", "0", "--rtmp-port", "0", "--database", databaseArgument,
                             "--bcrypt-cost", "6", "--log-level", "debug"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(["XDG_DATA_HOME": directory.path]) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let out = (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? ""
            if let line = out.split(separator: "\n").first(where: { $0.hasPrefix("ready ") }) {
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
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
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

    /// Waits until the log contains `text`.
    func waitForLog(_ text: String, timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if log.contains(text) { return true }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return false
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// ffmpeg publishing a test pattern and a tone over RTMP.
final class FFmpegPublisher {
    let process = Process()
    let logURL: URL

    init(url: String, seconds: Int, size: String = "320x240", directory: URL) throws {
        logURL = directory.appendingPathComponent("ffmpeg-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        process.arguments = ["-hide_banner", "-loglevel", "warning", "-nostdin", "-re",
                             "-f", "lavfi", "-i", "testsrc=size=\(size):rate=30", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                             "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-pix_fmt", "yuv420p", "-g", "30",
                             "-c:a", "aac", "-b:a", "64k", "-t", "\(seconds)", "-f", "flv", url]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: logURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    func wait(timeout: Double = 60) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        stop()
        return process.terminationStatus
    }

    func stop() {
        if process.isRunning {
            process.interrupt()
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
    }
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
