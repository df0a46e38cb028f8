import Logging
import NIOCore
import NIOPosix
import RTMP

/// Owns a `FragmentedMP4Muxer` for the thread pool.
///
/// `@unchecked Sendable`: the muxer is only touched inside `NIOThreadPool.runIfActive` closures that
/// its one ingest connection awaits one after another, so two threads never use it at once.
final class MuxerBox: @unchecked Sendable {
    let muxer: FragmentedMP4Muxer
    init(_ muxer: FragmentedMP4Muxer) { self.muxer = muxer }
}

/// Turns one publisher's FLV video/audio messages into fMP4 fragments on a `LiveStream`.
///
/// Owned by one ingest connection loop. The libavformat work runs on a `NIOThreadPool`, never on the
/// cooperative pool; calls are awaited one at a time, so samples stay in order.
struct IngestPipeline {
    let stream: LiveStream
    let threadPool: NIOThreadPool
    let logger: Logger
    let fragmentDuration: Int64
    /// Up to this many viewers (WebSocket players), every video frame is a fragment of its own:
    /// the least latency, for three times the messages of 100 ms fragments; beyond, `fragmentDuration`.
    let frameFragmentViewers: Int
    /// Where to re-publish the broadcast, if anywhere.
    let relay: RTMPRelay?

    private var video: (avcC: AVCDecoderConfigurationRecord, sps: H264SequenceParameterSet)?
    private var audio: AudioSpecificConfig?
    private var muxer: MuxerBox?
    /// Media that arrived before the muxer could start (bounded).
    private var waiting: [RTMPMessage] = []
    private var baseTimestamp: UInt32?
    private(set) var videoFrames = 0
    private(set) var audioFrames = 0
    private(set) var rejectedTags = 0
    /// Video frames held for their successor, by the muxers before the current one.
    private var earlierFramesHeld = 0
    /// Video frames that waited for their successor (an uneven frame rate): each cost its viewers a frame of latency.
    var videoFramesHeld: Int { earlierFramesHeld + (muxer?.muxer.videoFramesHeld ?? 0) }

    init(stream: LiveStream, threadPool: NIOThreadPool, logger: Logger, fragmentDuration: Int64 = 100, frameFragmentViewers: Int = 0,
         relay: RTMPRelay? = nil) {
        self.frameFragmentViewers = frameFragmentViewers
        self.relay = relay
        self.stream = stream
        self.threadPool = threadPool
        self.logger = logger
        self.fragmentDuration = fragmentDuration
    }

    /// Handles one audio or video message.
    mutating func handle(_ message: RTMPMessage) async throws {
        if muxer == nil {
            try noteConfiguration(message)
            waiting.append(message)
            // Start when video and audio are configured, or video alone after 60 messages without audio.
            guard video != nil, audio != nil || waiting.count > 60 else {
                if waiting.count > 600 { throw FLVError(message: "no H.264 sequence header in the first 600 media messages") }
                return
            }
            try await startMuxer()
            let queued = waiting
            waiting = []
            for message in queued { try await write(message) }
            return
        }
        try await write(message)
    }

    /// Closes the last fragment and ends the live stream.
    mutating func finish() async {
        relay?.close()
        try? await flushMuxer()
        stream.end()
    }

    /// Writes what the muxer holds and publishes its last fragment.
    private func flushMuxer() async throws {
        guard let muxer else { return }
        let fragments = try await threadPool.runIfActive { try muxer.muxer.flush() }
        for fragment in fragments { stream.publish(fragment) }
    }

    private mutating func noteConfiguration(_ message: RTMPMessage) throws {
        if message.type == .video, video == nil, let tag = try? FLVVideoTag(decoding: message.payload),
           case .sequenceHeader(let avcC) = tag.packet {
            let sps = try H264SequenceParameterSet(decoding: avcC.sequenceParameterSets[0])
            video = (avcC, sps)
            logger.info("H.264 stream", metadata: ["size": "\(sps.width)x\(sps.height)", "profile": "\(sps.profile)", "level": "\(sps.level)"])
        }
        if message.type == .audio, audio == nil, let tag = try? FLVAudioTag(decoding: message.payload),
           case .sequenceHeader(let asc) = tag.packet {
            audio = asc
            logger.info("AAC stream", metadata: ["rate": "\(asc.sampleRate)", "channels": "\(asc.channels)"])
        }
    }

