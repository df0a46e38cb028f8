internal import CFFmpeg
import Foundation
import Logging
import NIOCore
internal import ReplayFFmpeg
import Synchronization

/// Re-publishes one broadcast, packets copied (no transcoding), to an external RTMP URL — a CDN or a
/// media-server cluster — through libavformat's FLV muxer and RTMP client.
///
/// The network is slow and blocking, so the relay has its own thread, which alone owns the
/// `FLVOutput`; the ingest only enqueues (`BoundedQueue`). A relay that falls `queueLimit` packets
/// behind or fails is dropped with a log line: it never slows the ingest down.
///
/// A new H.264 configuration mid-broadcast (the broadcaster's picture changed size) is followed:
/// it goes out as a new sequence header before the next picture, as the broadcaster sent it.
final class RTMPRelay: Sendable {
    enum Packet: Sendable {
        case video(ByteBuffer, dts: Int64, compositionTime: Int64, keyframe: Bool)
        case audio(ByteBuffer, dts: Int64)
        /// The broadcaster's new `AVCDecoderConfigurationRecord`, for the pictures that follow.
        case videoConfiguration([UInt8])
    }

    let url: String
    let logger: Logger
    private let queue: BoundedQueue<Packet>
    /// Set once the relay has given up (fell behind, or the connection failed).
    private let failed = Atomic<Bool>(false)

    init(url: String, logger: Logger, queueLimit: Int = 2000) {
        self.url = url
        self.logger = logger
        queue = BoundedQueue(capacity: queueLimit)
    }

    /// Starts the relay's thread: it connects, then writes what is enqueued until `close()`.
    func start(video: FragmentedMP4Muxer.VideoConfiguration, audio: FragmentedMP4Muxer.AudioConfiguration?) {
        let thread = Thread { [self] in self.run(video: video, audio: audio) }
        thread.name = "rtmp-relay"
        thread.start()
    }

    func enqueue(_ packet: Packet) {
        guard !queue.push(packet), !failed.load(ordering: .acquiring) else { return }
        // Full (or closed: then `close()` came first and this packet is simply late).
        if queue.isClosed { return }
        give(up: "it fell too far behind")
    }

    /// Finishes the relay after what is queued.
    func close() {
        queue.close()
    }

    /// The URL without its last path component (usually a stream key).
    static func redacted(_ url: String) -> String {
        FormatOutput.redacted(url)
    }

    private func give(up reason: String, error: (any Error)? = nil) {
        guard !failed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.close(discardingWhatIsLeft: true)
        var metadata: Logger.Metadata = ["url": "\(Self.redacted(url))"]
        if let error { metadata["error"] = "\(error)" }
        logger.error("RTMP relay dropped: \(reason)", metadata: metadata)
    }

    private func run(video: FragmentedMP4Muxer.VideoConfiguration, audio: FragmentedMP4Muxer.AudioConfiguration?) {
        do {
            let output = try FLVOutput(url: url, video: video, audio: audio)
            logger.info("RTMP relay connected", metadata: ["url": "\(Self.redacted(url))"])
            var newConfiguration: [UInt8]?
            while let packet = queue.pop() {
                switch packet {
                case .video(let data, let dts, let cts, let keyframe):
                    if try output.write(data, stream: 0, dts: dts, pts: dts + max(0, cts), keyframe: keyframe, newExtradata: newConfiguration) {
                        newConfiguration = nil
                    }
                case .audio(let data, let dts):
                    try output.write(data, stream: 1, dts: dts, pts: dts, keyframe: true)
                case .videoConfiguration(let avcC):
                    newConfiguration = avcC
                    logger.info("RTMP relay follows a new H.264 configuration", metadata: ["url": "\(Self.redacted(url))"])
                }
            }
            guard !failed.load(ordering: .acquiring) else { return }
            try output.finish()
            logger.info("RTMP relay finished", metadata: ["url": "\(Self.redacted(url))"])
        } catch {
            give(up: "it failed", error: error)
        }
    }
}

/// libavformat's FLV muxer writing to an RTMP URL. Owns its output and packet; used by one thread.
final class FLVOutput {
    private let output: FormatOutput
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var lastDTS: [Int64] = [-1, -1]
    private let hasAudio: Bool

    init(url: String, video: FragmentedMP4Muxer.VideoConfiguration, audio: FragmentedMP4Muxer.AudioConfiguration?) throws(FFmpegError) {
        hasAudio = audio != nil
        output = try FormatOutput(format: "flv", target: .url(url))
        _ = try FragmentedMP4Muxer.addStreams(to: output, video: video, audio: audio)
        // Connects and publishes (blocking).
        try output.writeHeader(options: [("flvflags", "no_duration_filesize")])
        packet = av_packet_alloc()
        guard packet != nil else { throw FFmpegError("av_packet_alloc", message: "out of memory") }
    }

    deinit {
        av_packet_free(&packet)
    }

    /// Writes one packet (with `newExtradata`, a new sequence header before it); false when it was
    /// left out (audio without an audio stream, or a time not after the last of its stream).
    @discardableResult
    func write(_ data: ByteBuffer, stream: Int32, dts: Int64, pts: Int64, keyframe: Bool, newExtradata: [UInt8]? = nil) throws(FFmpegError) -> Bool {
        guard let packet, stream == 0 || hasAudio else { return false }
        guard dts > lastDTS[Int(stream)] else { return false }
        lastDTS[Int(stream)] = dts
        try writePacket(data, using: packet, to: output, stream: stream, dts: dts, pts: pts, keyframe: keyframe, newExtradata: newExtradata)
        return true
    }

    func finish() throws(FFmpegError) {
        try output.writeTrailer()
        output.close()
    }
}
