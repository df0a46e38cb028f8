import CFFmpeg
import CX264
#if canImport(Glibc)
import Glibc
#endif

/// H.264 straight through libx264's own API, for what libavcodec 5.1 cannot pass: which
/// macroblocks did not change since the previous picture (`mb_info` with `X264_MBINFO_CONSTANT`),
/// which the capture knows from the screen's damage. libx264 then skips its analysis there: a
/// still desktop costs what changes on it. Set up as FFmpeg 5.1's libx264 wrapper sets it up
/// (`libavcodec/libx264.c`: preset, CRF, keyframe limit, B-frames, colour description, global
/// headers, Annex B packets with the version SEI before the first), so that its packets and track
/// are the ones the libavcodec path makes. Owned by one `VideoEncoder`, used from its thread.
final class X264Encoder {
    private let handle: OpaquePointer
    /// SPS and PPS (Annex B): the track's extradata.
    let headers: [UInt8]
    /// x264's SEI (its version and options), put before the first packet as libavcodec does.
    private var versionSEI: [UInt8]?
    /// The pictures of reordering (the B-frame delay): the track's `has_b_frames`.
    let reorderDelay: Int32
    let level: Int32
    private var picture = x264_picture_t()

    /// `parameters` are x264's own `key=value:…` options, applied after the preset as
    /// libavcodec applies `x264-params`.
    init(settings: VideoEncoderSettings, keyframeLimit: Int, maximumBFrames: Int, parameters: String) throws(MediaError) {
        var param = x264_param_t()
        guard x264_param_default_preset(&param, settings.preset, settings.lowLatency ? "zerolatency" : nil) >= 0 else {
            throw MediaError(.encoderUnavailable, "libx264 has no preset \(settings.preset)")
        }
        // Its errors come back as return values; nothing is printed behind the logger's back.
        param.i_log_level = X264_LOG_NONE
        param.i_csp = X264_CSP_I420
        param.i_width = Int32(settings.width)
        param.i_height = Int32(settings.height)
        param.i_fps_num = UInt32(settings.framesPerSecond)
        param.i_fps_den = 1
        param.i_timebase_num = 1
        param.i_timebase_den = UInt32(settings.framesPerSecond)
        param.rc.i_rc_method = X264_RC_CRF
        param.rc.f_rf_constant = Float(settings.crf)
        param.i_keyint_max = Int32(keyframeLimit)
        param.i_bframe = Int32(maximumBFrames)
        param.b_repeat_headers = 0   // the headers go in the track (global header)
        param.b_annexb = 1
        param.vui.i_colmatrix = Int32(AVCOL_SPC_BT470BG.rawValue)
        param.vui.i_colorprim = Int32(AVCOL_PRI_BT709.rawValue)
        param.vui.i_transfer = Int32(AVCOL_TRC_IEC61966_2_1.rawValue)
        param.vui.b_fullrange = settings.fullRange ? 1 : 0
        param.analyse.b_mb_info = 1
        if let ceiling = settings.maximumBitrate {
            param.rc.i_vbv_max_bitrate = Int32(ceiling)
            param.rc.i_vbv_buffer_size = Int32(ceiling)
        }
        for option in parameters.split(separator: ":") {
            let pair = option.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2, x264_param_parse(&param, pair[0], pair[1]) == 0 else {
                throw MediaError(.encoderUnavailable, "libx264 refuses the option \(option)")
            }
        }
        guard x264_param_apply_profile(&param, "high") == 0 else {
            throw MediaError(.encoderUnavailable, "libx264 cannot encode these settings in the High profile")
        }
        guard let handle = ork_x264_encoder_open(&param) else {
            throw MediaError(.encoderUnavailable, "libx264 does not open for \(settings.width)x\(settings.height)@\(settings.framesPerSecond) preset \(settings.preset)")
        }
        self.handle = handle
        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        guard x264_encoder_headers(handle, &nals, &count) >= 0, let nals else {
            x264_encoder_close(handle)
            throw MediaError(.encoderUnavailable, "libx264 gave no stream headers")
        }
        var headers: [UInt8] = []
        for nal in UnsafeBufferPointer(start: nals, count: Int(count)) {
            let bytes = Array(UnsafeBufferPointer(start: nal.p_payload, count: Int(nal.i_payload)))
            // Not the SEI: libavcodec keeps it out of the extradata and sends it with the first picture.
            if nal.i_type == Int32(NAL_SEI.rawValue) { versionSEI = bytes } else { headers += bytes }
        }
        self.headers = headers
        x264_encoder_parameters(handle, &param)
        reorderDelay = param.i_bframe > 0 ? (param.i_bframe_pyramid != 0 ? 2 : 1) : 0
        level = param.i_level_idc
        x264_picture_init(&picture)
    }

