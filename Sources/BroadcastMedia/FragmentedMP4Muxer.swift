internal import CFFmpeg
package import NIOCore
internal import ReplayFFmpeg

/// One moof+mdat fragment of the live fragmented MP4 stream.
package struct MP4Fragment: Sendable {
    package var bytes: ByteBuffer
    /// The fragment begins with a video keyframe: a viewer can start here.
    package var startsWithKeyframe: Bool
    /// Decode time of the first video sample and the span of the fragment, in milliseconds.
    package var startTime: Int64
    package var duration: Int64
}

/// Remuxes H.264 (AVCC NAL units) and AAC (raw frames) into fragmented MP4 with libavformat's mov
/// muxer, writing into memory through a custom AVIOContext.
///
/// It cuts a fragment itself (`movflags=frag_custom`): before every video keyframe, and once a
/// fragment spans `fragmentDuration` (0: after every video frame), so that a fragment never waits for
/// more than that (low latency). Audio goes into whichever fragment is open.
///
/// Owns its `FormatOutput` (the `AVFormatContext` writing to memory) and a packet; freed in
/// `deinit`. Not thread-safe: one owner calls it, one call at a time.
final class FragmentedMP4Muxer {
    struct VideoConfiguration { var avcC: [UInt8]; var width: Int; var height: Int }
    struct AudioConfiguration { var audioSpecificConfig: [UInt8]; var sampleRate: Int; var channels: Int }

    /// Collects what the muxer writes; the AVIO write callback appends here.
    final class Output {
        var bytes: [UInt8] = []
    }

    private let output: FormatOutput
    private let collected = Output()
    private var packet: UnsafeMutablePointer<AVPacket>?
    private let videoIndex: Int32
    private let audioIndex: Int32?
    private let audioFrameMilliseconds: Int64

    let initSegment: [UInt8]
    /// Changed between frames by its owner (the ingest follows the size of the audience).
    var fragmentDuration: Int64

    // The fragment being filled.
    private var pendingPackets = 0
    private var pendingStartsWithKeyframe = false
    private var pendingStart: Int64?
    private var lastVideoDTS: Int64?
    private var lastVideoDuration: Int64 = 33
    private var lastAudioDTS: Int64?

    init(video: VideoConfiguration, audio: AudioConfiguration?, fragmentDuration: Int64 = 100) throws(FFmpegError) {
        self.fragmentDuration = fragmentDuration
        self.audioFrameMilliseconds = audio.map { max(1, Int64(1024 * 1000 / max(1, $0.sampleRate))) } ?? 23
        let collected = self.collected
        output = try FormatOutput(format: "mp4", target: .memory { bytes in collected.bytes.append(contentsOf: bytes) })
        (videoIndex, audioIndex) = try Self.addStreams(to: output, video: video, audio: audio)
        try output.writeHeader(options: [("movflags", "frag_custom+empty_moov+default_base_moof+omit_tfhd_offset")])
        initSegment = collected.bytes
        collected.bytes.removeAll(keepingCapacity: true)
        packet = av_packet_alloc()
        guard packet != nil else { throw FFmpegError("av_packet_alloc", message: "out of memory") }
    }

    deinit {
        av_packet_free(&packet)
    }

    /// Adds an H.264 stream and, when there is audio, an AAC stream (times in milliseconds) to
    /// `context`, from what the RTMP sequence headers said. The fMP4 muxer and the relay share it.
    static func addStreams(to output: FormatOutput, video: VideoConfiguration,
                           audio: AudioConfiguration?) throws(FFmpegError) -> (video: Int32, audio: Int32?) {
        let millisecond = AVRational(num: 1, den: 1000)
        let videoIndex = try output.addStream(timeBase: millisecond) { parameters throws(FFmpegError) in
            parameters.pointee.codec_type = AVMEDIA_TYPE_VIDEO
            parameters.pointee.codec_id = AV_CODEC_ID_H264
            parameters.pointee.width = Int32(video.width)
            parameters.pointee.height = Int32(video.height)
            try FormatOutput.setExtradata(parameters, video.avcC)
        }
        guard let audio else { return (videoIndex, nil) }
        let audioIndex = try output.addStream(timeBase: millisecond) { parameters throws(FFmpegError) in
            parameters.pointee.codec_type = AVMEDIA_TYPE_AUDIO
            parameters.pointee.codec_id = AV_CODEC_ID_AAC
            parameters.pointee.sample_rate = Int32(audio.sampleRate)
            parameters.pointee.frame_size = 1024
            av_channel_layout_default(&parameters.pointee.ch_layout, Int32(audio.channels))
            try FormatOutput.setExtradata(parameters, audio.audioSpecificConfig)
        }
        return (videoIndex, audioIndex)
    }

    /// A packet held back until the next one of its stream gives its exact duration (the mov muxer
    /// refuses a fragment's last sample to overlap the next fragment's first).
    struct HeldPacket {
        var data: ByteBuffer
        var dts: Int64
        var pts: Int64
        var keyframe: Bool
    }
    private var heldVideo: HeldPacket?
    /// Video frames held until their successor came (no steady frame rate to predict their duration from).
    private(set) var videoFramesHeld = 0
    private var heldAudio: HeldPacket?
    private var videoWritten = false
    /// The latest decode-time steps between video frames, newest last.
    private var recentSteps: [Int64] = []
    /// A frame came sooner than predicted once: hold every frame from then on.
    private var timestampsIrregular = false
    /// The duration the last frame was written with, when it was predicted.
    private var lastPrediction: Int64?

