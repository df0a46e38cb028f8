// H.264 for OpenReplayKit's VideoToolbox subset (`VTCompressionSession`): libx264 through its own
// API, set up as a live encoder is (no look-ahead, no B-frames: each picture comes out of the call
// that took it), giving AVCC (4-byte big-endian lengths before each NAL unit) and the SPS and PPS
// apart, as VideoToolbox gives them. No C type leaves this file: callers see plain Swift values.
import CX264
import CYUV

/// How a compressor is set up: VideoToolbox's session properties in libx264's terms.
package struct H264CompressorSettings: Sendable, Equatable {
    package enum Profile: String, Sendable { case baseline, main, high }

    package var width: Int
    package var height: Int
    /// Pictures a second the rate control plans for (`ExpectedFrameRate`; 30 when not given).
    package var framesPerSecond: Double = 30
    package var profile: Profile = .high
    /// `level_idc` (31 for 3.1); nil: libx264 picks it (`…_AutoLevel`).
    package var level: Int?
    /// Average bits a second (`AverageBitRate`); nil: constant rate factor 23.
    package var averageBitRate: Int?
    /// A ceiling: `bytes` in every `seconds` (`DataRateLimits`); nil: none.
    package var dataRateLimit: (bytes: Int, seconds: Double)? {
        get { limitBytes.map { ($0, limitSeconds) } }
        set {
            limitBytes = newValue?.bytes
            limitSeconds = newValue?.seconds ?? 0
        }
    }
    private var limitBytes: Int?
    private var limitSeconds: Double = 0
    /// Pictures between keyframes at most (`MaxKeyFrameInterval`, `MaxKeyFrameIntervalDuration`); nil: libx264's 250.
    package var maximumKeyframeInterval: Int?
    /// Full-range levels ('420f'); false: video range ('420v', and what a BGRA picture is converted to).
    package var fullRange = false

    package init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }
}

/// One picture handed to the compressor: its planes as the caller's pixel buffer lays them out,
/// read during `encode` only.
package enum H264CompressorInput {
    /// Luma, then Cb Cr interleaved: libx264's own layout, taken without a conversion.
    case nv12(luma: UnsafeRawPointer, lumaStride: Int, chroma: UnsafeRawPointer, chromaStride: Int)
    /// 32-bit B G R A: converted into the compressor's one I420 picture (libx264 takes no RGB for 4:2:0).
    case bgra(UnsafeRawPointer, stride: Int)
}

/// One encoded picture: its NAL units in AVCC, and whether it is a keyframe (an IDR picture).
package struct H264CompressedPicture: Sendable {
    package var bytes: [UInt8]
    package var isKeyframe: Bool
    /// The `pts` it was encoded with.
    package var pts: Int64
}

/// A compressor failure, in words.
package struct H264CompressorError: Error, Sendable, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}