    deinit {
        x264_encoder_close(handle)
    }

    /// Changes the VBV ceiling (kilobits a second, a second's buffer) from the next picture; false
    /// when the encoder was opened without one (libx264 cannot turn VBV on later) or refuses.
    func setMaximumBitrate(_ kilobits: Int) -> Bool {
        var param = x264_param_t()
        x264_encoder_parameters(handle, &param)
        guard param.rc.i_vbv_max_bitrate > 0, param.rc.i_vbv_buffer_size > 0 else { return false }
        param.rc.i_vbv_max_bitrate = Int32(kilobits)
        param.rc.i_vbv_buffer_size = Int32(kilobits)
        return x264_encoder_reconfig(handle, &param) == 0
    }

    /// Encodes `frame` (nil: flushes what libx264 holds) as `type` (`X264_TYPE_…`), handing each
    /// packet to `deliver` in `packet` (unreferenced after).
    func encode(_ frame: VideoFrame?, pts: Int64, type: Int32, into packet: UnsafeMutablePointer<AVPacket>,
                deliver: (UnsafeMutablePointer<AVPacket>) throws(MediaError) -> Void) throws(MediaError) {
        var output = x264_picture_t()
        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        if let frame {
            switch frame.layout {
            case .i420:
                let (y, u, v) = frame.planes
                let (ys, us, vs) = frame.strides
                picture.img.i_csp = X264_CSP_I420
                picture.img.i_plane = 3
                picture.img.plane = (y, u, v, nil)
                picture.img.i_stride = (Int32(ys), Int32(us), Int32(vs), 0)
            case .nv12:
                // libx264's own layout: copied as it is (I420 is interleaved on the way in).
                let (y, uv, ys, uvs) = frame.nv12Planes
                picture.img.i_csp = X264_CSP_NV12
                picture.img.i_plane = 2
                picture.img.plane = (y, uv, nil, nil)
                picture.img.i_stride = (Int32(ys), Int32(uvs), 0, 0)
            }
            picture.i_pts = pts
            picture.i_type = type
            picture.prop.mb_info = Self.unchangedMap(frame.changedBlocks)
            picture.prop.mb_info_free = { free($0) }
            let size = x264_encoder_encode(handle, &nals, &count, &picture, &output)
            picture.prop.mb_info = nil
            guard size >= 0 else { throw MediaError(.encoderFailed, "libx264 failed to encode a picture") }
            if size > 0 { try handOver(packet, nals: nals, count: count, size: size, picture: output, deliver) }
            return
        }
        while x264_encoder_delayed_frames(handle) > 0 {
            let size = x264_encoder_encode(handle, &nals, &count, nil, &output)
            guard size >= 0 else { throw MediaError(.encoderFailed, "libx264 failed while flushing") }
            if size > 0 { try handOver(packet, nals: nals, count: count, size: size, picture: output, deliver) }
        }
    }

    private func handOver(_ packet: UnsafeMutablePointer<AVPacket>, nals: UnsafeMutablePointer<x264_nal_t>?, count: Int32,
                         size: Int32, picture: x264_picture_t,
                         _ deliver: (UnsafeMutablePointer<AVPacket>) throws(MediaError) -> Void) throws(MediaError) {
        guard let nals, count > 0 else { return }
        let sei = versionSEI ?? []
        versionSEI = nil
        guard av_new_packet(packet, Int32(sei.count) + size) >= 0, let data = packet.pointee.data else {
            throw MediaError(.encoderFailed, "out of memory for an H.264 packet")
        }
        defer { av_packet_unref(packet) }
        if !sei.isEmpty { sei.withUnsafeBufferPointer { data.update(from: $0.baseAddress!, count: sei.count) } }
        // The NAL units of one picture lie one after the other in libx264's buffer.
        (data + sei.count).update(from: nals.pointee.p_payload, count: Int(size))
        packet.pointee.pts = picture.i_pts
        packet.pointee.dts = picture.i_dts
        if picture.b_keyframe != 0 { packet.pointee.flags |= AV_PKT_FLAG_KEY }
        try deliver(packet)
    }

    /// libx264's map for `changes`: `X264_MBINFO_CONSTANT` for each macroblock that did not
    /// change, in memory libx264 frees when done with the picture; nil when everything changed.
    private static func unchangedMap(_ changes: ChangedMacroblocks) -> UnsafeMutablePointer<UInt8>? {
        guard !changes.all, let map = malloc(changes.columns * changes.rows)?.assumingMemoryBound(to: UInt8.self) else { return nil }
        let constant = UInt8(X264_MBINFO_CONSTANT)
        for row in 0..<changes.rows {
            for column in 0..<changes.columns {
                map[row * changes.columns + column] = changes.isChanged(column: column, row: row) ? 0 : constant
            }
        }
        return map
    }
}
