internal import CFFmpeg
internal import ReplayFFmpeg
import Foundation
import Logging
import NIOCore

/// Re-publishes one broadcast, packets copied (no transcoding), to an external RTMP URL — a CDN or a
/// media-server cluster — through libavformat's FLV muxer and RTMP client.
///
/// The network is slow and blocking, so the relay has its own thread, which alone owns the
/// `AVFormatContext`; the ingest only enqueues. A relay that falls `queueLimit` packets behind or fails
/// is dropped with a log line: it never slows the ingest down.
///
/// `@unchecked Sendable`: the mutable queue state is only touched while holding `condition`.
final class RTMPRelay: @unchecked Sendable {
    enum Packet {
        case video(ByteBuffer, dts: Int64, compositionTime: Int64, keyframe: Bool)
        case audio(ByteBuffer, dts: Int64)
    }

    let url: String
    let logger: Logger
    let queueLimit: Int
    private let condition = NSCondition()
    private var queue: [Packet] = []
    private var closed = false
    private var failed = false

    init(url: String, logger: Logger, queueLimit: Int = 2000) {
        self.url = url
        self.logger = logger
        self.queueLimit = queueLimit
    }

    /// Starts the relay's thread: it connects, then writes what is enqueued until `close()`.
    func start(video: FragmentedMP4Muxer.VideoConfiguration, audio: FragmentedMP4Muxer.AudioConfiguration?) {
        let thread = Thread { [self] in self.run(video: video, audio: audio) }
        thread.name = "rtmp-relay"
        thread.start()
    }

    func enqueue(_ packet: Packet) {
        condition.lock()
        defer { condition.unlock() }
        guard !closed, !failed else { return }
        if queue.count >= queueLimit {
            failed = true
            queue.removeAll()
            logger.error("RTMP relay dropped: it fell too far behind", metadata: ["url": "\(Self.redacted(url))"])
        } else {
            queue.append(packet)
        }
        condition.signal()
    }

    /// Finishes the relay after what is queued.
    func close() {
        condition.lock()
        closed = true
        condition.signal()
        condition.unlock()
    }

    /// The URL without its last path component (usually a stream key).
    static func redacted(_ url: String) -> String {
        FormatOutput.redacted(url)
    }

    private func next() -> Packet? {
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty, !closed, !failed { condition.wait() }
        if failed || queue.isEmpty { return nil }
        return queue.removeFirst()
    }

    private func run(video: FragmentedMP4Muxer.VideoConfiguration, audio: FragmentedMP4Muxer.AudioConfiguration?) {
        do {
            let output = try FLVOutput(url: url, video: video, audio: audio)
            logger.info("RTMP relay connected", metadata: ["url": "\(Self.redacted(url))"])
            while let packet = next() {
                switch packet {
                case .video(let data, let dts, let cts, let keyframe):
                    try output.write(data, stream: 0, dts: dts, pts: dts + max(0, cts), keyframe: keyframe)
                case .audio(let data, let dts):
                    try output.write(data, stream: 1, dts: dts, pts: dts, keyframe: true)
                }
            }
            try output.finish()
            logger.info("RTMP relay finished", metadata: ["url": "\(Self.redacted(url))"])
        } catch {
            condition.lock()
            failed = true
            queue.removeAll()
            condition.unlock()
            logger.error("RTMP relay failed", metadata: ["url": "\(Self.redacted(url))", "error": "\(error)"])
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

    func write(_ data: ByteBuffer, stream: Int32, dts: Int64, pts: Int64, keyframe: Bool) throws(FFmpegError) {
        guard let packet, stream == 0 || hasAudio else { return }
        guard dts > lastDTS[Int(stream)] else { return }
        lastDTS[Int(stream)] = dts
        try writePacket(data, using: packet, to: output, stream: stream, dts: dts, pts: pts, keyframe: keyframe)
    }

    func finish() throws(FFmpegError) {
        try output.writeTrailer()
        output.close()
    }
}