/// libx264, open for one picture size. Owns its `x264_t` and its I420 staging picture (for BGRA);
/// used from one queue at a time (the session's).
package final class H264Compressor {
    private let handle: OpaquePointer
    package let settings: H264CompressorSettings
    /// SPS and PPS, without start codes or lengths.
    package let parameterSets: [[UInt8]]
    private var picture = x264_picture_t()
    /// The I420 picture a BGRA input is converted into, allocated on the first such input.
    private var staging: UnsafeMutableRawBufferPointer?

    package init(settings: H264CompressorSettings) throws(H264CompressorError) {
        var param = x264_param_t()
        guard x264_param_default_preset(&param, "veryfast", "zerolatency") >= 0 else {
            throw H264CompressorError("libx264 has no preset veryfast")
        }
        param.i_log_level = X264_LOG_NONE
        param.i_csp = X264_CSP_I420
        param.i_width = Int32(settings.width)
        param.i_height = Int32(settings.height)
        // Rates as a fraction of whole thousandths (29.97 stays 29.97).
        param.i_fps_num = UInt32(max(1, (settings.framesPerSecond * 1000).rounded()))
        param.i_fps_den = 1000
        param.i_timebase_num = param.i_fps_den
        param.i_timebase_den = param.i_fps_num
        param.b_vfr_input = 0
        if let keyframes = settings.maximumKeyframeInterval {
            param.i_keyint_max = Int32(max(1, keyframes))
            param.i_keyint_min = min(param.i_keyint_min, param.i_keyint_max)
        }
        if let bitRate = settings.averageBitRate {
            param.rc.i_rc_method = X264_RC_ABR
            param.rc.i_bitrate = Int32(max(1, bitRate / 1000))
        } else {
            param.rc.i_rc_method = X264_RC_CRF
            param.rc.f_rf_constant = 23
        }
        if let limit = settings.dataRateLimit, limit.seconds > 0 {
            let kilobits = Int32(max(1, Double(limit.bytes) * 8 / limit.seconds / 1000))
            param.rc.i_vbv_max_bitrate = kilobits
            param.rc.i_vbv_buffer_size = Int32(max(1, Double(kilobits) * limit.seconds))
        }
        param.b_repeat_headers = 0   // the SPS and PPS go in the format description
        param.b_annexb = 0           // AVCC: a 4-byte length before each NAL unit
        param.b_aud = 0
        param.vui.b_fullrange = settings.fullRange ? 1 : 0
        param.vui.i_colmatrix = 5    // BT.470BG (BT.601), what the ring's and libyuv's conversions use
        param.vui.i_colorprim = 1    // BT.709
        param.vui.i_transfer = 13    // sRGB (IEC 61966-2-1)
        if let level = settings.level { param.i_level_idc = Int32(level) }
        guard x264_param_apply_profile(&param, settings.profile.rawValue) >= 0 else {
            throw H264CompressorError("libx264 cannot encode the \(settings.profile.rawValue) profile with these settings")
        }
        guard let handle = ork_x264_encoder_open(&param) else {
            throw H264CompressorError("libx264 does not open for \(settings.width)x\(settings.height)")
        }
        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        guard x264_encoder_headers(handle, &nals, &count) >= 0, let nals else {
            x264_encoder_close(handle)
            throw H264CompressorError("libx264 gave no stream headers")
        }
        var sets: [[UInt8]] = []
        for nal in UnsafeBufferPointer(start: nals, count: Int(count))
        where nal.i_type == Int32(NAL_SPS.rawValue) || nal.i_type == Int32(NAL_PPS.rawValue) {
            // Each payload starts with its 4-byte length (b_annexb = 0).
            sets.append(Array(UnsafeBufferPointer(start: nal.p_payload + 4, count: Int(nal.i_payload) - 4)))
        }
        self.handle = handle
        self.settings = settings
        self.parameterSets = sets
        x264_picture_init(&picture)
    }

    deinit {
        x264_encoder_close(handle)
        staging?.deallocate()
    }

    /// Encodes one picture stamped `pts` (in any unit: it comes back as given); `keyframe` forces an
    /// IDR picture. Returns the picture libx264 gave back (nil when it held it, which this set-up does not).
    package func encode(_ input: H264CompressorInput, pts: Int64, keyframe: Bool) throws(H264CompressorError) -> H264CompressedPicture? {
        let width = settings.width, height = settings.height
        switch input {
        case let .nv12(luma, lumaStride, chroma, chromaStride):
            picture.img.i_csp = X264_CSP_NV12
            picture.img.i_plane = 2
            picture.img.plane = (UnsafeMutablePointer(mutating: luma.assumingMemoryBound(to: UInt8.self)),
                                 UnsafeMutablePointer(mutating: chroma.assumingMemoryBound(to: UInt8.self)), nil, nil)
            picture.img.i_stride = (Int32(lumaStride), Int32(chromaStride), 0, 0)
        case let .bgra(pixels, stride):
            let chromaWidth = (width + 1) / 2, chromaHeight = (height + 1) / 2
            let buffer = staging ?? UnsafeMutableRawBufferPointer.allocate(byteCount: width * height + 2 * chromaWidth * chromaHeight,
                                                                          alignment: 64)
            staging = buffer
            let y = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let u = y + width * height, v = u + chromaWidth * chromaHeight
            let source = pixels.assumingMemoryBound(to: UInt8.self)
            // libyuv's "ARGB" is B G R A in memory.
            let status = settings.fullRange
                ? ARGBToJ420(source, Int32(stride), y, Int32(width), u, Int32(chromaWidth), v, Int32(chromaWidth), Int32(width), Int32(height))
                : ARGBToI420(source, Int32(stride), y, Int32(width), u, Int32(chromaWidth), v, Int32(chromaWidth), Int32(width), Int32(height))
            guard status == 0 else { throw H264CompressorError("libyuv could not convert a BGRA picture") }
            picture.img.i_csp = X264_CSP_I420
            picture.img.i_plane = 3
            picture.img.plane = (y, u, v, nil)
            picture.img.i_stride = (Int32(width), Int32(chromaWidth), Int32(chromaWidth), 0)
        }
        picture.i_pts = pts
        picture.i_type = keyframe ? X264_TYPE_IDR : X264_TYPE_AUTO
        var output = x264_picture_t()
        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        let size = x264_encoder_encode(handle, &nals, &count, &picture, &output)
        picture.img.plane = (nil, nil, nil, nil)
        guard size >= 0 else { throw H264CompressorError("libx264 failed to encode a picture") }
        guard size > 0, let nals else { return nil }
        // The NAL units of one picture lie one after the other in libx264's buffer.
        let bytes = Array(UnsafeBufferPointer(start: nals.pointee.p_payload, count: Int(size)))
        return H264CompressedPicture(bytes: bytes, isKeyframe: output.b_keyframe != 0, pts: output.i_pts)
    }

    /// A new average bitrate and ceiling from the next picture on (a live stream adapting to its link);
    /// false when libx264 refused them.
    package func reconfigure(averageBitRate: Int?, dataRateLimit: (bytes: Int, seconds: Double)?) -> Bool {
        var param = x264_param_t()
        x264_encoder_parameters(handle, &param)
        if let averageBitRate, param.rc.i_rc_method == X264_RC_ABR {
            param.rc.i_bitrate = Int32(max(1, averageBitRate / 1000))
        }
        if let limit = dataRateLimit, limit.seconds > 0 {
            let kilobits = Int32(max(1, Double(limit.bytes) * 8 / limit.seconds / 1000))
            param.rc.i_vbv_max_bitrate = kilobits
            param.rc.i_vbv_buffer_size = Int32(max(1, Double(kilobits) * limit.seconds))
        }
        return x264_encoder_reconfig(handle, &param) == 0
    }
}
