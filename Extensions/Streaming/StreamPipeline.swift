public import OpenReplayKit
public import Logging
public import ReplayMedia
import CYUV
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What the shipped upload extensions share: a broadcast's samples encoded with our encoders
/// (libx264, AAC with the computer's sound and the microphone mixed on one clock) and sent through
/// libavformat (`StreamOutput`: FLV over RTMP(S), MPEG-TS over SRT) by a `ReconnectingStream`. The RTMP extension gives the
/// ingest's address at once; the reference-service extension gives it once it has signed in and
/// created the broadcast (`connect(to:)`), and the last picture that came before is sent first.
///
/// A still screen sends no new pictures: the last one is sent again every 100 ms (well over the
/// once a second a live ingest needs), so that the stream stays alive and the encoder's held-back
/// pictures come out soon. The encoder opens with the first picture's size.
///
/// One copy of the picture is held (`State.picture`, NV12 as the ring gives it and as libx264 takes
/// it): the keep-alive repeats and the first picture after `connect(to:)` are encoded from it.
///
/// Encoders, mixer and stream are behind one lock: the handler's queue and the keep-alive thread use it.
///
/// The stream is a `ReconnectingStream`: encoding never waits for the network, and after a cut it
/// connects again by itself. While it is down, pictures are not encoded and the sound is mixed and
/// dropped (both counted), so that both pick up at the present when it is back, on a keyframe.
/// The keep-alive thread also reads how long packets wait to be sent: the `BitrateController`
/// lowers libx264's ceiling while the link is slower than the stream and raises it again once
/// the link keeps up. A picture of another size (the screen's resolution changed) flushes the
/// encoder and opens one of the new size; the stream carries its new sequence header.
public final class StreamPipeline: Sendable {
    private struct State {
        var url: String?
        var video: VideoEncoder?
        var audio: AudioEncoder?
        var stream: ReconnectingStream?
        var videoTrack = 0
        var outputs = TrackOutputs()
        var audioOutputs = TrackOutputs()
        var picture: VideoFrame?
        var mixer: AudioMixer?
        var bitrate: BitrateController?
        var origin: Int64?
        var ticks = PictureTicks(framesPerSecond: StreamPipeline.framesPerSecond)
        /// How long after their capture new pictures came out of the encoder (replayd's capture, the
        /// ring, our copy and libx264 together): counts by whole ms, the last for a second or more.
        var encodedAfter = [Int](repeating: 0, count: 1001)
        var lastVideoAt: Int64 = 0
        /// Where the encoder's output has reached, in samples (nil until its first packet).
        var videoOutPosition: Int64?
        /// The stream's bytes sent at a moment (`MonotonicClock`), and the video's share of the
        /// rate since the one before (kilobits a second): what the link carries.
        var sentMark: (bytes: Int64, at: Int64) = (0, 0)
        var videoSentKbps: Int?
        var failed = false
        var finished = false
    }
    private let state = Mutex(State())
    /// Pictures not encoded and samples not sent while the stream was down (read by the
    /// connection callback, which must not take `state`: `finish` holds it while the sender ends).
    private let picturesSkipped = Atomic(0)
    private let samplesSkipped = Atomic(0)
    private let logger: Logger
    private let failure: @Sendable (String) -> Void
    private let connectionChanged: @Sendable (ReconnectingStream.Connection) -> Void
    static let framesPerSecond: Int64 = 30
    /// Both tracks start a second in: the encoder's first decode times come before its first
    /// picture's, and FLV cannot carry a negative time once the sound has begun at zero.
    static let startOffsetSeconds: Int64 = 1
    static let startOffsetSamples: Int64 = 48_000
    /// A still screen's picture is sent again this often (nanoseconds): the encoder holds a few
    /// pictures back, so this also bounds how late the last change reaches the viewers.
    static let keepAlive: Int64 = 100_000_000
    /// The AAC track's rate (`AudioEncoder`'s default), taken off what the link carries to get the video's share.
    static let audioKbps = 160
    /// How far the sound may be ahead of the encoder's pictures, in samples (0.3 s).
    static let audioLead: Int64 = 14_400

