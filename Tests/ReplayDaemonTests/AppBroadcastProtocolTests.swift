import Testing
import Foundation
import ReplayIPC
@testable import ReplayDaemon

/// An app's broadcast requests against replayd's real server in-process (the test process is the
/// app): what is refused before anyone is asked. The picker, the pairing prompt, the extension and
/// the pause on focus loss are tested end to end in `SystemWindowsTests.InAppBroadcastTests`.
@Suite("App broadcast protocol over a real Unix socket", .serialized)
struct AppBroadcastProtocolTests {
    @Test func refusalsSayWhyAndNothingStarts() async throws {
        try await AppProtocolTests.withServer(consent: .allow) { _, connection in
            let options = AppSessionOptions(display: ":65000", microphone: false)
            #expect(await AppProtocolTests.code(connection, AppPauseBroadcastRequest()) == .noSession)
            #expect(await AppProtocolTests.code(connection, AppResumeBroadcastRequest()) == .noSession)
            #expect(await AppProtocolTests.code(connection, AppFinishBroadcastRequest()) == .noSession)
            #expect(await AppProtocolTests.code(connection, AppStartBroadcastRequest(options: AppSessionOptions(display: "", microphone: false),
                                                                                     service: "org.example.absent")) == .noDisplay)
            #expect(await AppProtocolTests.code(connection, AppStartBroadcastRequest(options: options, service: "org.example.absent")) == .unknownService)
            #expect(await AppProtocolTests.code(connection, AppPickBroadcastServiceRequest(display: ":65000")) == .noDisplay)
            let sessions = try await connection.request(SessionsRequest()).sessions
            #expect(sessions.isEmpty)
        }
    }
}
