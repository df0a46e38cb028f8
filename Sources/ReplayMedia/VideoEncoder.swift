import CFFmpeg
import CX264
import CYUV
import ReplayFFmpeg
package import Logging
#if canImport(Glibc)
import Glibc
#endif

/// What the H.264 encoder is asked for.
public struct VideoEncoderSettings: Sendable, Equatable {
    /// `x264`: libx264 through its own API, told which macroblocks did not change (the default);
    /// `libavcodecX264`: the same libx264 through libavcodec, which cannot tell it (kept to compare);
    /// `vaapi`: h264_vaapi on a render node.
    public enum Backend: String, Sendable { case x264, libavcodecX264, vaapi }
    public var width: Int
    public var height: Int
    public var framesPerSecond: Int
    /// libx264 preset (`veryfast` for the default quality, like OBS for screen content).
    public var preset: String
    /// Constant rate factor (x264) or QP (VA-API): lower is sharper and larger.
    public var crf: Int
    /// Seconds' worth of pictures between keyframes (this × `framesPerSecond` pictures; longer in
    /// time where the screen was still, as a picture comes only when it changed).
    public var keyframeIntervalSeconds: Double = 2
    public var backend: Backend = .x264
    /// The pictures' levels: false, video range (16…235, what the capture's `ARGBToI420` makes);
    /// true, full range (0…255, the frame ring's '420f' NV12 that a broadcast extension encodes).
    /// The stream says which, so that players show the levels as they were.
    public var fullRange = false
    /// For a live stream (a broadcast extension): libx264's `zerolatency` tune, no look-ahead, no
    /// B-frames, each picture split over the threads as slices: a picture leaves the encoder as soon
    /// as it is encoded, and the encoder holds one picture instead of eight (what keeps an upload
    /// extension under its memory limit), for somewhat larger pictures. Above 1280x720 also
    /// full-pixel motion search only (`subme=0`: no half-pixel planes). Figures: docs/ENCODER.md.
    public var lowLatency = false
    /// A ceiling in kilobits a second (x264's VBV, over a second's buffer) on top of the constant
    /// rate factor, for a live stream whose link may be slower; nil: none. libx264 (`.x264`)
    /// takes a new one while it runs (`VideoEncoder.setMaximumBitrate`).
    public var maximumBitrate: Int?
    /// libx264 (`.x264`) set up again at keyframes for what the screen does (`X264Encoder.Activity`,
    /// a recording starts as a desktop in use); false: the busy set-up throughout, libavcodec's
    /// (to compare the two). A live stream and an encoder under a ceiling keep the busy one anyway.
    package var adaptsToActivity = true

    public init(width: Int, height: Int, framesPerSecond: Int, preset: String, crf: Int) {
        self.width = width
        self.height = height
        self.framesPerSecond = framesPerSecond
        self.preset = preset
        self.crf = crf
    }
}

