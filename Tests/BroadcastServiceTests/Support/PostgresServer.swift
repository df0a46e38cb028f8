import Foundation
import ReplayTesting

/// A throwaway PostgreSQL server on loopback, run as the `postgres` user with trust authentication.
final class PostgresServer {
    static let bin = "/usr/lib/postgresql/15/bin"
    static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: bin + "/postgres") && getuid() == 0
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && getpwnam("postgres") != nil
    }

    private(set) var process: BackgroundProcess
    let dataDirectory: URL
    let port: Int
    var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }

    init(directory: URL) throws {
        dataDirectory = directory.appendingPathComponent("pgdata")
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        guard let user = getpwnam("postgres") else { throw TestFailure("no postgres user") }
        chown(dataDirectory.path, user.pointee.pw_uid, user.pointee.pw_gid)
        chmod(dataDirectory.path, 0o700)
        chmod(directory.path, 0o755)
        let asPostgres = ["--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
        let initdb = try Command.run("/usr/bin/setpriv", asPostgres + [Self.bin + "/initdb", "-D", dataDirectory.path, "-A", "trust", "-U", "postgres",
                                                                        "--no-sync"], timeout: 120)
        guard initdb.status == 0 else { throw TestFailure("initdb failed: \(initdb.stderr)") }
        port = Int.random(in: 20000...40000)
        process = try Self.start(dataDirectory: dataDirectory, port: port)
        try waitUntilReady()
    }

    private static func start(dataDirectory: URL, port: Int) throws -> BackgroundProcess {
        try BackgroundProcess("/usr/bin/setpriv", arguments: ["--reuid=postgres", "--regid=postgres", "--init-groups", "--",
                                                             bin + "/postgres", "-D", dataDirectory.path, "-p", "\(port)",
                                                             "-h", "127.0.0.1", "-k", dataDirectory.path, "-c", "fsync=off"])
    }

    private func waitUntilReady() throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if try Command.run("/usr/bin/pg_isready", ["-h", "127.0.0.1", "-p", "\(port)"]).status == 0 { return }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        stop()
        throw TestFailure("PostgreSQL did not start")
    }

    /// Stops the server (every client's connection is cut) and starts it again on the same port and data.
    func restart() throws {
        stop()
        process = try Self.start(dataDirectory: dataDirectory, port: port)
        try waitUntilReady()
    }

    /// Fast shutdown (SIGINT), then SIGKILL.
    func stop() {
        process.blockingTerminate(signal: SIGINT, grace: 10)
    }
}
