import Testing
import ReplayIPC
import ReplayEngine
@testable import ReplayDaemon

/// What a session's output asks of the engine when the screen changes size: a frame ring's reader
/// follows (a system broadcast; an app's capture and an app's broadcast, both on `appOnly`), a
/// movie or a clip has one size.
@Suite("Sessions: which captures follow the screen's size")
struct EngineConfigurationForOutputTests {
    static let app = RecordingSessions.appOnly(AppSessionOptions(display: ":9", microphone: false), pid: 4242)
    static let screen = EngineConfiguration(video: .screen(display: ":9"))

    @Test(arguments: [SessionOutput.ring, .movie, .clip(seconds: 15)])
    func aFrameRingFollowsAndAFileDoesNot(_ output: SessionOutput) {
        let expected: ScreenSizeChanges = output == .ring ? .followed : .scaledToFit
        for configuration in [Self.app, Self.screen] {
            let taken = RecordingSessions.engineConfiguration(configuration, for: output)
            #expect(taken.screenSizeChanges == expected, "\(configuration.video) for \(output)")
            #expect(taken.video == configuration.video && taken.audio == configuration.audio, "nothing else changes")
        }
    }
}