/// H.264: libx264 through its own API (`X264Encoder`, which takes the capture's map of unchanged
/// macroblocks), or through libavcodec (libx264, or h264_vaapi on a working render node). Owns its
/// codec context (for the libx264 API only the track's description); used from one thread (the
/// video encoder loop).
package final class VideoEncoder: @unchecked Sendable {
    package let settings: VideoEncoderSettings
    package let name: String
    let context: UnsafeMutablePointer<AVCodecContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    private var hardwareDevice: UnsafeMutablePointer<AVBufferRef>?
    private var uploadFrame: UnsafeMutablePointer<AVFrame>?  // NV12 staging (VA-API)
    private var hardwareFrame: UnsafeMutablePointer<AVFrame>?
    private var x264: X264Encoder?
    /// Pictures between two keyframes; libx264's are forced here (see `encode`).
    private let keyframeInterval: Int
    private var picturesSinceKeyframe: Int

    /// What libx264 is set up for now (nil: not libx264 through its own API).
    var x264Activity: X264Encoder.Activity? { x264?.activity }

    /// The first working VA-API render node, or nil (logged) when there is none.
    package static func vaapiRenderNode(logger: Logger) -> String? {
        guard avcodec_find_encoder_by_name("h264_vaapi") != nil else {
            logger.info("VA-API: this FFmpeg has no h264_vaapi encoder")
            return nil
        }
        for index in 128..<136 {
            let path = "/dev/dri/renderD\(index)"
            guard access(path, R_OK | W_OK) == 0 else { continue }
            var device: UnsafeMutablePointer<AVBufferRef>?
            let status = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_VAAPI, path, nil, 0)
            av_buffer_unref(&device)
            if status >= 0 { return path }
            logger.info("VA-API: \(path) does not work: \(AVErrorCode(rawValue: status))")
        }
        logger.info("VA-API: no working render node under /dev/dri")
        return nil
    }

    package init(settings: VideoEncoderSettings, renderNode: String? = nil, logger: Logger) throws(MediaError) {
        let codecName = settings.backend == .vaapi ? "h264_vaapi" : "libx264"
        let codec = settings.backend == .x264 ? nil : avcodec_find_encoder_by_name(codecName)
        guard settings.backend == .x264 || codec != nil else {
            throw MediaError(.encoderUnavailable, "this FFmpeg has no \(codecName) encoder")
        }
        guard let context = avcodec_alloc_context3(codec), let packet = av_packet_alloc() else {
            fatalError("out of memory allocating the H.264 encoder")
        }
        self.context = context
        self.packet = packet
        self.settings = settings
        self.name = codecName

        context.pointee.width = Int32(settings.width)
        context.pointee.height = Int32(settings.height)
        // Times are frame ticks: a picture's pts is the index of the tick it was captured at (frames
        // of an unchanged screen are skipped, so indices have gaps), and every duration is exact.
        context.pointee.time_base = AVRational(num: 1, den: Int32(settings.framesPerSecond))
        context.pointee.framerate = AVRational(num: Int32(settings.framesPerSecond), den: 1)
        keyframeInterval = Int(max(1.0, Double(settings.framesPerSecond) * settings.keyframeIntervalSeconds))
        picturesSinceKeyframe = keyframeInterval   // the first picture is a keyframe
        // libx264 would place its keyframe where `encode` forces a P-frame, and warn that it changed
        // the type; so `encode` forces every keyframe, and libx264's own limit lies one beyond.
        context.pointee.gop_size = Int32(keyframeInterval + (settings.backend == .vaapi ? 0 : 1))
        context.pointee.max_b_frames = settings.backend == .vaapi || settings.lowLatency ? 0 : 1
        context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER
        context.pointee.colorspace = AVCOL_SPC_BT470BG
        context.pointee.color_range = settings.fullRange ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        context.pointee.color_primaries = AVCOL_PRI_BT709
        context.pointee.color_trc = AVCOL_TRC_IEC61966_2_1

        // A short look-ahead keeps the macroblock tree (without it, full-motion files doubled and
        // cost more CPU to write) while x264 holds few frames: on a still screen the pipeline
        // pushes a change through with repeats, which cost x264 several milliseconds each. Three
        // frames made files no bigger than veryfast's ten. One B-frame without the adaptive
        // decision, and only where most of the screen changed (`encode`). No scene-cut keyframes:
        // `encode` places every keyframe, and the search for cuts costs CPU for nothing.
        // No weighted prediction (veryfast's weightp=1): its analysis costs every picture for
        // nothing on screen content, and libx264 takes the map of unchanged macroblocks only
        // without weights. Figures: docs/ENCODER.md.
        // Live above 720p: full-pixel motion search only (subme=0). libx264 then keeps no half-pixel
        // planes beside each reference (three more luma planes a picture: 14 MB at 1080p, what brings
        // an upload extension under its memory limit) and spends a third less CPU. At the same
        // bitrate ceiling a desktop kept its SSIM and size; full motion lost 1.6 dB PSNR, not visible
        // side by side (docs/lab-notes/2026-11-24-upload-extensions.md).
        let liveParameters = "scenecut=0:weightp=0" + (settings.width * settings.height > Self.fullPixelSearchAbove ? ":subme=0" : "")
        // Stitchable: the headers do not follow the rate control, so that the recorder's libx264 set
        // up for another activity (`X264Encoder.Activity`) writes the same ones (libavcodec's gets
        // it too, to compare).
        let x264Parameters = settings.lowLatency ? liveParameters : Self.recordingX264Parameters
        if settings.backend == .x264 {
            let x264 = try X264Encoder(settings: settings, keyframeLimit: Int(context.pointee.gop_size),
                                       maximumBFrames: Int(context.pointee.max_b_frames), parameters: x264Parameters,
                                       logger: logger)
            self.x264 = x264
            // What a destination copies into its track, as libavcodec's wrapper fills it in.
            context.pointee.codec_type = AVMEDIA_TYPE_VIDEO
            context.pointee.codec_id = AV_CODEC_ID_H264
            context.pointee.pix_fmt = AV_PIX_FMT_YUV420P
            context.pointee.profile = FF_PROFILE_H264_HIGH
            context.pointee.level = x264.level
            context.pointee.has_b_frames = x264.reorderDelay
            guard let extradata = av_mallocz(x264.headers.count + Int(AV_INPUT_BUFFER_PADDING_SIZE))?.assumingMemoryBound(to: UInt8.self) else {
                fatalError("out of memory for the H.264 headers")
            }
            x264.headers.withUnsafeBufferPointer { extradata.update(from: $0.baseAddress!, count: $0.count) }
            context.pointee.extradata = extradata
            context.pointee.extradata_size = Int32(x264.headers.count)
            logger.info("video encoder libx264 (its own API, told the unchanged macroblocks) \(settings.width)x\(settings.height)@\(settings.framesPerSecond) preset \(settings.preset) crf \(settings.crf)")
            return
        }
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        if settings.backend == .vaapi {
            guard let node = renderNode else {
                throw MediaError(.encoderUnavailable, "no working VA-API render node")
            }
            try openVAAPI(node: node, options: &options)
        } else {
            context.pointee.pix_fmt = AV_PIX_FMT_YUV420P
            av_dict_set(&options, "preset", settings.preset, 0)
            av_dict_set(&options, "crf", String(settings.crf), 0)
            av_dict_set(&options, "profile", "high", 0)
            if settings.lowLatency { av_dict_set(&options, "tune", "zerolatency", 0) }
            av_dict_set(&options, "x264-params", x264Parameters, 0)
        }
        let status = avcodec_open2(context, codec, &options)
        guard status >= 0 else {
            throw MediaError(.encoderUnavailable, "could not open the \(codecName) encoder: \(AVErrorCode(rawValue: status))")
        }
        logger.info("video encoder \(codecName) \(settings.width)x\(settings.height)@\(settings.framesPerSecond) preset \(settings.preset) crf \(settings.crf)")
    }

    private func openVAAPI(node: String, options: inout OpaquePointer?) throws(MediaError) {
        var device: UnsafeMutablePointer<AVBufferRef>?
        var status = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_VAAPI, node, nil, 0)
        guard status >= 0, let device else {
            throw MediaError(.encoderUnavailable, "VA-API device \(node) does not open: \(AVErrorCode(rawValue: status))")
        }
        hardwareDevice = device
        guard let framesRef = av_hwframe_ctx_alloc(device) else { fatalError("out of memory (VA-API frames)") }
        let frames = UnsafeMutableRawPointer(framesRef.pointee.data!).assumingMemoryBound(to: AVHWFramesContext.self)
        frames.pointee.format = AV_PIX_FMT_VAAPI
        frames.pointee.sw_format = AV_PIX_FMT_NV12
        frames.pointee.width = Int32(settings.width)
        frames.pointee.height = Int32(settings.height)
        // A fixed pool of surfaces the pictures are uploaded to, as many as FFmpeg's own example
        // (doc/examples/vaapi_encode.c) gives the encoder to hold while it works ahead.
        frames.pointee.initial_pool_size = 20
        status = av_hwframe_ctx_init(framesRef)
        guard status >= 0 else {
            var ref: UnsafeMutablePointer<AVBufferRef>? = framesRef
            av_buffer_unref(&ref)
            throw MediaError(.encoderUnavailable, "VA-API frames on \(node) do not initialise: \(AVErrorCode(rawValue: status))")
        }
        context.pointee.pix_fmt = AV_PIX_FMT_VAAPI
        context.pointee.hw_frames_ctx = framesRef
        av_dict_set(&options, "qp", String(settings.crf), 0)
        guard let upload = av_frame_alloc() else { fatalError("out of memory (VA-API staging picture)") }
        uploadFrame = upload
        upload.pointee.format = AV_PIX_FMT_NV12.rawValue
        upload.pointee.width = Int32(settings.width)
        upload.pointee.height = Int32(settings.height)
        guard av_frame_get_buffer(upload, 64) >= 0 else { fatalError("out of memory (VA-API staging picture)") }
        hardwareFrame = av_frame_alloc()
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
        av_frame_free(&uploadFrame)
        av_frame_free(&hardwareFrame)
        av_buffer_unref(&hardwareDevice)
    }

    /// libx264's own options for a recording, after the preset (`init` says why each);
    /// `replay-bench reencode` starts from them too.
    package static let recordingX264Parameters = "rc-lookahead=3:sync-lookahead=0:b-adapt=0:scenecut=0:weightp=0:stitchable=1"

    /// A live encoder (`lowLatency`) of more pixels than this (1280x720) searches motion in whole pixels only.
    static let fullPixelSearchAbove = 1280 * 720

    /// A picture may become a B-frame only when at least this share of it changed. A B-frame pays
    /// where the whole picture moves (a video, a game); on a desktop most pictures change a little,
    /// and as B-frames they cost libx264 more for nothing (docs/ENCODER.md), so those are forced to be P. The
    /// capture's share counts whole boxes it read (a terminal and a clock far apart make one box
    /// over half the screen), hence three quarters.
    static let bidirectionalShare = 0.75

    /// The track this encoder's packets make, for a destination to add.
    package func trackFormat(name: String) -> TrackFormat {
        TrackFormat(kind: .video, name: name, codec: context, timeBase: context.pointee.time_base)
    }

    /// Encodes one picture stamped `pts` (its frame tick), or flushes when `frame` is nil, and hands
    /// every packet that comes out to `outputs` (packet times in frame ticks). Returns the latest
    /// tick that came out (the encoder holds pictures for its look-ahead), nil when none did.
    @discardableResult
    package func encode(_ frame: VideoFrame?, pts: Int64, to outputs: TrackOutputs) throws(MediaError) -> Int64? {
        let timeBase = context.pointee.time_base
        var latest: Int64?
        try encode(frame, pts: pts) { packet throws(MediaError) in
            latest = max(latest ?? .min, packet.pointee.pts)
            try outputs.write(EncodedPacket(packet: packet, timeBase: timeBase, defaultDuration: 1))
        }
        return latest
    }

    private func encode(_ frame: VideoFrame?, pts: Int64,
                        deliver: (UnsafeMutablePointer<AVPacket>) throws(MediaError) -> Void) throws(MediaError) {
        if let x264 {
            let type: Int32 = switch frame.map(pictureType(for:)) {
            case AV_PICTURE_TYPE_I: X264_TYPE_KEYFRAME
            case AV_PICTURE_TYPE_P: X264_TYPE_P
            default: X264_TYPE_AUTO
            }
            return try x264.encode(frame, pts: pts, type: type, into: packet, deliver: deliver)
        }
        var status: Int32
        if let frame {
            guard frame.layout == .i420 else {
                throw MediaError(.encoderFailed, "the \(name) encoder takes I420 pictures; NV12 goes to libx264 through its own API only")
            }
            let input = try prepareInput(frame)
            input.pointee.pts = pts
            input.pointee.pict_type = pictureType(for: frame)
            status = avcodec_send_frame(context, input)
        } else {
            status = avcodec_send_frame(context, nil)
        }
        guard status >= 0 || status == AVErrorCode.endOfFile.rawValue else {
            throw MediaError(.encoderFailed, "the \(name) encoder refused a picture: \(AVErrorCode(rawValue: status))")
        }
        while true {
            status = avcodec_receive_packet(context, packet)
            if status == AVErrorCode.again.rawValue || status == AVErrorCode.endOfFile.rawValue { return }
            guard status >= 0 else {
                throw MediaError(.encoderFailed, "the \(name) encoder failed: \(AVErrorCode(rawValue: status))")
            }
            defer { av_packet_unref(packet) }
            try deliver(packet)
        }
    }

    /// The next picture is a keyframe (a new connection starts there), and the count to the next restarts.
    package func requestKeyframe() {
        picturesSinceKeyframe = keyframeInterval
    }

    /// A new bitrate ceiling (kilobits a second) from the next picture on; false when this encoder
    /// cannot change it while running (only libx264 through its own API, opened with a ceiling, can).
    @discardableResult
    package func setMaximumBitrate(_ kilobits: Int) -> Bool {
        x264?.setMaximumBitrate(kilobits) ?? false
    }

    /// libx264's: a keyframe every `keyframeInterval` pictures (sooner where libx264 is to be set
    /// up for another activity, `X264Encoder.wantsEarlyKeyframe`), else P unless most of it changed.
    /// VA-API places its own.
    private func pictureType(for frame: VideoFrame) -> AVPictureType {
        guard settings.backend != .vaapi else { return AV_PICTURE_TYPE_NONE }
        if picturesSinceKeyframe >= keyframeInterval || x264?.wantsEarlyKeyframe == true {
            picturesSinceKeyframe = 1
            return AV_PICTURE_TYPE_I
        }
        picturesSinceKeyframe += 1
        return frame.changedFraction < Self.bidirectionalShare ? AV_PICTURE_TYPE_P : AV_PICTURE_TYPE_NONE
    }

    private func prepareInput(_ frame: VideoFrame) throws(MediaError) -> UnsafeMutablePointer<AVFrame> {
        guard let upload = uploadFrame, let hardware = hardwareFrame else { return frame.frame }
        let (y, u, v) = frame.planes
        let (ys, us, vs) = frame.strides
        _ = I420ToNV12(y, Int32(ys), u, Int32(us), v, Int32(vs),
                       upload.pointee.data.0, upload.pointee.linesize.0,
                       upload.pointee.data.1, upload.pointee.linesize.1,
                       Int32(settings.width), Int32(settings.height))
        av_frame_unref(hardware)
        var status = av_hwframe_get_buffer(context.pointee.hw_frames_ctx, hardware, 0)
        if status >= 0 { status = av_hwframe_transfer_data(hardware, upload, 0) }
        guard status >= 0 else {
            throw MediaError(.encoderFailed, "uploading a picture to VA-API failed: \(AVErrorCode(rawValue: status))")
        }
        return hardware
    }
}