    /// A pipeline that sends to `url` (nil: not yet; pictures are held until `connect(to:)`).
    /// `failure` is called once, from any thread, with the reason the stream broke for good;
    /// `connectionChanged` hears the stream go live, break and come back (from the stream's thread).
    public init(url: String?, logger: Logger, failure: @escaping @Sendable (String) -> Void,
                connectionChanged: @escaping @Sendable (ReconnectingStream.Connection) -> Void = { _ in }) {
        self.logger = logger
        self.failure = failure
        self.connectionChanged = connectionChanged
        state.withLock { $0.url = url }
        let thread = Thread { [weak self] in
            while let self, !self.state.withLock({ $0.finished }) {
                self.keepAlive()
                usleep(50_000)
            }
        }
        thread.name = "stream-keep-alive"
        thread.start()
    }

    /// Starts sending to `url`: the stream opens now with the last picture held (its time is now),
    /// or with the next picture.
    public func connect(to url: String) {
        state.withLock { state in
            guard !state.failed, !state.finished, state.url == nil else { return }
            state.url = url
            guard let picture = state.picture else { return }
            // The held picture is the stream's first, shown from now; sound from before is not sent.
            let now = MonotonicClock.now()
            state.origin = now
            state.mixer = nil
            guard openStream(&state, width: picture.width, height: picture.height) else { return }
            encodePicture(&state, at: now)
        }
    }

    /// One sample from `RPBroadcastSampleHandler.processSampleBuffer(_:with:)`: a picture is
    /// copied (NV12, as libx264 takes it) before this returns, so the ring's slot is free again.
    public func process(_ sampleBuffer: CMSampleBuffer, with sampleBufferType: RPSampleBufferType) {
        let time = CMSampleBufferGetPresentationTimeStamp(sampleBuffer)
        // Session-clock nanoseconds (timescale 1e9 from the SDK; any other scale converted without overflow).
        let scale = Int64(max(1, time.timescale))
        let nanoseconds = time.value / scale * 1_000_000_000 + time.value % scale * 1_000_000_000 / scale
        switch sampleBufferType {
        case .video:
            guard let image = CMSampleBufferGetImageBuffer(sampleBuffer) else { return }
            CVPixelBufferLockBaseAddress(image, .readOnly)
            defer { CVPixelBufferUnlockBaseAddress(image, .readOnly) }
            guard let luma = CVPixelBufferGetBaseAddressOfPlane(image, 0), let chroma = CVPixelBufferGetBaseAddressOfPlane(image, 1) else { return }
            video(luma: luma, lumaStride: CVPixelBufferGetBytesPerRowOfPlane(image, 0),
                  chroma: chroma, chromaStride: CVPixelBufferGetBytesPerRowOfPlane(image, 1),
                  width: CVPixelBufferGetWidth(image), height: CVPixelBufferGetHeight(image), time: nanoseconds)
        case .audioApp, .audioMic:
            guard let block = CMSampleBufferGetDataBuffer(sampleBuffer) else { return }
            let length = CMBlockBufferGetDataLength(block)
            var samples = [Float](repeating: 0, count: length / MemoryLayout<Float>.size)
            _ = samples.withUnsafeMutableBytes { CMBlockBufferCopyDataBytes(block, atOffset: 0, dataLength: length, destination: $0.baseAddress!) }
            audio(samples, source: sampleBufferType == .audioMic ? 1 : 0, time: nanoseconds)
        }
    }