    /// The duration of a frame not yet followed by the next, when the publisher's decode times are
    /// regular enough to predict it (constant frame rate: steps within 2 ms, e.g. 33/34 ms at 30 fps
    /// in RTMP's milliseconds): the smallest recent step, so the next frame never overlaps. Nil when a
    /// frame must be held for its successor.
    var predictedVideoDuration: Int64? {
        guard !timestampsIrregular, recentSteps.count >= 4, let low = recentSteps.min(), let high = recentSteps.max(),
              high - low <= 2, low > 0 else { return nil }
        return low
    }

    /// Adds one video access unit (AVCC NAL units). Returns the fragments it closed (at most two: the one
    /// before a keyframe, and this frame's own when it completes a fragment).
    ///
    /// When the publisher's timestamps are regular, a frame is written at once with its predicted
    /// duration and its fragment closed as soon as it spans `fragmentDuration` (every frame with 0);
    /// otherwise it waits for the next frame (one frame of latency).
    func writeVideo(_ data: ByteBuffer, dts: Int64, compositionTime: Int64, keyframe: Bool) throws(FFmpegError) -> [MP4Fragment] {
        if let last = lastVideoDTS {
            // The mov muxer refuses non-increasing decode times: drop such a frame.
            guard dts > last else { return [] }
            let step = dts - last
            if heldVideo == nil, let predicted = lastPrediction, step < predicted {
                // Sooner than the duration already written: from now on, wait for each frame's successor.
                timestampsIrregular = true
            }
            lastVideoDuration = min(1000, step)
            recentSteps.append(step)
            if recentSteps.count > 8 { recentSteps.removeFirst() }
        }
        lastVideoDTS = dts
        var fragments: [MP4Fragment] = []
        if let held = heldVideo {
            heldVideo = nil
            if let closed = try writeHeldVideo(held, duration: dts - held.dts) { fragments.append(closed) }
        }
        let next = HeldPacket(data: data, dts: dts, pts: dts + max(0, compositionTime), keyframe: keyframe)
        guard let duration = predictedVideoDuration else {
            lastPrediction = nil
            heldVideo = next
            videoFramesHeld += 1
            return fragments
        }
        lastPrediction = duration
        if let closed = try writeHeldVideo(next, duration: duration) { fragments.append(closed) }
        if let start = pendingStart, spans(dts + duration - start, frame: duration) {
            fragments.append(try cut(endTime: dts + duration))
        }
        return fragments
    }

    /// Whether a fragment of `span` ms is complete: within half a frame of `fragmentDuration`.
    /// Frame durations in milliseconds round (33 and 34 ms at 30 fps, so three frames span 99 or
    /// 100 ms): a strict comparison left two fragments of three open until the next frame came, 33 ms
    /// more for each of their pictures at every viewer.
    private func spans(_ span: Int64, frame: Int64) -> Bool {
        span + frame / 2 >= fragmentDuration
    }

    private func writeHeldVideo(_ held: HeldPacket, duration: Int64) throws(FFmpegError) -> MP4Fragment? {
        var closed: MP4Fragment? = nil
        if pendingStart != nil, held.keyframe || (pendingStart.map { spans(held.dts - $0, frame: duration) } ?? false) {
            closed = try cut(endTime: held.dts)
        }
        if pendingStart == nil { pendingStartsWithKeyframe = held.keyframe; pendingStart = held.dts }
        try write(held.data, stream: videoIndex, dts: held.dts, pts: held.pts, duration: duration, keyframe: held.keyframe)
        videoWritten = true
        return closed
    }

    /// Adds one raw AAC frame.
    func writeAudio(_ data: ByteBuffer, dts: Int64) throws(FFmpegError) {
        guard let audioIndex else { return }
        if let last = lastAudioDTS, dts <= last { return }
        lastAudioDTS = dts
        let next = HeldPacket(data: data, dts: dts, pts: dts, keyframe: true)
        defer { heldAudio = next }
        // Audio before the first video frame has nowhere to start: a viewer starts at a keyframe.
        guard let held = heldAudio, videoWritten else { return }
        try write(held.data, stream: audioIndex, dts: held.dts, pts: held.pts, duration: dts - held.dts, keyframe: true)
    }

    /// Writes what is held and closes the last fragment (at the end of the stream).
    func flush() throws(FFmpegError) -> [MP4Fragment] {
        var fragments: [MP4Fragment] = []
        if let held = heldVideo {
            if let closed = try writeHeldVideo(held, duration: lastVideoDuration) { fragments.append(closed) }
            heldVideo = nil
            lastVideoDuration = max(lastVideoDuration, 1)
        }
        if let held = heldAudio, let audioIndex, videoWritten {
            try write(held.data, stream: audioIndex, dts: held.dts, pts: held.pts, duration: audioFrameMilliseconds, keyframe: true)
            heldAudio = nil
        }
        if pendingPackets > 0 { fragments.append(try cut(endTime: (lastVideoDTS ?? 0) + (lastPrediction ?? lastVideoDuration))) }
        return fragments
    }

    private func write(_ data: ByteBuffer, stream: Int32, dts: Int64, pts: Int64, duration: Int64, keyframe: Bool) throws(FFmpegError) {
        guard let packet else { return }
        try writePacket(data, using: packet, to: output, stream: stream, dts: dts, pts: pts, duration: duration, keyframe: keyframe)
        pendingPackets += 1
    }

    private func cut(endTime: Int64) throws(FFmpegError) -> MP4Fragment {
        // A NULL packet with frag_custom flushes the queued samples as one fragment.
        try output.write(nil)
        output.flush()
        let start = pendingStart ?? endTime
        let fragment = MP4Fragment(bytes: ByteBuffer(bytes: collected.bytes), startsWithKeyframe: pendingStartsWithKeyframe,
                                   startTime: start, duration: max(0, endTime - start))
        collected.bytes.removeAll(keepingCapacity: true)
        pendingPackets = 0
        pendingStart = nil
        return fragment
    }
}
