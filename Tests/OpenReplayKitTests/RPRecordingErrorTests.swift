import Testing
import Foundation
import OpenReplayKit

/// ReplayKit's error codes and their bridge to NSError, as an iOS app reads them.
@Suite("RPRecordingError")
struct RPRecordingErrorTests {
    @Test func codesHaveIOSRawValues() {
        #expect(RPRecordingErrorCode.unknown.rawValue == -5800)
        #expect(RPRecordingErrorCode.userDeclined.rawValue == -5801)
        #expect(RPRecordingErrorCode.interrupted.rawValue == -5806)
        #expect(RPRecordingErrorCode.failedToSave.rawValue == -5812)
        #expect(RPRecordingErrorCode.attemptToStopNonRecording.rawValue == -5829)
        #expect(RPRecordingErrorCode.attemptToStartInRecordingState.rawValue == -5830)
        #expect(RPRecordingErrorCode.invalidParameter.rawValue == -5834)
        #expect(RPRecordingErrorCode.filePermissions.rawValue == -5835)
        #expect(RPRecordingErrorCode.codecNotSupported.rawValue == -5837)
        // Consecutive from -5800 to -5837, none missing.
        #expect(RPRecordingErrorCode.allCases.map(\.rawValue) == Array((-5837 ... -5800).reversed()))
    }

    @Test func bridgesToNSErrorWithReplayKitsDomain() {
        let error: any Error = RPRecordingError(.userDeclined, "the person did not allow SketchPad to record the screen.")
        let bridged = error as NSError
        #expect(bridged.domain == "com.apple.ReplayKit.RPRecordingErrorDomain")
        #expect(bridged.domain == RPRecordingErrorDomain)
        #expect(bridged.code == -5801)
        #expect(bridged.localizedDescription == "the person did not allow SketchPad to record the screen.")
        #expect(error.localizedDescription == "the person did not allow SketchPad to record the screen.")
    }

    @Test func noDisplayMeansUnavailable() async {
        // This test process may have a DISPLAY; the recorder reads its own environment, so only
        // check the rule where it holds.
        if ProcessInfo.processInfo.environment["DISPLAY"]?.isEmpty ?? true {
            #expect(!RPScreenRecorder.shared().isAvailable)
            await #expect(throws: RPRecordingError.self) { try await RPScreenRecorder.shared().startRecording() }
        }
    }
}
