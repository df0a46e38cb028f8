import Foundation
@testable import OpenReplayKit
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Handlers written as on iOS: set up in `override init()` (no `required`), made by the runtime
/// from their class; and an extension's main thread runs its run loop (Timers, the main queue).
@Suite("Extension runtime: handlers with override init, the main run loop")
struct ExtensionRuntimeTests {
    final class SetUpInInit: RPBroadcastSampleHandler {
        let server: String
        override init() {
            server = "rtmp://ingest.example.com/live"
            super.init()
        }
    }

    final class NoInitializer: RPBroadcastSampleHandler {
        var frames = 0
    }

    final class SetupInInit: RPBroadcastSetupViewController {
        var title = "unset"
        override init() {
            title = "set in init"
            super.init()
        }
    }

    @Test func theRuntimeMakesAHandlerWithItsOverrideInit() throws {
        let made = try #require(makeHandler(of: SetUpInInit.self) as? SetUpInInit)
        #expect(made.server == "rtmp://ingest.example.com/live")
        #expect(makeHandler(of: NoInitializer.self) is NoInitializer)
    }

    @MainActor @Test func theRuntimeMakesASetupControllerWithItsOverrideInit() {
        let controllerType: RPBroadcastSetupViewController.Type = SetupInInit.self
        let made = controllerType.init(extensionHost: RPBroadcastExtensionHostToken())
        #expect((made as? SetupInInit)?.title == "set in init")
    }

    /// replay-testextension (its SampleHandler sets up in `override init()`, which starts a Timer on
    /// `RunLoop.main` and work on `DispatchQueue.main`) started as replayd starts it, with a replayd
    /// socket that accepts and never answers: the handler is made and both run while it waits.
    @Test func aTimerOnTheMainRunLoopFiresInAnExtension() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-runloop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: folder) }
        let socketPath = folder.appendingPathComponent("replayd.sock").path
        let listener = try Self.listen(at: socketPath)
        defer { close(listener) }

        var environment = ProcessInfo.processInfo.environment
        environment["ORK_REPLAYD_SOCKET"] = socketPath
        environment["ORK_EXTENSION_FOLDER"] = folder.path
        let process = try BackgroundProcess(try Binaries.path("replay-testextension"), environment: environment)
        defer { process.signal(SIGKILL) }
        let events = folder.appendingPathComponent("events.log")
        var lines: [String] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            lines = ((try? String(contentsOf: events, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            if lines.contains("main run loop timer") && lines.contains("main queue") { break }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(lines.first == "authenticated tester", "made with its override init: \(lines)")
        #expect(lines.contains("main queue"), "\(lines) \(process.currentError)")
        #expect(lines.contains("main run loop timer"), "\(lines) \(process.currentError)")
        #expect(process.isRunning, "it waits for replayd's answer: \(process.currentError)")
    }

    /// A listening Unix socket whose connections are queued and never accepted.
    static func listen(at path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8.prefix(raw.count - 1))
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, Glibc.listen(descriptor, 4) == 0 else {
            close(descriptor)
            throw HarnessError("cannot listen at \(path): \(String(cString: strerror(errno)))")
        }
        return descriptor
    }
}