    func video(luma: UnsafeMutableRawPointer, lumaStride: Int, chroma: UnsafeMutableRawPointer, chromaStride: Int,
               width: Int, height: Int, time: Int64) {
        state.withLock { state in
            guard !state.failed, !state.finished else { return }
            let (width, height) = (width & ~1, height & ~1)
            if state.url == nil {
                // Not connected yet: keep the last picture (our own copy), to send first.
                if state.picture?.width != width || state.picture?.height != height {
                    state.picture = Self.heldPicture(width: width, height: height)
                }
            } else {
                if state.origin == nil { state.origin = time }
                if state.stream == nil {
                    guard openStream(&state, width: width, height: height) else { return }
                } else if let picture = state.picture, picture.width != width || picture.height != height {
                    guard follow(&state, width: width, height: height) else { return }
                }
            }
            guard let picture = state.picture else { return }
            let (y, uv, ys, uvs) = picture.nv12Planes
            _ = NV12Copy(luma.assumingMemoryBound(to: UInt8.self), Int32(lumaStride), chroma.assumingMemoryBound(to: UInt8.self), Int32(chromaStride),
                         y, Int32(ys), uv, Int32(uvs), Int32(picture.width), Int32(picture.height))
            if state.url != nil { encodePicture(&state, at: time) }
        }
    }

    func audio(_ samples: [Float], source: Int, time: Int64) {
        state.withLock { state in
            guard !state.failed, !state.finished, state.url != nil else { return }
            if state.origin == nil { state.origin = time }
            // Sound from before the stream's start (a connection made while it was on its way) is not sent.
            guard time >= state.origin! else { return }
            let position = (time - state.origin!) * 48_000 / 1_000_000_000
            if state.mixer == nil { state.mixer = Self.makeMixer() }
            state.mixer!.append(source: source, position: position, samples: samples)
            drainAudio(&state, now: (MonotonicClock.now() - state.origin!) * 48_000 / 1_000_000_000)
        }
    }

    /// The computer's sound (0) and the microphone (1), waited for up to a quarter second once they
    /// send; one that has sent nothing (no microphone in this broadcast) is not waited for at all,
    /// so that the sound, and the pictures the muxer interleaves with it, are not late for a source
    /// that never comes (a 50 ms wait here held every picture 50 ms). replayd sends a block of both
    /// at once, so a microphone that is part of the broadcast loses at most its first block (counted).
    static func makeMixer() -> AudioMixer {
        AudioMixer(sourceCount: 2, blockSize: 1024, maximumWait: 12_000, firstDataWait: 0)
    }

    private func drainAudio(_ state: inout State, now: Int64) {
        guard let audio = state.audio, let stream = state.stream else { return }
        let live = stream.isLive
        // The sound never runs ahead of the pictures the encoder has given (it holds a few back,
        // and on a still screen they come slowly): the muxer's interleaving then never has to
        // send a later sound packet before an earlier picture. While the stream is down it is
        // mixed up to the present and dropped.
        guard let limit = live ? state.videoOutPosition.map({ $0 + Self.audioLead }) : .max else { return }
        while let mixer = state.mixer, mixer.cursor + Int64(mixer.blockSize) <= limit, let block = state.mixer?.nextBlock(now: now) {
            guard live else {
                samplesSkipped.add(mixer.blockSize, ordering: .relaxed)
                continue
            }
            let mixed = AudioMixer.mix(block.sources, gains: block.sources.map { _ in 1 })
            guard mixed.count == audio.frameSize * 2 else { continue }
            let outputs = state.audioOutputs
            let failure: MediaError? = mixed.withUnsafeBufferPointer { buffer in
                do throws(MediaError) {
                    try audio.encode(buffer, pts: block.position + Self.startOffsetSamples, to: outputs)
                    return nil
                } catch {
                    return error
                }
            }
            if let failure {
                fail(&state, failure.message)
                return
            }
        }
    }

    /// Encodes the held picture, taken at `time`; `repeated`: a still screen's picture again (keep-alive).
    private func encodePicture(_ state: inout State, at time: Int64, repeated: Bool = false) {
        guard let video = state.video, let picture = state.picture, let origin = state.origin, let stream = state.stream else { return }
        guard let tick = state.ticks.tick(elapsed: time - origin) else { return }
        state.lastVideoAt = MonotonicClock.now()
        guard stream.isLive else {
            picturesSkipped.add(1, ordering: .relaxed)
            return
        }
        // A new connection starts on a keyframe.
        if stream.takeKeyframeRequest() { video.requestKeyframe() }
        do throws(MediaError) {
            if let out = try video.encode(picture, pts: tick + Self.framesPerSecond * Self.startOffsetSeconds, to: state.outputs) {
                noteVideoOut(&state, out)
                if !repeated { state.encodedAfter[Int(min(1000, max(0, (MonotonicClock.now() - time) / 1_000_000)))] += 1 }
            }
        } catch {
            fail(&state, error.message)
        }
    }

