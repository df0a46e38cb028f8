import CFFmpeg
import CX264
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// H.264 through libx264's own API, for what libavcodec 5.1 cannot pass: the macroblocks that did
/// not change (`mb_info`, from the screen's damage), which libx264 then skips. Set up as FFmpeg's
/// libx264 wrapper sets it up, so its packets and track are the libavcodec path's. Owned by one
/// `VideoEncoder`, used from its thread.
///
/// A recording sets libx264 up again at keyframes for what the screen did since the last one
/// (`Activity`); each set-up is opened `stitchable`, so one track holds them all. docs/ENCODER.md
/// says why each set-up is what it is, and what was measured.
final class X264Encoder {
    /// What the screen did between two keyframes, and how libx264 is set up for the next ones.
    enum Activity: Equatable, Sendable {
        /// A video, a game, the whole screen moving: the rate factor with look-ahead, macroblock
        /// tree and frame threads.
        case busy
        /// A desktop in use: the busy set-up with whole-pixel motion search and no deblocking
        /// filter (screen content moves by whole pixels; the filter blurs text), while its pictures
        /// stay under `desktopCostLimit`.
        case desktop
        /// Little changes: a constant quantiser, no look-ahead, no deblocking, one thread.
        case still
    }

    /// The constant quantiser of the still set-up lies this far above the rate factor.
    static let stillQuantiserOffset = 3
    /// Below this share of changed macroblocks (averaged since the last keyframe) the screen is still.
    static let stillShare = 0.05
    /// The first set-up decision comes after this many pictures (an early keyframe), so that a
    /// still screen or a playing video does not wait for the first keyframe interval.
    static let firstDecisionPictures = 8
    /// On the still or desktop set-up, this many busy pictures in a row bring an early keyframe:
    /// a video that starts playing is not left on one thread.
    static let busyDecisionPictures = 8
    /// From this share of changed macroblocks on, the screen is busy.
    static let busyShare = 0.5
    /// Bytes per changed macroblock (at CRF 23, doubled for every 6 lower; the median since the
    /// last keyframe) up to which the desktop set-up is kept; it is chosen from busy at half that.
    static let desktopCostLimit = 3.0
    /// The cost is known once libx264 gave back this many P pictures since the last keyframe.
    static let costPictures = 4

    private var handle: OpaquePointer
    /// SPS and PPS (Annex B): the track's extradata.
    let headers: [UInt8]
    /// x264's SEI (its version and options), put before the first packet as libavcodec does.
    private var versionSEI: [UInt8]?
    /// The pictures of reordering (the B-frame delay): the track's `has_b_frames`.
    let reorderDelay: Int32
    let level: Int32
    private var picture = x264_picture_t()
    private let logger: Logger
    /// The busy set-up's parameters (the others are made from them, `parameters(for:)`), and their preset.
    private let parameters: x264_param_t
    private let preset: String
    /// Whether this encoder changes its set-up (not for a live stream or under a bitrate ceiling).
    private let adapts: Bool
    /// The set-up libx264 is in. A recording starts as a desktop in use (`Activity.desktop`): what a
    /// screen recorder mostly sees (starting busy, the change at `firstDecisionPictures` would cost
    /// a keyframe on most recordings); a video or game that fills the screen is busy
    /// after `busyDecisionPictures`. A live stream and an encoder under a bitrate ceiling stay busy.
    private(set) var activity: Activity
    /// Set when a libx264 set up for another activity gave different stream headers: no other is opened again.
    private var setUpRefused = false
    /// Pictures since the last keyframe, and the sum of their changed shares (every picture has
    /// as many macroblocks, so their average is the share of all macroblocks sent that changed).
    private var picturesSent = 0
    private var changedShares = 0.0
    /// The changed shares of the last `busyDecisionPictures` pictures.
    private var recentShares: [Double] = []
    /// The changed macroblocks of each picture libx264 holds, by its time; and, for each P picture
    /// it gave back since the last keyframe, its bytes per changed macroblock and how many changed.
    private var heldChanges: [Int64: Int] = [:]
    private var givenCosts: [(cost: Double, changed: Int)] = []

    /// What the median changed macroblock of the P pictures given back since the last keyframe
    /// cost (`desktopCostLimit`); nil until `costPictures` came back.
    private var cost: Double? {
        guard givenCosts.count >= Self.costPictures else { return nil }
        let half = givenCosts.reduce(0) { $0 + $1.changed } / 2
        var counted = 0
        for picture in givenCosts.sorted(by: { $0.cost < $1.cost }) {
            counted += picture.changed
            if counted > half { return picture.cost }
        }
        return givenCosts.last?.cost
    }
    /// Set when the desktop set-up was left for what its pictures cost: it is not chosen again
    /// until the pictures call for another set-up by their share (the screen was still, or
    /// changed whole). Content that costs the busy set-up just under half the limit, and the
    /// desktop one over it, would otherwise go back and forth at every keyframe.
    private var desktopTooCostly = false
    /// Whether a keyframe has chosen the set-up yet (the first one has nothing to go by).
    private var activityChosen = false

