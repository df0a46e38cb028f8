internal import CFFmpeg
import NIOCore
internal import ReplayFFmpeg

/// Copies `data` into `packet` as one packet of `stream` (times in milliseconds, rescaled to the
/// stream's time base) and writes it to `output`. The muxer and the relay both remux this way.
func writePacket(_ data: ByteBuffer, using packet: UnsafeMutablePointer<AVPacket>, to output: FormatOutput,
                 stream: Int32, dts: Int64, pts: Int64, duration: Int64 = 0, keyframe: Bool) throws(FFmpegError) {
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
    av_packet_rescale_ts(packet, AVRational(num: 1, den: 1000), output.timeBase(of: stream))
    try output.write(packet)
}
