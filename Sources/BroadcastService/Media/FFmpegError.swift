internal import CFFmpeg
internal import CReplayShim
import NIOCore

/// An error from FFmpeg: what we were doing, and FFmpeg's own code and text.
public struct FFmpegError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let code: Int32
    public let text: String

    init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
        var buffer = [CChar](repeating: 0, count: 256)
        ork_av_strerror(code, &buffer, buffer.count)
        self.text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    init(_ operation: String, message: String) {
        self.operation = operation
        self.code = 0
        self.text = message
    }

    public var description: String { "\(operation) failed: \(text) (\(code))" }
}

/// Checks an FFmpeg return code.
@discardableResult
func check(_ operation: @autoclosure () -> String, _ code: Int32) throws(FFmpegError) -> Int32 {
    guard code >= 0 else { throw FFmpegError(operation(), code: code) }
    return code
}

/// Copies `data` into `packet` as one packet of `stream` (times in milliseconds, rescaled to the
/// stream's time base) and writes it to `context`. The muxer and the relay both remux this way.
func writePacket(_ data: ByteBuffer, using packet: UnsafeMutablePointer<AVPacket>, to context: UnsafeMutablePointer<AVFormatContext>,
                 stream: Int32, dts: Int64, pts: Int64, duration: Int64 = 0, keyframe: Bool, muxer: String) throws(FFmpegError) {
    try check("av_new_packet", av_new_packet(packet, Int32(data.readableBytes)))
    defer { av_packet_unref(packet) }
    data.withUnsafeReadableBytes { raw in
        if let base = raw.baseAddress { packet.pointee.data.update(from: base.assumingMemoryBound(to: UInt8.self), count: raw.count) }
    }
    packet.pointee.stream_index = stream
    packet.pointee.dts = dts
    packet.pointee.pts = pts
    packet.pointee.duration = duration
    if keyframe { packet.pointee.flags |= AV_PKT_FLAG_KEY }
    let timeBase = context.pointee.streams[Int(stream)]!.pointee.time_base
    av_packet_rescale_ts(packet, AVRational(num: 1, den: 1000), timeBase)
    try check("av_write_frame(\(muxer))", av_write_frame(context, packet))
}