    private mutating func startMuxer(relaying: Bool = true) async throws {
        guard let video else { return }
        let videoConfiguration = FragmentedMP4Muxer.VideoConfiguration(avcC: video.avcC.bytes, width: video.sps.width, height: video.sps.height)
        let audioConfiguration = audio.map {
            FragmentedMP4Muxer.AudioConfiguration(audioSpecificConfig: $0.bytes, sampleRate: $0.sampleRate, channels: $0.channels)
        }
        let duration = fragmentDuration
        let box = try await threadPool.runIfActive {
            MuxerBox(try FragmentedMP4Muxer(video: videoConfiguration, audio: audioConfiguration, fragmentDuration: duration))
        }
        let hex = [video.avcC.profile, video.avcC.compatibility, video.avcC.level].map { b in
            let digits = String(b, radix: 16, uppercase: true)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
        let codecs = ["avc1." + hex] + (audio.map { ["mp4a.40.\($0.objectType)"] } ?? [])
        if relaying { relay?.start(video: videoConfiguration, audio: audioConfiguration) }
        stream.setInitSegment(ByteBuffer(bytes: box.muxer.initSegment), mimeType: "video/mp4; codecs=\"\(codecs.joined(separator: ","))\"")
        muxer = box
    }

    /// A new H.264 configuration mid-stream (the broadcaster's screen changed size): the fragments
    /// of the old one go out, then a new muxer gives viewers the new type and init segment, before
    /// the first picture of the new size (a keyframe: an encoder starts again with one).
    private mutating func changeVideoConfiguration(_ avcC: AVCDecoderConfigurationRecord) async throws {
        let sps = try H264SequenceParameterSet(decoding: avcC.sequenceParameterSets[0])
        try await flushMuxer()
        earlierFramesHeld = videoFramesHeld
        let before = video.map { "\($0.sps.width)x\($0.sps.height)" } ?? "none"
        logger.info("H.264 configuration changed: viewers get the new one", metadata: ["from": "\(before)", "size": "\(sps.width)x\(sps.height)"])
        video = (avcC, sps)
        relay?.enqueue(.videoConfiguration(avcC.bytes))
        try await startMuxer(relaying: false)
    }

    private mutating func write(_ message: RTMPMessage) async throws {
        guard let muxer else { return }
        let base = baseTimestamp ?? message.timestamp
        baseTimestamp = base
        let dts = Int64(Int32(bitPattern: message.timestamp &- base))
        guard dts >= 0 else { return }
        switch message.type {
        case .video:
            guard let tag = try? FLVVideoTag(decoding: message.payload) else { rejectedTags += 1; return }
            if case .sequenceHeader(let avcC) = tag.packet, avcC.bytes != video?.avcC.bytes {
                try await changeVideoConfiguration(avcC)
                return
            }
            guard case .nalus(let data, let cts) = tag.packet, data.readableBytes > 0 else { return }
            let keyframe = tag.isKeyframe
            videoFrames += 1
            // The thumbnail decodes the latest keyframe when asked for; here it is only a reference swap.
            if keyframe, let video { stream.latestKeyframe.update(avcC: video.avcC.bytes, data: data) }
            relay?.enqueue(.video(data, dts: dts, compositionTime: Int64(cts), keyframe: keyframe))
            let duration = stream.viewerCount <= frameFragmentViewers ? 0 : fragmentDuration
            let fragments = try await threadPool.runIfActive {
                muxer.muxer.fragmentDuration = duration
                return try muxer.muxer.writeVideo(data, dts: dts, compositionTime: Int64(cts), keyframe: keyframe)
            }
            for fragment in fragments { stream.publish(fragment) }
        case .audio:
            guard let tag = try? FLVAudioTag(decoding: message.payload) else { rejectedTags += 1; return }
            guard case .raw(let frame) = tag.packet, frame.readableBytes > 0 else { return }
            audioFrames += 1
            relay?.enqueue(.audio(frame, dts: dts))
            try await threadPool.runIfActive { try muxer.muxer.writeAudio(frame, dts: dts) }
        default:
            break
        }
    }
}
