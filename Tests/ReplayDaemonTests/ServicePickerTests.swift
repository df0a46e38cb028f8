import Foundation
import ReplayIPC
import ReplayTesting
import Testing
@testable import ReplayDaemon

/// How replayd asks for a broadcast service: the test answers `--picker-answer-for-tests` takes, and
/// `SystemWindows.pickService` through the real `replay-ui picker` on a private X server, answered
/// with real key presses (XTEST).
@Suite("The broadcast service picker")
struct ServicePickerTests {
    static let services = [
        SystemWindows.PickerService(identifier: "org.openreplaykit.reference", displayName: "OpenReplayKit Live"),
        SystemWindows.PickerService(identifier: "org.openreplaykit.rtmp", displayName: "RTMP / SRT", iconPath: "/nonexistent.png"),
    ]

    @Test func testAnswers() async throws {
        #expect(ServicePicker(testAnswer: "cancel") == .fixed(nil))
        #expect(ServicePicker(testAnswer: "org.openreplaykit.rtmp") == .fixed(.init(identifier: "org.openreplaykit.rtmp", microphone: false)))
        #expect(ServicePicker(testAnswer: "org.openreplaykit.rtmp,microphone") == .fixed(.init(identifier: "org.openreplaykit.rtmp", microphone: true)))
        for wrong in ["", ",microphone", "a,mic", "a,microphone,b"] { #expect(ServicePicker(testAnswer: wrong) == nil, "\(wrong)") }

        let paths = ControlPaths(directory: FileManager.default.temporaryDirectory.appendingPathComponent("ork-picker-\(UUID().uuidString)").path)
        defer { try? FileManager.default.removeItem(atPath: paths.directory) }
        let picked = try await ServicePicker(testAnswer: "org.openreplaykit.rtmp,microphone")!.pick(Self.services, microphone: false, display: ":0", paths: paths)
        #expect(picked == .init(identifier: "org.openreplaykit.rtmp", microphone: true))
        #expect(try await ServicePicker.fixed(nil).pick(Self.services, microphone: true, display: ":0", paths: paths) == nil)
        await #expect(throws: ReplayError.self) {
            try await ServicePicker(testAnswer: "com.example.absent")!.pick(Self.services, microphone: false, display: ":0", paths: paths)
        }
    }

    @Test(arguments: [(["Down", "space", "Return"], SystemWindows.PickerChoice?.some(.init(identifier: "org.openreplaykit.rtmp", microphone: true))),
                      (["Escape"], nil)])
    func pickServiceShowsTheWindowAndReadsTheAnswer(keys: [String], expected: SystemWindows.PickerChoice?) async throws {
        try await TestEnvironment.with(TestEnvironment.Configuration(content: nil)) { environment in
            let paths = ControlPaths(directory: environment.directory.appendingPathComponent("replayd").path)
            let display = environment.xvfb.display
            async let choice = SystemWindows.pickService(Self.services, microphone: false, display: display, paths: paths)
            // No window manager here: the picker's window is focused, then the keys pressed.
            try await SystemWindowKeys.press(keys, in: "openreplaykit-picker", environment: environment.environment)
            #expect(try await choice == expected)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: paths.directory)) ?? []
            #expect(!left.contains { $0.hasPrefix("picker-") || $0.hasPrefix("ui-") }, "the services and answer files are removed: \(left)")
        }
    }
}
