internal import CFFmpeg
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
        guard let slash = url.lastIndex(of: "/") else { return url }
        return url[..<slash] + "/…"
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

/// libavformat's FLV muxer writing to an RTMP URL. Owns its contexts; used by one thread.
final class FLVOutput {
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var lastDTS: [Int64] = [-1, -1]
    private let hasAudio: Bool

    init(url: String, video: FragmentedMP4Muxer.VideoConfiguration, audio: FragmentedMP4Muxer.AudioConfiguration?) throws(FFmpegError) {
        hasAudio = audio != nil
        try check("avformat_alloc_output_context2(flv)", avformat_alloc_output_context2(&context, nil, "flv", url))
        guard let context else { throw FFmpegError("avformat_alloc_output_context2", message: "no context") }
        _ = try FragmentedMP4Muxer.addStreams(to: context, video: video, audio: audio)
        // Connects and publishes (blocking).
        try check("avio_open2(\(RTMPRelay.redacted(url)))", avio_open2(&context.pointee.pb, url, AVIO_FLAG_WRITE, nil, nil))
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        av_dict_set(&options, "flvflags", "no_duration_filesize", 0)
        try check("avformat_write_header(flv)", avformat_write_header(context, &options))
        packet = av_packet_alloc()
        guard packet != nil else { throw FFmpegError("av_packet_alloc", message: "out of memory") }
    }

    deinit {
        av_packet_free(&packet)
        if let context {
            if context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
            avformat_free_context(context)
        }
    }

    func write(_ data: ByteBuffer, stream: Int32, dts: Int64, pts: Int64, keyframe: Bool) throws(FFmpegError) {
        guard let packet, let context, stream == 0 || hasAudio else { return }
        guard dts > lastDTS[Int(stream)] else { return }
        lastDTS[Int(stream)] = dts
        try writePacket(data, using: packet, to: context, stream: stream, dts: dts, pts: pts, keyframe: keyframe, muxer: "flv")
    }

    func finish() throws(FFmpegError) {
        guard let context else { return }
        try check("av_write_trailer(flv)", av_write_trailer(context))
    }
}
