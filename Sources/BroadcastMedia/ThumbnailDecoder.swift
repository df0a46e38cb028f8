internal import CFFmpeg
package import NIOCore
package import ReplayFFmpeg
import Synchronization

/// One H.264 keyframe as the ingest passed it: the access unit (AVCC NAL units) and the decoder
/// configuration (`avcC`) that goes with it.
package struct Keyframe: Sendable {
    package var avcC: [UInt8]
    package var data: ByteBuffer
    /// Process-wide number of this keyframe: a new one is a new picture.
    package var serial: Int
}

/// The latest keyframe of a live stream, kept for its thumbnail. The ingest only swaps a reference here
/// (about once a second); decoding happens when someone asks for the picture (`ThumbnailCache`).
package final class LatestKeyframe: Sendable {
    private static let serials = Atomic<Int>(0)
    private let keyframe = Mutex<Keyframe?>(nil)

    func update(avcC: [UInt8], data: ByteBuffer) {
        let serial = Self.serials.wrappingAdd(1, ordering: .relaxed).newValue
        keyframe.withLock { $0 = Keyframe(avcC: avcC, data: data, serial: serial) }
    }

    package var current: Keyframe? { keyframe.withLock { $0 } }
}

/// Decodes one H.264 keyframe with libavcodec, scales it with libswscale and encodes it as a JPEG
/// with libavcodec's MJPEG encoder, all in this process.
///
/// Blocking C work (tens of milliseconds for a 1080p keyframe): call it on a dedicated thread, never on
/// the cooperative pool or an event loop. Each call makes its own decoder, scaler and encoder (a still
/// every ~10 s does not need them kept), each freed by its one owner.
package enum ThumbnailDecoder {
    /// A JPEG of `keyframe`, `width` pixels wide (never wider than the picture) with the picture's aspect.
    package static func jpeg(of keyframe: Keyframe, width: Int, quality: Int32 = 4) throws(FFmpegError) -> [UInt8] {
        let picture = try decode(keyframe)
        // Each owner lives until the end of the call: its pointer is used after its last mention.
        defer { withExtendedLifetime(picture) {} }
        guard let source = picture.pointer else { throw FFmpegError("decode keyframe", message: "no frame") }
        let sourceWidth = Int(source.pointee.width), sourceHeight = Int(source.pointee.height)
        guard sourceWidth > 0, sourceHeight > 0 else { throw FFmpegError("decode keyframe", message: "empty picture") }
        let targetWidth = min(width, sourceWidth) & ~1
        let targetHeight = max(2, (targetWidth * sourceHeight / sourceWidth + 1) & ~1)
        let scaled = try scale(source, width: targetWidth, height: targetHeight)
        return try encodeJPEG(scaled, quality: quality)
    }

    /// The keyframe decoded (the decoder is drained: a keyframe alone makes one picture).
    static func decode(_ keyframe: Keyframe) throws(FFmpegError) -> Frame {
        guard !keyframe.avcC.isEmpty else { throw FFmpegError("decode keyframe", message: "no decoder configuration (avcC)") }
        guard let codec = avcodec_find_decoder(AV_CODEC_ID_H264) else { throw FFmpegError("avcodec_find_decoder(h264)", message: "no H.264 decoder") }
        let context = try CodecContext(codec)
        defer { withExtendedLifetime(context) {} }
        guard let c = context.pointer else { throw FFmpegError("avcodec_alloc_context3", message: "out of memory") }
        // One thread: frame threads would hold the picture back, and one still needs no parallelism.
        c.pointee.thread_count = 1
        guard let extradata = av_mallocz(keyframe.avcC.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else {
            throw FFmpegError("av_mallocz", message: "out of memory")
        }
        keyframe.avcC.withUnsafeBytes { extradata.copyMemory(from: $0.baseAddress!, byteCount: keyframe.avcC.count) }
        c.pointee.extradata = extradata.assumingMemoryBound(to: UInt8.self)
        c.pointee.extradata_size = Int32(keyframe.avcC.count)
        try check("avcodec_open2(h264)", avcodec_open2(c, codec, nil))

        let packet = try Packet()
        defer { withExtendedLifetime(packet) {} }
        guard let p = packet.pointer else { throw FFmpegError("av_packet_alloc", message: "out of memory") }
        try check("av_new_packet", av_new_packet(p, Int32(keyframe.data.readableBytes)))
        keyframe.data.withUnsafeReadableBytes { raw in
            if let base = raw.baseAddress { p.pointee.data.update(from: base.assumingMemoryBound(to: UInt8.self), count: raw.count) }
        }
        p.pointee.flags |= AV_PKT_FLAG_KEY
        p.pointee.pts = 0
        p.pointee.dts = 0
        try check("avcodec_send_packet(h264)", avcodec_send_packet(c, p))
        try check("avcodec_send_packet(h264, drain)", avcodec_send_packet(c, nil))
        let frame = try Frame()
        try check("avcodec_receive_frame(h264)", avcodec_receive_frame(c, frame.pointer))
        return frame
    }

    /// `source` scaled to `width`×`height` in full-range 4:2:0 (what JPEG means by YUV).
    static func scale(_ source: UnsafeMutablePointer<AVFrame>, width: Int, height: Int) throws(FFmpegError) -> Frame {
        // The J formats are deprecated in swscale: say "full range" with the plain format instead.
        var format = AVPixelFormat(source.pointee.format)
        var fullRange = source.pointee.color_range == AVCOL_RANGE_JPEG
        if format == AV_PIX_FMT_YUVJ420P { format = AV_PIX_FMT_YUV420P; fullRange = true }
        let scaler = Scaler(sws_getContext(source.pointee.width, source.pointee.height, format, Int32(width), Int32(height),
                                           AV_PIX_FMT_YUV420P, SWS_BILINEAR, nil, nil, nil))
        defer { withExtendedLifetime(scaler) {} }
        guard let s = scaler.pointer else { throw FFmpegError("sws_getContext", message: "cannot scale this picture's format") }
        var inverse: UnsafeMutablePointer<Int32>?, table: UnsafeMutablePointer<Int32>?
        var sourceRange: Int32 = 0, destinationRange: Int32 = 0, brightness: Int32 = 0, contrast: Int32 = 0, saturation: Int32 = 0
        _ = sws_getColorspaceDetails(s, &inverse, &sourceRange, &table, &destinationRange, &brightness, &contrast, &saturation)
        _ = sws_setColorspaceDetails(s, inverse, fullRange ? 1 : 0, table, 1, brightness, contrast, saturation)

        let scaled = try Frame()
        guard let d = scaled.pointer else { throw FFmpegError("av_frame_alloc", message: "out of memory") }
        d.pointee.width = Int32(width)
        d.pointee.height = Int32(height)
        d.pointee.format = AV_PIX_FMT_YUV420P.rawValue
        d.pointee.color_range = AVCOL_RANGE_JPEG
        try check("av_frame_get_buffer", av_frame_get_buffer(d, 0))
        try check("sws_scale_frame", sws_scale_frame(s, d, source))
        return scaled
    }

    /// `frame` (full-range YUV 4:2:0) as a baseline JPEG, at quantiser `quality` (2 best … 31 worst).
    static func encodeJPEG(_ frame: Frame, quality: Int32) throws(FFmpegError) -> [UInt8] {
        defer { withExtendedLifetime(frame) {} }
        guard let f = frame.pointer else { throw FFmpegError("encode JPEG", message: "no frame") }
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_MJPEG) else { throw FFmpegError("avcodec_find_encoder(mjpeg)", message: "no MJPEG encoder") }
        let context = try CodecContext(codec)
        defer { withExtendedLifetime(context) {} }
        guard let c = context.pointer else { throw FFmpegError("avcodec_alloc_context3", message: "out of memory") }
        c.pointee.width = f.pointee.width
        c.pointee.height = f.pointee.height
        c.pointee.pix_fmt = AV_PIX_FMT_YUV420P
        c.pointee.color_range = AVCOL_RANGE_JPEG
        c.pointee.time_base = AVRational(num: 1, den: 1)
        c.pointee.flags |= AV_CODEC_FLAG_QSCALE
        c.pointee.global_quality = FF_QP2LAMBDA * quality
        c.pointee.thread_count = 1
        try check("avcodec_open2(mjpeg)", avcodec_open2(c, codec, nil))
        f.pointee.quality = c.pointee.global_quality
        f.pointee.pict_type = AV_PICTURE_TYPE_I
        f.pointee.pts = 0
        try check("avcodec_send_frame(mjpeg)", avcodec_send_frame(c, f))
        try check("avcodec_send_frame(mjpeg, drain)", avcodec_send_frame(c, nil))
        let packet = try Packet()
        defer { withExtendedLifetime(packet) {} }
        try check("avcodec_receive_packet(mjpeg)", avcodec_receive_packet(c, packet.pointer))
        guard let p = packet.pointer, let data = p.pointee.data, p.pointee.size > 0 else {
            throw FFmpegError("encode JPEG", message: "no packet")
        }
        return Array(UnsafeBufferPointer(start: data, count: Int(p.pointee.size)))
    }

    // MARK: Owners of the C handles (one each, freed in deinit)

    final class CodecContext {
        private(set) var pointer: UnsafeMutablePointer<AVCodecContext>?
        init(_ codec: UnsafePointer<AVCodec>) throws(FFmpegError) {
            pointer = avcodec_alloc_context3(codec)
            guard pointer != nil else { throw FFmpegError("avcodec_alloc_context3", message: "out of memory") }
        }
        deinit { avcodec_free_context(&pointer) }
    }

    final class Frame {
        private(set) var pointer: UnsafeMutablePointer<AVFrame>?
        init() throws(FFmpegError) {
            pointer = av_frame_alloc()
            guard pointer != nil else { throw FFmpegError("av_frame_alloc", message: "out of memory") }
        }
        deinit { av_frame_free(&pointer) }
    }

    final class Packet {
        private(set) var pointer: UnsafeMutablePointer<AVPacket>?
        init() throws(FFmpegError) {
            pointer = av_packet_alloc()
            guard pointer != nil else { throw FFmpegError("av_packet_alloc", message: "out of memory") }
        }
        deinit { av_packet_free(&pointer) }
    }

    final class Scaler {
        let pointer: OpaquePointer?
        init(_ pointer: OpaquePointer?) { self.pointer = pointer }
        deinit { sws_freeContext(pointer) }
    }
}