    /// True when the next picture should be a keyframe, before its time, because the set-up
    /// should change (`earlyActivity`).
    var wantsEarlyKeyframe: Bool { earlyActivity != nil }

    /// The set-up to change to before the next keyframe is due: in the first interval, the one
    /// `firstDecisionPictures` pictures call for; on the still or desktop one, busy once the last
    /// `busyDecisionPictures` pictures changed `busyShare` of theirs on average.
    private var earlyActivity: Activity? {
        guard adapts, !setUpRefused else { return nil }
        // Asked every picture: what the interval calls for (and its cost) only in the first one.
        if !activityChosen, picturesSent >= Self.firstDecisionPictures, let wanted = wantedActivity, wanted != activity {
            return wanted
        }
        guard activity != .busy, recentShares.count == Self.busyDecisionPictures,
              recentShares.reduce(0, +) / Double(recentShares.count) >= Self.busyShare else { return nil }
        return .busy
    }

    /// The set-up the pictures since the last keyframe call for; nil when this encoder keeps its first.
    private var wantedActivity: Activity? {
        guard adapts, !setUpRefused, picturesSent > 0 else { return nil }
        let share = intervalShare
        if share < Self.stillShare { return .still }
        if share >= Self.busyShare { return .busy }
        // Part of the screen changes: a desktop in use, unless what changes is costly without sub-pixel search.
        guard !desktopTooCostly, let cost else { return activity == .busy ? .busy : .desktop }
        return cost <= (activity == .busy ? costLimit / 2 : costLimit) ? .desktop : .busy
    }

    /// The share of macroblocks the pictures since the last keyframe changed (at least one was sent).
    private var intervalShare: Double { changedShares / Double(picturesSent) }

    /// `desktopCostLimit` at this encoder's rate factor.
    private let costLimit: Double

    /// `parameters` are x264's own `key=value:…` options, applied after the preset as
    /// libavcodec applies `x264-params`.
    init(settings: VideoEncoderSettings, keyframeLimit: Int, maximumBFrames: Int, parameters: String,
         logger: Logger) throws(MediaError) {
        self.logger = logger
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
        adapts = settings.adaptsToActivity && !settings.lowLatency && settings.maximumBitrate == nil
        costLimit = Self.desktopCostLimit * pow(2, Double(23 - settings.crf) / 6)
        // Stitchable: the PPS's opening quantiser no longer follows the rate control, so that every
        // set-up's headers are the same.
        if adapts { param.b_stitchable = 1 }
        self.parameters = param
        preset = settings.preset
        activity = adapts ? .desktop : .busy
        let opened = try Self.open(Self.parameters(for: activity, from: param), preset: settings.preset)
        handle = opened.handle
        headers = opened.headers
        versionSEI = opened.versionSEI
        var effective = x264_param_t()
        x264_encoder_parameters(handle, &effective)
        reorderDelay = effective.i_bframe > 0 ? (effective.i_bframe_pyramid != 0 ? 2 : 1) : 0
        level = effective.i_level_idc
        x264_picture_init(&picture)
    }

