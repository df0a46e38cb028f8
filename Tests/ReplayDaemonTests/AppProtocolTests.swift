import Testing
import Foundation
import Logging
import ServiceLifecycle
import ReplayIPC
@testable import ReplayDaemon
#if canImport(Glibc)
import Glibc
#endif

/// The app requests against replayd's real server in-process: the test process is the "app" (its
/// pid is what SO_PEERCRED gives), consent is answered by a fixed answer (no window here).
@Suite("App protocol over a real Unix socket", .serialized)
struct AppProtocolTests {
    static func withServer(consent: SystemWindows.ConsentAnswer,
                           _ body: @Sendable (ControlPaths, ControlConnection) async throws -> Void) async throws {
        try await ControlServerTests.withServer(consent: .fixed(consent)) { paths in
            try await ControlConnection.withConnection(socketPath: paths.socket, software: "app test") { connection in
                try await body(paths, connection)
            }
        }
    }

    static func code<Method: ControlMethod>(_ connection: ControlConnection, _ method: Method) async -> ReplayError.Code? {
        do {
            _ = try await connection.request(method)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func badInputGetsClearErrorsAndNothingStarts() async throws {
        try await Self.withServer(consent: .allow) { paths, connection in
            #expect(await Self.code(connection, AppStopRecordingRequest(outputPath: nil)) == .noSession)
            #expect(await Self.code(connection, AppStopClipBufferingRequest()) == .noSession)
            #expect(await Self.code(connection, AppPresentPreviewRequest()) == .noSession)
            #expect(await Self.code(connection, AppExportClipRequest(outputPath: paths.directory + "/c.mp4", durationSeconds: 20)) == .invalidParameter)
            #expect(await Self.code(connection, AppExportClipRequest(outputPath: paths.directory + "/c.mp4", durationSeconds: -1)) == .invalidParameter)
            #expect(await Self.code(connection, AppExportClipRequest(outputPath: paths.directory + "/c.mp4", durationSeconds: 5)) == .noSession)
            #expect(await Self.code(connection, AppStartRecordingRequest(options: AppSessionOptions(display: "", microphone: false))) == .noDisplay)
            #expect(await Self.code(connection, AppStartCaptureRequest(options: AppSessionOptions(display: ":65000", microphone: false))) == .unknownDisplay)
            _ = try await connection.request(AppDiscardRecordingRequest())
            let unavailable = try await connection.request(AvailabilityRequest(display: ":65000"))
            #expect(!unavailable.available)
            #expect(unavailable.reason?.contains(":65000") == true)
            #expect(unavailable.captured == false)
            // A display that cannot be opened: the start fails, and nothing is left on disk.
            let failed = await Self.code(connection, AppStartRecordingRequest(options: AppSessionOptions(display: ":65000", microphone: false)))
            #expect(failed != nil && failed != .userDeclined)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: paths.directory + "/app-recordings")) ?? []
            #expect(left.isEmpty, "no half file: \(left)")
            #expect(try await connection.request(SessionsRequest()).sessions.isEmpty)
        }
    }

    @Test func malformedAppRequestsAreAnsweredAndReplaydLivesOn() async throws {
        try await Self.withServer(consent: .allow) { paths, connection in
            let methods = [AppStartRecordingRequest.method, AppStopRecordingRequest.method, AppExportClipRequest.method,
                           AvailabilityRequest.method, PrivacyResetRequest.method, ClipStartRequest.method, ClipSaveRequest.method]
            var generator = SystemRandomNumberGenerator()
            let values: [JSONValue] = [.null, .bool(true), .integer(-1), .integer(Int64.max), .double(1e308), .string(""),
                                       .string(String(repeating: "x", count: 5000)), .array([.null]), .object(["a": .integer(1)])]
            for round in 0..<300 {
                let method = methods.randomElement(using: &generator)!
                var fields: [String: JSONValue] = [:]
                for key in ["options", "outputPath", "durationSeconds", "display", "app", "seconds", "microphone"] where Bool.random(using: &generator) {
                    fields[key] = values.randomElement(using: &generator)!
                }
                let response = try await connection.send(ControlRequest(method: method, payload: ControlPayload(fields: fields)))
                if case .failure(let error) = response {
                    #expect(!error.message.isEmpty, "round \(round): \(method) \(fields)")
                    #expect(error.code != .internal, "round \(round): \(method) \(fields): \(error)")
                }
            }
            // Still serving, on this connection and on a new one.
            #expect(try await connection.request(.status).status == nil)
            try await ControlConnection.withConnection(socketPath: paths.socket, software: "second") { second in
                let apps = try await second.request(PrivacyListRequest()).apps
                #expect(apps.count <= 1)
            }
        }
    }

    /// Raw frames of garbage from many connections: each is closed with a goodbye or answered,
    /// and replayd goes on serving.
    @Test func fuzzedFramesNeverStopReplayd() async throws {
        try await Self.withServer(consent: .allow) { paths, connection in
            var generator = SystemRandomNumberGenerator()
            let hello = Array(#"{"pid":1,"role":"client","software":"fuzz","type":"hello","version":1}"#.utf8)
            let samples: [[UInt8]] = [
                Array(#"{"type":"request","id":1,"method":"appStartRecording","options":7}"#.utf8),
                Array(#"{"type":"request","id":"x","method":"appExportClip"}"#.utf8),
                Array(#"{"type":"request","id":2,"method":"appExportClip","outputPath":"/nonexistent/a.mp4","durationSeconds":1e400}"#.utf8),
                Array(#"{"type":"event","event":"appSessionStopped"}"#.utf8),
                Array(#"{"type":"nonsense"}"#.utf8), Array("[]".utf8), Array("{".utf8), [0xff, 0xfe, 0x00],
            ]
            for round in 0..<60 {
                let fd = try Self.connect(paths.socket)
                defer { close(fd) }
                var bytes: [UInt8] = []
                func frame(_ payload: [UInt8]) {
                    let n = UInt32(payload.count)
                    bytes += [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
                }
                if round % 3 != 0 { frame(hello) }
                switch round % 4 {
                case 0: frame(samples.randomElement(using: &generator)!)
                case 1: frame((0..<Int.random(in: 1...300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
                case 2: bytes += (0..<Int.random(in: 1...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                default:
                    var payload = samples.randomElement(using: &generator)!
                    payload[Int.random(in: 0..<payload.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                    frame(payload)
                }
                _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                shutdown(fd, Int32(SHUT_WR))
                var sink = [UInt8](repeating: 0, count: 4096)
                while sink.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
            }
            #expect(try await connection.request(.status).status == nil, "replayd still answers")
            #expect(DaemonLauncher.isListening(socketPath: paths.socket))
        }
    }

    static func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, result == 0 else { throw ReplayError(.daemonUnavailable, "cannot connect to \(path)") }
        return fd
    }

    @Test func declinedConsentIsUserDeclinedRememberedAndReset() async throws {
        try await Self.withServer(consent: .deny) { paths, connection in
            let options = AppSessionOptions(display: ":65000", microphone: true)
            #expect(await Self.code(connection, AppStartRecordingRequest(options: options)) == .userDeclined)
            #expect(await Self.code(connection, AppStartClipBufferingRequest(options: options)) == .userDeclined, "remembered for the same app")
            let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
            let listed = try await connection.request(PrivacyListRequest()).apps
            #expect(listed.map(\.executable) == [me])
            #expect(listed.first?.answer == "deny")
            #expect((listed.first?.remainingSeconds ?? 0) > 470)
            let removed = try await connection.request(PrivacyResetRequest(app: (me as NSString).lastPathComponent)).removed
            #expect(removed.map(\.executable) == [me])
            #expect(try await connection.request(PrivacyListRequest()).apps.isEmpty)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: paths.directory + "/app-recordings")) ?? []
            #expect(left.isEmpty, "nothing captured: \(left)")
        }
    }

    @Test func systemClipRefusesBadLengthsAndSavesNothingWhenIdle() async throws {
        try await Self.withServer(consent: .allow) { paths, connection in
            let options = RecordingOptions(outputPath: paths.directory, display: ":65000")
            #expect(await Self.code(connection, ClipStartRequest(options: options, seconds: 61)) == .invalidParameter)
            #expect(await Self.code(connection, ClipStartRequest(options: options, seconds: 0)) == .invalidParameter)
            #expect(await Self.code(connection, ClipSaveRequest(outputPath: paths.directory + "/c.mp4", seconds: 5)) == .noSession)
            #expect(await Self.code(connection, ClipStopRequest()) == .noSession)
        }
    }
}
