// App-side ReplayKit code as iOS apps write it: a non-final NSObject class whose delegate
// conformances are declared in extensions, the iOS 9 recorder callback, the service info as iOS
// types it, the system picker made with a frame, the preview dismissed from its delegate.
// Only `import OpenReplayKit`. A compile fixture of OpenReplayKitTests.
import OpenReplayKit

class RecorderController: NSObject {
    let recorder = RPScreenRecorder.shared()
    var broadcastController: RPBroadcastController?
    var viewerCount = 0
    var isRecordingShown = false
    var lastPresentationTime = CMTime.zero
    var pickerView = RPSystemBroadcastPickerView(frame: CGRect(x: 0, y: 0, width: 44, height: 44))

    func start() {
        recorder.delegate = self
        recorder.isMicrophoneEnabled = true
        pickerView.preferredExtension = "com.example.streamer.upload"
        recorder.startCapture(handler: { [weak self] sampleBuffer, bufferType, error in
            guard error == nil, bufferType == .video else { return }
            self?.lastPresentationTime = CMSampleBufferGetPresentationTimeStamp(sampleBuffer)
        }, completionHandler: { error in
            if let error { print("capture failed: \(error.localizedDescription)") }
        })
    }

    func stop() {
        guard recorder.isRecording else { return }
        recorder.stopCapture { error in
            if let error = error as NSError? { print(error.domain, error.code) }
            self.broadcastController?.finishBroadcast { _ in self.viewerCount = 0 }
        }
    }

    func record() {
        recorder.startRecording { error in
            self.isRecordingShown = error == nil
        }
    }

    func loadPicker() {
        RPBroadcastActivityViewController.load { picker, error in
            picker?.delegate = self
        }
    }
}

extension RecorderController: RPScreenRecorderDelegate {
    func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWithError error: Error, previewViewController: RPPreviewViewController?) {
        previewViewController?.previewControllerDelegate = self
    }

    func screenRecorderDidChangeAvailability(_ screenRecorder: RPScreenRecorder) {
        print("available: \(screenRecorder.isAvailable)")
    }
}

extension RecorderController: RPPreviewViewControllerDelegate {
    func previewControllerDidFinish(_ previewController: RPPreviewViewController) {
        previewController.dismiss(animated: true, completion: nil)
    }
}

extension RecorderController: RPBroadcastActivityViewControllerDelegate {
    func broadcastActivityViewController(_ broadcastActivityViewController: RPBroadcastActivityViewController,
                                         didFinishWith broadcastController: RPBroadcastController?, error: Error?) {
        broadcastActivityViewController.dismiss(animated: true) {
            self.broadcastController = broadcastController
            broadcastController?.delegate = self
        }
    }
}

extension RecorderController: RPBroadcastControllerDelegate {
    func broadcastController(_ broadcastController: RPBroadcastController, didFinishWithError error: Error?) {
        print("broadcast ended: \(String(describing: error))")
    }

    func broadcastController(_ broadcastController: RPBroadcastController, didUpdateServiceInfo serviceInfo: [String : NSCoding & NSObjectProtocol]) {
        viewerCount = (serviceInfo["viewers"] as? NSString)?.integerValue ?? 0
    }

    func broadcastController(_ broadcastController: RPBroadcastController, didUpdateBroadcast broadcastURL: URL) {
        print("watch at \(broadcastURL)")
    }
}
