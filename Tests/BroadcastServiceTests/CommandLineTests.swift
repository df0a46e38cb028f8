import Foundation
import Testing

/// The `broadcast-service` command line, run as a user would.
@Suite("broadcast-service command line")
struct CommandLineTests {
    @Test func helpAndValidation() throws {
        let help = try Command.run(ServiceProcess.binary, ["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("user") && help.stdout.contains("key") && help.stdout.contains("app"))
        let serveHelp = try Command.run(ServiceProcess.binary, ["serve", "--help"])
        #expect(serveHelp.stdout.contains("--rtmp-port") && serveHelp.stdout.contains("--database") && serveHelp.stdout.contains("--relay"))
        #expect(serveHelp.stdout.contains("--http-header-timeout") && serveHelp.stdout.contains("--http-idle-timeout")
                && serveHelp.stdout.contains("--max-request-body") && serveHelp.stdout.contains("--max-connections-per-address"))
        let badPort = try Command.run(ServiceProcess.binary, ["--port", "70000"])
        #expect(badPort.status != 0 && badPort.stderr.contains("Ports are 0–65535"))
        let badRelay = try Command.run(ServiceProcess.binary, ["--relay", "http://example.com"])
        #expect(badRelay.status != 0 && badRelay.stderr.contains("rtmp://"))
    }

    @Test func administration() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("nested/service.sqlite").path
        func run(_ arguments: [String], stdin: String? = nil) throws -> CommandResult {
            try Command.run(ServiceProcess.binary, arguments + ["--database", database], stdin: stdin)
        }
        #expect(try run(["user", "create", "hank"]).status != 0, "no password on standard input")
        #expect(try run(["user", "create", "hank"], stdin: "short\n").stderr.contains("8 characters to 72 bytes"))
        #expect(try run(["user", "create", "x"], stdin: "long-enough-password\n").stderr.contains("3 to 32"))
        #expect(try run(["user", "create", "hank"], stdin: "long-enough-password\n").status == 0)
        // Password hashes and keys: the folder the service made is its user's alone, the file too.
        var info = stat()
        #expect(stat(database, &info) == 0 && info.st_mode & 0o777 == 0o600, "database mode \(String(info.st_mode & 0o777, radix: 8))")
        #expect(stat((database as NSString).deletingLastPathComponent, &info) == 0 && info.st_mode & 0o777 == 0o700,
                "folder mode \(String(info.st_mode & 0o777, radix: 8))")
        #expect(try run(["user", "create", "HANK"], stdin: "long-enough-password\n").stderr.contains("taken"))
        #expect(try run(["key", "create", "nobody"]).stderr.contains("No account named nobody"))
        let key = try run(["key", "create", "hank", "--label", "obs"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(key.hasPrefix("live_"))
        #expect(try run(["key", "revoke", key]).status == 0)
        #expect(try run(["key", "revoke", key]).status != 0, "already revoked")
        // A bare file name is a file in the working directory.
        let bare = try Command.run(ServiceProcess.binary, ["key", "create", "nobody", "--database", "bare.sqlite"], workingDirectory: directory)
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("bare.sqlite").path),
                "exit \(bare.status): \(bare.stderr.suffix(1000)); the folder holds \((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])")
        // The default database lives under $XDG_DATA_HOME.
        let xdg = try Command.run(ServiceProcess.binary, ["user", "create", "ivy"], stdin: "long-enough-password\n",
                                  environment: ["XDG_DATA_HOME": directory.path])
        #expect(xdg.status == 0, "\(xdg.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("openreplaykit/service/service.sqlite").path))
    }

    @Test func behindAnHTTPSProxy() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory, arguments: ["--behind-https"])
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "joe"], stdin: "joe-password-12\n").status == 0)
        let key = try service.admin(["key", "create", "joe"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let session = CurlSession(directory: directory)
        let created = ServiceSystemTests.json(try session.request("POST", service.baseURL + "/api/v1/broadcasts", json: #"{"title":"tls"}"#,
                                                                  headers: ["Authorization": "Bearer \(key)", "Host": "live.example"]).body)
        #expect((created["pageURL"] as? String)?.hasPrefix("https://live.example/b/") == true)
        #expect((created["webSocketURL"] as? String)?.hasPrefix("wss://live.example/b/") == true)
        #expect(try session.request("GET", service.baseURL + "/signup").headers.contains("Secure"))
    }
}