    private func noteVideoOut(_ state: inout State, _ tick: Int64) {
        state.videoOutPosition = (tick - Self.framesPerSecond * Self.startOffsetSeconds) * 48_000 / Self.framesPerSecond
    }

    /// Every 50 ms: a still screen's picture again, the sound that is due, and the bitrate ceiling.
    private func keepAlive() {
        state.withLock { state in
            guard !state.failed, !state.finished, state.stream != nil, state.picture != nil, let origin = state.origin else { return }
            let now = MonotonicClock.now()
            if now - state.lastVideoAt >= Self.keepAlive {
                encodePicture(&state, at: now, repeated: true)
            }
            drainAudio(&state, now: (now - origin) * 48_000 / 1_000_000_000)
            if let stream = state.stream, stream.isLive, var bitrate = state.bitrate {
                if now - state.sentMark.at >= 1_000_000_000 {
                    let bytes = stream.bytesWritten
                    if state.sentMark.at > 0 {
                        let kbps = Int((bytes - state.sentMark.bytes) * 8_000_000 / (now - state.sentMark.at))
                        state.videoSentKbps = max(0, kbps - Self.audioKbps)
                    }
                    state.sentMark = (bytes, now)
                }
                let delay = stream.queueDelay
                if let ceiling = bitrate.update(queueDelay: delay, sentKbps: state.videoSentKbps, at: .nanoseconds(now)) {
                    let applied = state.video?.setMaximumBitrate(ceiling) ?? false
                    logger.info("bitrate ceiling \(ceiling) kb/s", metadata: ["queueDelayMs": "\(Int(delay / .milliseconds(1)))",
                                                                            "videoSentKbps": "\(state.videoSentKbps ?? -1)", "applied": "\(applied)"])
                }
                state.bitrate = bitrate
            }
        }
    }

    /// The picture the pipeline holds: the ring's NV12, which libx264 takes with a plain copy.
    private static func heldPicture(width: Int, height: Int) -> VideoFrame {
        VideoFrame(width: width, height: height, layout: .nv12)
    }

    /// The encoder for `width`×`height`, with a bitrate ceiling for that size.
    private func makeEncoder(width: Int, height: Int) throws(MediaError) -> (VideoEncoder, BitrateController) {
        let bitrate = BitrateController(width: width, height: height, framesPerSecond: Int(Self.framesPerSecond))
        var settings = VideoEncoderSettings(width: width, height: height, framesPerSecond: Int(Self.framesPerSecond), preset: "veryfast", crf: 23)
        settings.keyframeIntervalSeconds = 1
        // The ring's pictures are full range ('420f'): the stream says so.
        settings.fullRange = true
        // Live: no look-ahead, no B-frames (a picture leaves at once, and the encoder holds one, not eight).
        settings.lowLatency = true
        settings.maximumBitrate = bitrate.current
        return (try VideoEncoder(settings: settings, logger: logger), bitrate)
    }

    /// Opens the encoders and connects (the first picture gives the size).
    private func openStream(_ state: inout State, width: Int, height: Int) -> Bool {
        guard let url = state.url else { return false }
        do throws(MediaError) {
            let (video, bitrate) = try makeEncoder(width: width, height: height)
            let audio = try AudioEncoder(logger: logger)
            let stream = try ReconnectingStream(url: url, logger: logger) { [weak self] connection in
                self?.streamChanged(connection)
            }
            var outputs = TrackOutputs()
            state.videoTrack = try stream.addTrack(video.trackFormat(name: "video"))
            outputs.add(stream, track: state.videoTrack)
            var audioOutputs = TrackOutputs()
            audioOutputs.add(stream, track: try stream.addTrack(audio.trackFormat(name: "audio")))
            try stream.start()
            state.video = video
            state.bitrate = bitrate
            state.audio = audio
            state.stream = stream
            state.outputs = outputs
            state.audioOutputs = audioOutputs
            if state.picture?.width != width || state.picture?.height != height {
                state.picture = Self.heldPicture(width: width, height: height)
            }
            // The sound track goes out from the start, silent while no sound comes (a muted
            // computer, no sound server): players wait for every declared track.
            if state.mixer == nil { state.mixer = Self.makeMixer() }
            logger.info("streaming", metadata: ["to": "\(stream.redactedURL)", "size": "\(width)x\(height)", "maxKbps": "\(bitrate.current)"])
            return true
        } catch {
            fail(&state, error.message)
            return false
        }
    }

