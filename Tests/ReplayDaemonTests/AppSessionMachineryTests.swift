import Testing
import Foundation
import Logging
import ServiceLifecycle
import ReplayIPC
import ReplayTesting
@testable import ReplayDaemon

/// replayd's app sessions with the real engine on a real X server, in-process: start, a second
/// start, stop to a file, discard, interruption by the system recording, and an app that leaves.
/// The "app" is this test process, which has no window and plays nothing: its recordings are black
/// and silent (what an app's session holds is checked by the system tests with real test apps).
@Suite("App sessions: the machinery, on a real display", .serialized)
struct AppSessionMachineryTests {
    /// replayd's server (apps' consent answered "allow") on a display of its own.
    static func withServer(_ body: @Sendable (ControlPaths, String) async throws -> Void) async throws {
        let xvfb = try await XvfbServer.start(width: 320, height: 240)
        do {
            try await ControlServerTests.withServer(consent: .fixed(.allow)) { paths in try await body(paths, xvfb.display) }
        } catch {
            await xvfb.stop()
            throw error
        }
        await xvfb.stop()
    }

    static func appRecordings(_ paths: ControlPaths) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: paths.directory + "/app-recordings")) ?? []
    }

    static func connect<T: Sendable>(_ paths: ControlPaths, _ body: (ControlConnection) async throws -> T) async throws -> T {
        try await ControlConnection.withConnection(socketPath: paths.socket, software: "app test", body)
    }

    @Test func startStopToAFileAndDiscard() async throws {
        try await Self.withServer { paths, display in
            try await Self.connect(paths) { app in
                let options = AppSessionOptions(display: display, microphone: false)
                let started = try #require(try await app.request(AppStartRecordingRequest(options: options)).status)
                #expect(started.kind == .appRecording)
                #expect(started.clientPID == getpid(), "the caller is the kernel's word")
                #expect(Self.appRecordings(paths).count == 1)
                #expect(await AppProtocolTests.code(app, AppStartRecordingRequest(options: options)) == .sessionActive)
                try await Task.sleep(for: .seconds(1.5))
                // A bad path is refused before stopping: the recording goes on.
                #expect(await AppProtocolTests.code(app, AppStopRecordingRequest(outputPath: "/nonexistent/folder/a.mp4")) == .outputNotWritable)
                let output = paths.directory + "/take.mp4"
                let stopped = try await app.request(AppStopRecordingRequest(outputPath: output))
                #expect(stopped.path == output)
                let info = try await MediaProbe.probe(output)
                #expect(info.videoStreams.first?.width == 320)
                #expect((info.format.duration ?? 0) > 1)
                #expect(Self.appRecordings(paths).isEmpty, "moved out of replayd's folder")

                // Kept for the preview, then discarded.
                _ = try await app.request(AppStartRecordingRequest(options: options))
                try await Task.sleep(for: .seconds(1))
                let kept = try await app.request(AppStopRecordingRequest(outputPath: nil))
                #expect(kept.path.hasPrefix(paths.directory + "/app-recordings/"))
                #expect(FileManager.default.fileExists(atPath: kept.path))
                _ = try await app.request(AppDiscardRecordingRequest())
                #expect(!FileManager.default.fileExists(atPath: kept.path))
                #expect(try await app.request(SessionsRequest()).sessions.isEmpty)
            }
        }
    }

    @Test func theSystemRecordingInterruptsAppsAndDiscardsTheirFiles() async throws {
        try await Self.withServer { paths, display in
            try await Self.connect(paths) { app in
                _ = try await app.request(AvailabilityRequest(display: display))
                _ = try await app.request(AppStartRecordingRequest(options: AppSessionOptions(display: display, microphone: false)))
                _ = try await app.request(AppStartClipBufferingRequest(options: AppSessionOptions(display: display, microphone: false)))
                #expect(try await app.request(SessionsRequest()).sessions.count == 2)
                #expect(Self.appRecordings(paths).count == 1)
                let person = paths.directory + "/person.mp4"
                try await Self.connect(paths) { control in
                    let status = try await control.request(.startRecording(RecordingOptions(outputPath: person, systemAudio: false, display: display)))
                    #expect(status.status?.kind == .recording)
                }
                let collector = Task { () -> ([AppSessionStoppedEvent], [Bool]) in
                    var stopped: [AppSessionStoppedEvent] = []
                    var availability: [Bool] = []
                    for await event in app.events {
                        if let event = event.decode(AppSessionStoppedEvent.self) { stopped.append(event) }
                        if let event = event.decode(AvailabilityChangedEvent.self) { availability.append(event.available) }
                        if stopped.count == 2 && !availability.isEmpty { break }
                    }
                    return (stopped, availability)
                }
                let timeout = Task {
                    try await Task.sleep(for: .seconds(30))
                    collector.cancel()
                }
                let (stopped, availability) = await collector.value
                timeout.cancel()
                #expect(Set(stopped.map(\.status.kind)) == [.appRecording, .appClip])
                #expect(stopped.allSatisfy { $0.error.code == .interrupted })
                #expect(availability == [false])
                #expect(Self.appRecordings(paths).isEmpty, "the app's recording was discarded")
                #expect(await AppProtocolTests.code(app, AppStartRecordingRequest(options: AppSessionOptions(display: display, microphone: false))) == .unavailable)
                let final = try await app.request(.stopRecording)
                #expect(final.status?.state == .finished)
                #expect(FileManager.default.fileExists(atPath: person))
            }
        }
    }

    @Test func anAppThatLeavesLosesItsSessionsAndFiles() async throws {
        try await Self.withServer { paths, display in
            try await Self.connect(paths) { app in
                _ = try await app.request(AppStartRecordingRequest(options: AppSessionOptions(display: display, microphone: false)))
                #expect(Self.appRecordings(paths).count == 1)
            }
            // Up to 20 s: the check is that it happens, not how fast (a loaded machine runs other tests).
            var left = Self.appRecordings(paths)
            for _ in 0..<400 where !left.isEmpty {
                try await Task.sleep(for: .milliseconds(50))
                left = Self.appRecordings(paths)
            }
            #expect(left.isEmpty, "the half file is removed: \(left)")
            try await Self.connect(paths) { control in
                let sessions = try await control.request(SessionsRequest()).sessions
                #expect(sessions.isEmpty)
            }
        }
    }
}
