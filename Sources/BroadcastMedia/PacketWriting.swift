internal import CFFmpeg
import NIOCore
internal import ReplayFFmpeg

/// Copies `data` into `packet` as one packet of `stream` (times in milliseconds, rescaled to the
/// stream's time base) and writes it to `output`. The muxer and the relay both remux this way.
/// `newExtradata` (the relay's new H.264 configuration) goes with the packet as libavformat's
/// `AV_PKT_DATA_NEW_EXTRADATA`, which the FLV muxer writes as a new sequence header before it.
func writePacket(_ data: ByteBuffer, using packet: UnsafeMutablePointer<AVPacket>, to output: FormatOutput,
                 stream: Int32, dts: Int64, pts: Int64, duration: Int64 = 0, keyframe: Bool,
                 newExtradata: [UInt8]? = nil) throws(FFmpegError) {
    try check("av_new_packet", av_new_packet(packet, Int32(data.readableBytes)))
    defer { av_packet_unref(packet) }
    data.withUnsafeReadableBytes { raw in
        if let base = raw.baseAddress { packet.pointee.data.update(from: base.assumingMemoryBound(to: UInt8.self), count: raw.count) }
    }
    if let newExtradata, !newExtradata.isEmpty {
        guard let side = av_packet_new_side_data(packet, AV_PKT_DATA_NEW_EXTRADATA, newExtradata.count) else {
            throw FFmpegError("av_packet_new_side_data", message: "out of memory")
        }
        newExtradata.withUnsafeBufferPointer { side.update(from: $0.baseAddress!, count: newExtradata.count) }
    }
    packet.pointee.stream_index = stream
    packet.pointee.dts = dts
    packet.pointee.pts = pts
    packet.pointee.duration = duration
    if keyframe { packet.pointee.flags |= AV_PKT_FLAG_KEY }
    av_packet_rescale_ts(packet, AVRational(num: 1, den: 1000), output.timeBase(of: stream))
    try output.write(packet)
}
