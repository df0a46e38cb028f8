import Testing
import Foundation
import Logging
import ServiceLifecycle
@testable import ReplayIPC
import ReplaySystem
@testable import ReplayDaemon

/// replayd's socket server in-process, spoken to by the same client the CLI uses.
@Suite("Control server over a real Unix socket", .serialized)
struct ControlServerTests {
    static func temporaryPaths() throws -> ControlPaths {
        let directory = FileManager.default.temporaryDirectory.path + "/ork-ipc-test-\(UUID().uuidString.prefix(8))"
        let paths = ControlPaths(directory: directory)
        try paths.prepareDirectory()
        return paths
    }

    /// Runs a ControlServer in a ServiceGroup, calls `body` once it listens, then shuts it down
    /// gracefully and checks that it cleaned up.
    static func withServer(idleExit: Duration? = nil, paths: ControlPaths? = nil, consent: ConsentPrompt = .systemWindow,
                           configure: (inout ControlServer.Configuration) -> Void = { _ in },
                           _ body: @Sendable (ControlPaths) async throws -> Void) async throws {
        let paths = try paths ?? temporaryPaths()
        defer { try? FileManager.default.removeItem(atPath: paths.directory) }
        let logger = Logger(label: "test")
        // The server says when it listens, as to the launcher: no polling for the socket.
        var ready: [Int32] = [-1, -1]
        #expect(pipe(&ready) == 0)
        defer { close(ready[0]) }
        var configuration = ControlServer.Configuration(paths: paths, idleExit: idleExit, software: "replayd test", consentPrompt: consent)
        configuration.readyDescriptor = ready[1]
        configure(&configuration)
        let server = ControlServer(configuration: configuration, logger: logger)
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup)], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let readEnd = ready[0]
            let said = await DedicatedThread.run(named: "test-ready") { () -> String in
                var descriptor = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 10_000) > 0 else { return "" }
                var buffer = [UInt8](repeating: 0, count: 32)
                let count = read(readEnd, &buffer, buffer.count)
                return String(decoding: buffer[0..<max(0, count)], as: UTF8.self)
            }
            #expect(said == "listening\n")
            #expect(DaemonLauncher.isListening(socketPath: paths.socket))
            let mode = try FileManager.default.attributesOfItem(atPath: paths.socket)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            try await body(paths)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(!FileManager.default.fileExists(atPath: paths.socket), "the socket is removed at exit")
    }

    /// A raw connection to `socket` (no hello sent), and everything replayd writes on it until it
    /// closes it (or `seconds` pass), read off the pool.
    static func rawConnection(_ socket: String) -> Int32 {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        _ = UnixAddress.with(socket) { connect(fd, $0, $1) }
        return fd
    }

    static func readUntilClosed(_ fd: Int32, seconds: Int32) async -> (text: String, closed: Bool) {
        await DedicatedThread.run(named: "test-read") { () -> (text: String, closed: Bool) in
            defer { close(fd) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while poll(&descriptor, 1, seconds * 1000) > 0 {
                let count = read(fd, &buffer, buffer.count)
                if count <= 0 { return (String(decoding: bytes, as: UTF8.self), true) }
                bytes += buffer[0..<count]
            }
            return (String(decoding: bytes, as: UTF8.self), false)
        }
    }

    /// Issue 29: connections held open without a word, or by the hundred, cost replayd. A client that
    /// says no hello is closed after `helloTimeout`, with a goodbye saying why; past
    /// `maximumConnections` a new one is told so and closed at once.
    @Test func silentClientsAreClosedAndConnectionsAreCounted() async throws {
        try await Self.withServer(configure: { $0.helloTimeout = .seconds(2); $0.maximumConnections = 3 }) { paths in
            // withServer's own probe of the socket gone first: then three clients that say nothing.
            try await Task.sleep(for: .milliseconds(300))
            let silent = (0..<3).map { _ in Self.rawConnection(paths.socket) }
            try await Task.sleep(for: .milliseconds(300))
            let fourth = await Self.readUntilClosed(Self.rawConnection(paths.socket), seconds: 30)
            #expect(fourth.closed && fourth.text.contains("replayd has 3 connections open, its most"), "\(fourth)")
            for fd in silent {
                let answer = await Self.readUntilClosed(fd, seconds: 30)
                #expect(answer.closed && answer.text.contains("no hello within 2.0 seconds"), "\(answer)")
            }
            // Once they are gone, a client that says hello is served as ever.
            let daemon = try await ControlConnection.withConnection(socketPath: paths.socket, software: "test") { (connection: ControlConnection) async throws -> Int32 in
                let status = try await connection.request(.status).status
                #expect(status == nil, "idle")
                return connection.daemon.pid
            }
            #expect(daemon == getpid())
        }
    }

    @Test func helloStatusAndStopWhenIdle() async throws {
        try await Self.withServer { paths in
            try await ControlConnection.withConnection(socketPath: paths.socket, software: "test") { connection in
                #expect(connection.daemon.version == controlProtocolVersion)
                #expect(connection.daemon.role == .daemon)
                #expect(connection.daemon.pid == getpid())
                #expect(try await connection.request(.status).status == nil)
                await #expect(throws: ReplayError(.noSession, "nothing is recording.")) {
                    try await connection.request(.stopRecording)
                }
                do {
                    _ = try await connection.request(.setMicrophone(on: false))
                    Issue.record("mic on an idle replayd")
                } catch let error as ReplayError {
                    #expect(error.code == .noSession)
                }
                if case .failure(let error) = try await connection.send(ControlRequest(method: "teleport")) {
                    #expect(error.code == .badRequest)
                    #expect(error.message.contains("teleport"))
                } else {
                    Issue.record("an unknown method was accepted")
                }
                // A known method with a field missing is answered, and the connection lives on.
                if case .failure(let error) = try await connection.send(ControlRequest(method: "setMicrophone")) {
                    #expect(error.code == .badRequest)
                    #expect(error.message.contains("\"on\""), "names the missing field: \(error.message)")
                } else {
                    Issue.record("a setMicrophone without \"on\" was accepted")
                }
                #expect(try await connection.request(.subscribe).status == nil)
            }
        }
    }

    @Test func aRecordingThatCannotStartLeavesReplaydIdle() async throws {
        try await Self.withServer { paths in
            try await ControlConnection.withConnection(socketPath: paths.socket, software: "test") { connection in
                let options = RecordingOptions(outputPath: paths.directory + "/never.mp4", display: ":65000")
                do {
                    _ = try await connection.request(.startRecording(options))
                    Issue.record("recorded on a display that does not exist")
                } catch let error as ReplayError {
                    #expect(!error.message.isEmpty)
                }
                #expect(try await connection.request(.status).status == nil)
            }
        }
    }

    @Test func manyClientsAtOnce() async throws {
        try await Self.withServer { paths in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await ControlConnection.withConnection(socketPath: paths.socket, software: "test") { connection in
                            for _ in 0..<5 {
                                let status = try await connection.request(.status).status
                                #expect(status == nil)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test func aStaleSocketIsReplaced() async throws {
        let paths = try Self.temporaryPaths()
        // A socket file nobody listens on, as a replayd killed with -9 leaves behind.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: paths.socket.utf8)
            raw[paths.socket.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        close(fd)
        #expect(FileManager.default.fileExists(atPath: paths.socket))
        #expect(!DaemonLauncher.isListening(socketPath: paths.socket))
        try await Self.withServer(paths: paths) { paths in
            let status = try await ControlConnection.withConnection(socketPath: paths.socket, software: "test") { connection in
                try await connection.request(.status).status
            }
            #expect(status == nil)
        }
    }

    @Test func leavesByItselfWhenIdle() async throws {
        let paths = try Self.temporaryPaths()
        defer { try? FileManager.default.removeItem(atPath: paths.directory) }
        let logger = Logger(label: "test")
        let server = ControlServer(configuration: .init(paths: paths, idleExit: .milliseconds(300), software: "t",
                                                        statusInterval: .milliseconds(50)), logger: logger)
        let started = ContinuousClock.now
        try await server.run()
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(!FileManager.default.fileExists(atPath: paths.socket))
    }

    @Test func aSecondDaemonIsRefusedByTheLock() throws {
        let paths = try Self.temporaryPaths()
        defer { try? FileManager.default.removeItem(atPath: paths.directory) }
        let first = try DaemonLock.acquire(paths: paths)
        #expect(throws: ReplayError.self) { try DaemonLock.acquire(paths: paths) }
        do {
            _ = try DaemonLock.acquire(paths: paths)
        } catch {
            #expect(error.message.contains("already running (pid \(getpid())"))
        }
        withExtendedLifetime(first) {}
    }

    @Test func theRuntimeFolderIsPrivate() throws {
        let paths = try Self.temporaryPaths()
        defer { try? FileManager.default.removeItem(atPath: paths.directory) }
        chmod(paths.directory, 0o755)
        try paths.prepareDirectory()
        let mode = try FileManager.default.attributesOfItem(atPath: paths.directory)[.posixPermissions] as? Int
        #expect(mode == 0o700)
    }
}
