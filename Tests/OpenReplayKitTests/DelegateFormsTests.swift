import Foundation
@testable import OpenReplayKit
import Testing

/// The iOS forms of the delegate calls reach a delegate that implements only the other form, and
/// non-final, non-Sendable classes conform (as iOS apps' do).
@Suite("Delegates: iOS's older and newer forms")
struct DelegateFormsTests {
    class OldFormOnly: NSObject, RPScreenRecorderDelegate {
        var heard: [Int] = []
        func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWithError error: any Error, previewViewController: RPPreviewViewController?) {
            heard.append((error as NSError).code)
        }
    }

    class BothForms: NSObject, RPScreenRecorderDelegate {
        var heard: [String] = []
        func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWith previewViewController: RPPreviewViewController?, error: (any Error)?) {
            heard.append("new")
        }
        func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWithError error: any Error, previewViewController: RPPreviewViewController?) {
            heard.append("old")
        }
    }

    class StringsOnly: NSObject, RPBroadcastControllerDelegate {
        var info: [String: String] = [:]
        func broadcastController(_ broadcastController: RPBroadcastController, didUpdateServiceInfo serviceInfo: [String: String]) {
            info = serviceInfo
        }
    }

    @Test func theIOS9StopFormIsCalledWhenItIsTheOnlyOne() {
        let delegate = OldFormOnly()
        let asSeen: any RPScreenRecorderDelegate = delegate
        asSeen.screenRecorder(RPScreenRecorder.shared(), didStopRecordingWith: nil,
                              error: RPRecordingError(.interrupted, "the person started a recording"))
        asSeen.screenRecorder(RPScreenRecorder.shared(), didStopRecordingWith: nil, error: nil)
        #expect(delegate.heard == [RPRecordingErrorCode.interrupted.rawValue, RPRecordingErrorCode.unknown.rawValue])
    }

    @Test func aDelegateWithBothFormsHearsTheNewOneOnly() {
        let delegate = BothForms()
        let asSeen: any RPScreenRecorderDelegate = delegate
        asSeen.screenRecorder(RPScreenRecorder.shared(), didStopRecordingWith: nil, error: nil)
        #expect(delegate.heard == ["new"])
    }

    @Test func serviceInfoInIOSTypesReachesTheStringsForm() {
        let delegate = StringsOnly()
        let asSeen: any RPBroadcastControllerDelegate = delegate
        let controller = RPBroadcastController(identifier: "org.example.stream", serviceName: "Stream", microphone: false, display: ":0")
        asSeen.broadcastController(controller, didUpdateServiceInfo: ["viewers": NSString(string: "3"), "title": NSString(string: "Live")])
        #expect(delegate.info == ["viewers": "3", "title": "Live"])
    }

    @Test func delegatesAreKeptWeaklyAndComeBackAsSet() {
        let controller = RPBroadcastController(identifier: "org.example.stream", serviceName: "Stream", microphone: false, display: ":0")
        var delegate: StringsOnly? = StringsOnly()
        controller.delegate = delegate
        #expect(controller.delegate === delegate)
        delegate = nil
        #expect(controller.delegate == nil, "weak, as on iOS")
    }
}
