// An upload extension handler written as streaming SDKs write theirs on iOS: set up in
// `override init()`, a statistics timer on the main run loop, the app group's container for a
// socket path and its defaults, NotificationCenter, and the orientation of each picture.
// Only `import OpenReplayKit` (on iOS: ReplayKit). A compile fixture of OpenReplayKitTests.
import OpenReplayKit

final class StreamStatistics: @unchecked Sendable {
    private let lock = NSLock()
    private var frames = 0
    private var bytes = 0

    func add(frames: Int, bytes: Int) {
        lock.lock()
        defer { lock.unlock() }
        self.frames += frames
        self.bytes += bytes
    }

    func takeSnapshot() -> (frames: Int, bytes: Int) {
        lock.lock()
        defer { lock.unlock() }
        defer { frames = 0; bytes = 0 }
        return (frames, bytes)
    }
}

class SampleHandler: RPBroadcastSampleHandler {
    private let appGroup = "group.com.example.streamer"
    private let statistics = StreamStatistics()
    private var statsTimer: Timer?
    private let sendQueue = DispatchQueue(label: "com.example.streamer.send")
    private var socketURL: URL?
    private var lastOrientation: CGImagePropertyOrientation = .up
    private var outputSize = CGSize(width: 1280, height: 720)
    private var reconnectObserver: NSObjectProtocol?

    override init() {
        super.init()
        socketURL = FileManager.default
            .containerURL(forSecurityApplicationGroupIdentifier: appGroup)?
            .appendingPathComponent("rtc_SSFD")
        reconnectObserver = NotificationCenter.default.addObserver(forName: .init("StreamerDidReconnect"), object: nil, queue: .main) { _ in
            print("reconnected")
        }
    }

    deinit {
        statsTimer?.invalidate()
    }

    override func broadcastStarted(withSetupInfo setupInfo: [String : NSObject]?) {
        let defaults = UserDefaults(suiteName: appGroup)
        let streamKey = setupInfo?["streamKey"] as? String ?? defaults?.string(forKey: "streamKey")
        if streamKey == nil {
            let error = NSError(domain: "com.example.streamer", code: 401,
                                userInfo: [NSLocalizedDescriptionKey: "Sign in to the app first."])
            finishBroadcastWithError(error)
            return
        }
        let statistics = self.statistics
        // The handler's calls come on a queue without a run loop: the timer goes on the main one.
        let timer = Timer(timeInterval: 1.0, repeats: true) { _ in
            let snapshot = statistics.takeSnapshot()
            print("sent \(snapshot.frames) frames, \(snapshot.bytes) bytes")
        }
        RunLoop.main.add(timer, forMode: .common)
        statsTimer = timer
        DispatchQueue.main.asyncAfter(deadline: .now() + 5) {
            print("still live")
        }
    }

    override func broadcastFinished() {
        statsTimer?.invalidate()
        statsTimer = nil
    }

    override func processSampleBuffer(_ sampleBuffer: CMSampleBuffer, with sampleBufferType: RPSampleBufferType) {
        switch sampleBufferType {
        case .video:
            guard let pixelBuffer = CMSampleBufferGetImageBuffer(sampleBuffer) else { return }
            if let orientationAttachment = CMGetAttachment(sampleBuffer, key: RPVideoSampleOrientationKey as CFString, attachmentModeOut: nil) as? NSNumber,
               let orientation = CGImagePropertyOrientation(rawValue: orientationAttachment.uint32Value) {
                lastOrientation = orientation
            }
            let width = CVPixelBufferGetWidth(pixelBuffer)
            let height = CVPixelBufferGetHeight(pixelBuffer)
            let rotated = lastOrientation == .left || lastOrientation == .right
            outputSize = rotated ? CGSize(width: height, height: width) : CGSize(width: width, height: height)
            statistics.add(frames: 1, bytes: CVPixelBufferGetDataSize(pixelBuffer))
        case .audioApp, .audioMic:
            guard let blockBuffer = CMSampleBufferGetDataBuffer(sampleBuffer) else { return }
            let length = CMBlockBufferGetDataLength(blockBuffer)
            var data = Data(count: length)
            let status = data.withUnsafeMutableBytes { bytes in
                CMBlockBufferCopyDataBytes(blockBuffer, atOffset: 0, dataLength: length, destination: bytes.baseAddress!)
            }
            guard status == kCMBlockBufferNoErr else { return }
            let frame = CGRect(origin: .zero, size: outputSize)
            let chunk = data
            sendQueue.async { _ = (chunk, frame) }
        @unknown default:
            break
        }
    }
}
