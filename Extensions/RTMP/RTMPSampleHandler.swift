import OpenReplayKit
import ExtensionStreaming
import Logging
import Foundation

/// Sends the broadcast to an RTMP(S) or SRT ingest through `StreamPipeline` (Extensions/Streaming,
/// shared with the reference-service extension): pictures through our H.264 encoder (libx264),
/// the computer's sound and the microphone mixed on one clock into AAC, both through libavformat
/// (`StreamOutput`). Setup info: `url` (rtmp://host/app, rtmps://…, srt://…) and `key` (the stream
/// key, appended as the last path part for RTMP); `watchURL` (optional) is given back as the
/// broadcast URL, else the ingest URL without its key.
///
/// `@unchecked Sendable`: the SDK calls it from one serial queue; the pipeline's failure callback
/// (from the keep-alive thread) only calls `finishBroadcastWithError`, which may be called from any thread.
final class RTMPSampleHandler: RPBroadcastSampleHandler, @unchecked Sendable {
    private var pipeline: StreamPipeline?

    override func broadcastStarted(withSetupInfo setupInfo: [String: NSObject]?) {
        let info = (setupInfo ?? [:]).mapValues { $0.description }
        guard let base = info["url"], !base.isEmpty else {
            finish("no ingest address: start the broadcast with --setup url=rtmp://HOST/APP (and --setup key=STREAM_KEY).")
            return
        }
        var url = base
        if let key = info["key"], !key.isEmpty {
            url = base.hasPrefix("srt://") ? base : (base.hasSuffix("/") ? base : base + "/") + key
        }
        var logger = Logger(label: "org.openreplaykit.rtmp")
        logger.logLevel = .info
        // `replay status` shows the stream's state ("live", "reconnecting (try 2 in 1.0 s)").
        pipeline = StreamPipeline(url: url, logger: logger, failure: { [weak self] reason in self?.finish(reason) },
                                  connectionChanged: { [weak self] connection in
                                      self?.updateServiceInfo(["stream": NSString(string: connection.description)])
                                  })
        let watch = info["watchURL"] ?? base
        if let watchURL = URL(string: watch) { updateBroadcastURL(watchURL) }
    }

    override func processSampleBuffer(_ sampleBuffer: CMSampleBuffer, with sampleBufferType: RPSampleBufferType) {
        pipeline?.process(sampleBuffer, with: sampleBufferType)
    }

    override func broadcastFinished() {
        pipeline?.finish()
        pipeline = nil
    }

    private func finish(_ reason: String) {
        finishBroadcastWithError(NSError(domain: "org.openreplaykit.rtmp", code: 1, userInfo: [NSLocalizedFailureReasonErrorKey: reason]))
    }
}

