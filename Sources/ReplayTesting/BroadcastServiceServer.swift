public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The reference `broadcast-service` on loopback (ports chosen by the system), with an SQLite
/// database in a temporary folder: the ingest and viewer pages the system broadcast tests send to.
/// Cheap password hashes (bcrypt cost 6) keep sign-ins fast. `stop()` ends it and removes the folder.
public final class BroadcastServiceServer: Sendable {
    public let directory: URL
    public let httpPort: Int
    public let rtmpPort: Int
    let process: BackgroundProcess

    public var baseURL: String { "http://127.0.0.1:\(httpPort)" }
    /// What it wrote to stderr (its log).
    public var log: String { process.currentError }

    private init(directory: URL, process: BackgroundProcess, httpPort: Int, rtmpPort: Int) {
        self.directory = directory
        self.process = process
        self.httpPort = httpPort
        self.rtmpPort = rtmpPort
    }

    private var database: String { directory.appendingPathComponent("service.sqlite").path }

    /// Starts it and waits for its `ready http=… rtmp=…` line.
    public static func start() async throws -> BroadcastServiceServer {
        let directory = try makeTemporaryDirectory(prefix: "ork-service")
        let process: BackgroundProcess
        do {
            process = try BackgroundProcess(try Binaries.path("broadcast-service"), arguments: [
                "--host", "127.0.0.1", "--port", "0", "--rtmp-port", "0", "--database", directory.appendingPathComponent("service.sqlite").path,
                "--bcrypt-cost", "6"], environment: ProcessInfo.processInfo.environment.merging(["XDG_DATA_HOME": directory.path]) { $1 })
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, process.isRunning {
            if let line = process.currentOutput.split(separator: "\n").first(where: { $0.hasPrefix("ready ") }) {
                var http = 0, rtmp = 0
                for part in line.split(separator: " ") {
                    if part.hasPrefix("http=") { http = Int(part.dropFirst(5)) ?? 0 }
                    if part.hasPrefix("rtmp=") { rtmp = Int(part.dropFirst(5)) ?? 0 }
                }
                return BroadcastServiceServer(directory: directory, process: process, httpPort: http, rtmpPort: rtmp)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let log = process.currentError
        await process.terminate()
        try? FileManager.default.removeItem(at: directory)
        throw HarnessError("broadcast-service did not become ready:\n\(log.suffix(2000))")
    }

    /// Creates an account (`broadcast-service user create`, the password on standard input).
    public func createUser(_ name: String, password: String) async throws {
        let result = try await ProcessRunner.run("/bin/sh", arguments: ["-c", #"printf '%s\n' "$ORK_PASSWORD" | "$0" user create "$1" --database "$2""#,
                                                                        try Binaries.path("broadcast-service"), name, database],
                                                 environment: ProcessInfo.processInfo.environment.merging(["ORK_PASSWORD": password, "XDG_DATA_HOME": directory.path]) { $1 },
                                                 timeout: .seconds(30))
        guard result.succeeded else { throw HarnessError("cannot create the account \(name): \(result)") }
    }

    /// `GET path` as JSON (an object).
    public func json(_ path: String) async throws -> [String: Any] {
        let result = try await ProcessRunner.run("/usr/bin/curl", arguments: ["-fsS", baseURL + path], timeout: .seconds(20))
        guard result.succeeded, let object = try JSONSerialization.jsonObject(with: result.standardOutput) as? [String: Any] else {
            throw HarnessError("GET \(path): \(result)")
        }
        return object
    }

    public func stop() async {
        await process.terminate(grace: .seconds(10))
        try? FileManager.default.removeItem(at: directory)
    }
}