    /// The screen changed size: what the encoder holds goes out, then pictures of the new size
    /// from a new encoder, whose first packet carries the new sequence header.
    private func follow(_ state: inout State, width: Int, height: Int) -> Bool {
        guard let old = state.video, let stream = state.stream else { return false }
        do throws(MediaError) {
            if let out = try old.encode(nil, pts: 0, to: state.outputs) { noteVideoOut(&state, out) }
            let (video, bitrate) = try makeEncoder(width: width, height: height)
            stream.replaceTrack(state.videoTrack, with: video.trackFormat(name: "video"))
            state.video = video
            state.bitrate = bitrate
            state.picture = Self.heldPicture(width: width, height: height)
            logger.info("the screen changed size", metadata: ["size": "\(width)x\(height)", "maxKbps": "\(bitrate.current)"])
            return true
        } catch {
            fail(&state, error.message)
            return false
        }
    }

    /// What was dropped while the stream was down.
    var skipped: (pictures: Int, seconds: Double) {
        (picturesSkipped.load(ordering: .relaxed), Double(samplesSkipped.load(ordering: .relaxed)) / 48_000)
    }

    /// Called by the stream's thread: must not take `state`.
    private func streamChanged(_ connection: ReconnectingStream.Connection) {
        switch connection {
        case .reconnecting:
            logger.warning("stream \(connection)")
        case .live where skipped.pictures > 0:
            logger.info("stream live again", metadata: ["picturesSkipped": "\(skipped.pictures)",
                                                       "soundSkippedSeconds": "\(skipped.seconds)"])
        default:
            break
        }
        connectionChanged(connection)
    }

    private func fail(_ state: inout State, _ message: String) {
        guard !state.failed else { return }
        state.failed = true
        logger.error("\(message)")
        failure(message)
    }

    /// The `q`th percentile of a histogram of whole milliseconds ("-" when it is empty).
    static func percentile(_ q: Int, of counts: [Int]) -> String {
        let total = counts.reduce(0, +)
        guard total > 0 else { return "-" }
        var seen = 0
        for (ms, count) in counts.enumerated() {
            seen += count
            if seen * 100 >= total * q { return "\(ms)" }
        }
        return "\(counts.count - 1)"
    }

    /// Flushes the encoders and ends the stream; the keep-alive thread stops.
    public func finish() {
        state.withLock { state in
            guard !state.finished else { return }
            state.finished = true
            guard !state.failed, let stream = state.stream else { return }
            do throws(MediaError) {
                if stream.isLive {
                    try state.video?.encode(nil, pts: 0, to: state.outputs)
                    try state.audio?.encode(nil, pts: 0, to: state.audioOutputs)
                }
                try stream.finish()
            } catch {
                logger.warning("ending the stream: \(error.message)")
            }
            let counters = stream.counters
            logger.info("stream ended", metadata: ["reconnections": "\(counters.reconnections)",
                                                   "captureToEncodedMsP50": "\(Self.percentile(50, of: state.encodedAfter))",
                                                   "captureToEncodedMsP95": "\(Self.percentile(95, of: state.encodedAfter))",
                                                   "videoPacketsDropped": "\(counters.videoPacketsDropped)",
                                                   "audioPacketsDropped": "\(counters.audioPacketsDropped)",
                                                   "picturesSkipped": "\(skipped.pictures)",
                                                   "picturesOneTickLater": "\(state.ticks.moved)", "picturesReplaced": "\(state.ticks.replaced)"])
        }
    }
}