    private static func open(_ parameters: x264_param_t, preset: String) throws(MediaError)
        -> (handle: OpaquePointer, headers: [UInt8], versionSEI: [UInt8]?) {
        var param = parameters
        guard let handle = ork_x264_encoder_open(&param) else {
            throw MediaError(.encoderUnavailable, "libx264 does not open for \(param.i_width)x\(param.i_height)@\(param.i_fps_num) preset \(preset)")
        }
        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        guard x264_encoder_headers(handle, &nals, &count) >= 0, let nals else {
            x264_encoder_close(handle)
            throw MediaError(.encoderUnavailable, "libx264 gave no stream headers")
        }
        var headers: [UInt8] = []
        var versionSEI: [UInt8]?
        for nal in UnsafeBufferPointer(start: nals, count: Int(count)) {
            let bytes = Array(UnsafeBufferPointer(start: nal.p_payload, count: Int(nal.i_payload)))
            // Not the SEI: libavcodec keeps it out of the extradata and sends it with the first picture.
            if nal.i_type == Int32(NAL_SEI.rawValue) { versionSEI = bytes } else { headers += bytes }
        }
        return (handle, headers, versionSEI)
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
            if type == X264_TYPE_KEYFRAME { try setUpForActivity(into: packet, deliver: deliver) }
            picture.i_pts = pts
            picture.i_type = type
            let (map, changed) = Self.unchangedMap(frame.changedBlocks)
            if adapts { heldChanges[pts] = changed }
            if type != X264_TYPE_KEYFRAME {
                let share = Double(changed) / Double(frame.changedBlocks.columns * frame.changedBlocks.rows)
                picturesSent += 1
                changedShares += share
                if recentShares.count == Self.busyDecisionPictures { recentShares.removeFirst() }
                recentShares.append(share)
            }
            picture.prop.mb_info = map
            picture.prop.mb_info_free = { free($0) }
            let size = x264_encoder_encode(handle, &nals, &count, &picture, &output)
            picture.prop.mb_info = nil
            guard size >= 0 else { throw MediaError(.encoderFailed, "libx264 failed to encode a picture") }
            if size > 0 { try handOver(packet, nals: nals, count: count, size: size, picture: output, deliver) }
            return
        }
        try flush(into: packet, deliver: deliver)
    }

    private func flush(into packet: UnsafeMutablePointer<AVPacket>,
                       deliver: (UnsafeMutablePointer<AVPacket>) throws(MediaError) -> Void) throws(MediaError) {
        var output = x264_picture_t()
        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        while x264_encoder_delayed_frames(handle) > 0 {
            let size = x264_encoder_encode(handle, &nals, &count, nil, &output)
            guard size >= 0 else { throw MediaError(.encoderFailed, "libx264 failed while flushing") }
            if size > 0 { try handOver(packet, nals: nals, count: count, size: size, picture: output, deliver) }
        }
    }

    /// At a keyframe: the set-up the pictures since the last one call for (`Activity`). Another
    /// set-up is another libx264: this one hands out what it holds, and the new one starts here.
    private func setUpForActivity(into packet: UnsafeMutablePointer<AVPacket>,
                                  deliver: (UnsafeMutablePointer<AVPacket>) throws(MediaError) -> Void) throws(MediaError) {
        defer { picturesSent = 0; changedShares = 0; recentShares.removeAll(); givenCosts.removeAll() }
        guard let wanted = earlyActivity ?? wantedActivity else { return }
        activityChosen = true
        let share = intervalShare
        if share < Self.stillShare || share >= Self.busyShare {
            desktopTooCostly = false
        } else if activity == .desktop, wanted == .busy, let cost, cost > costLimit {
            desktopTooCostly = true
        }
        guard wanted != activity else { return }
        let opened = try Self.open(Self.parameters(for: wanted, from: parameters), preset: preset)
        guard opened.headers == headers else {
            // The track's headers describe every picture: a libx264 whose differ is not used.
            x264_encoder_close(opened.handle)
            setUpRefused = true
            logger.warning("libx264 keeps its first set-up: set up for another activity it gave other stream headers")
            return
        }
        try flush(into: packet, deliver: deliver)
        x264_encoder_close(handle)
        handle = opened.handle
        activity = wanted
        logger.debug("libx264 set up for \(wanted) from this keyframe (the pictures since the last cost \(cost.map { "\($0)" } ?? "-") bytes per changed macroblock)")
    }

    /// libx264's parameters for `activity`, made from the busy set-up's.
    private static func parameters(for activity: Activity, from busy: x264_param_t) -> x264_param_t {
        var param = busy
        switch activity {
        case .busy:
            break
        case .desktop:
            // Without sub-pixel search libx264 also makes no half-pixel planes of its references
            // (its largest per-row work); each set-up starts at a keyframe of its own libx264, so no
            // picture predicts from a reference made without them by a set-up that wants them.
            param.analyse.i_subpel_refine = 0
            param.b_deblocking_filter = 0
        case .still:
            // No deblocking: on a still screen the filter is work for nothing (docs/ENCODER.md).
            param.b_deblocking_filter = 0
            param.rc.i_rc_method = X264_RC_CQP
            param.rc.i_qp_constant = Int32(param.rc.f_rf_constant.rounded()) + Int32(Self.stillQuantiserOffset)
            // One thread: a picture that changed little takes libx264 a few milliseconds, and frame
            // threads' hand-overs would cost CPU for no picture sooner.
            param.i_threads = 1
        }
        return param
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
        if let changed = heldChanges.removeValue(forKey: picture.i_pts), changed > 0, picture.b_keyframe == 0 {
            givenCosts.append((Double(size) / Double(changed), changed))
        }
        try deliver(packet)
    }

    /// libx264's map for `changes`: `X264_MBINFO_CONSTANT` for each macroblock that did not
    /// change, in memory libx264 frees when done with the picture (nil when everything changed);
    /// and how many changed, counted on the same pass.
    private static func unchangedMap(_ changes: ChangedMacroblocks) -> (map: UnsafeMutablePointer<UInt8>?, changed: Int) {
        let count = changes.columns * changes.rows
        guard !changes.all, let map = malloc(count)?.assumingMemoryBound(to: UInt8.self) else { return (nil, count) }
        let constant = UInt8(X264_MBINFO_CONSTANT)
        var changed = 0
        for row in 0..<changes.rows {
            for column in 0..<changes.columns {
                let isChanged = changes.isChanged(column: column, row: row)
                map[row * changes.columns + column] = isChanged ? 0 : constant
                if isChanged { changed += 1 }
            }
        }
        return (map, changed)
    }
}
