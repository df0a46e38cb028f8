import ReplayIPC
import ReplayMedia
import ReplayCapture
import Logging
import Synchronization
import Foundation

/// The threads of one recording and what they share. Every C handle here has one owner thread
/// while running: `capture` the capture thread, `videoEncoder` the video thread, `audioEncoders`
/// the audio thread; `writer` serialises itself. Hence `@unchecked Sendable`.
final class RecordingPipeline: @unchecked Sendable {
    let options: RecordingOptions
    let capture: ScreenCapture
    private let videoEncoder: VideoEncoder
    private let writer: MovieWriter
    private let videoTrack: MovieWriter.TrackID
    private let sources: [PulseAudioSource]
    private let microphoneIndex: Int?
    private let audioEncoders: [AudioEncoder]
    private let audioTracks: [MovieWriter.TrackID]
    private let logger: Logger

    private let frames: BoundedQueue<VideoFrame>
    private let freeFrames: BoundedQueue<VideoFrame>
    private let frameLimit: Int
    private var framesAllocated = 0   // capture thread only
    private let mixer: Mutex<AudioMixer>
    /// Where the microphone was switched on or off: (sample position, on).
    private let microphoneSwitches = Mutex<[(position: Int64, on: Bool)]>([])
    private let microphoneOn = Atomic<Bool>(true)

    private let stopRequested = Atomic<Bool>(false)
    private let startTime = Atomic<Int64>(0)
    private let endTime = Atomic<Int64>(0)       // set when capture stops
    private let framesWritten = Atomic<Int>(0)
    private let encodedThrough = Atomic<Int64>(-1)  // the latest frame tick the encoder gave back
    private let lastChange = Atomic<Int64>(-1)      // the tick of the latest changed picture
    private let framesDropped = Atomic<Int>(0)
    private let failure = Mutex<ReplayError?>(nil)
    private let ran = Atomic<Bool>(false)

    private static let audioWait = 14_400   // samples (300 ms) a late source is waited for, at first
    private static let maximumAudioWait = 144_000   // and at most (3 s)
    private static let firstAudioWait = 240_000     // for a source's very first samples (5 s)
    private static let soundStartTimeout: Int64 = 3_000_000_000

    init(options: RecordingOptions, capture: ScreenCapture, encoder: VideoEncoder, sources: [PulseAudioSource],
         microphoneIndex: Int?, writer: MovieWriter, logger: Logger) throws(MediaError) {
        self.options = options
        self.capture = capture
        self.videoEncoder = encoder
        self.writer = writer
        self.sources = sources
        self.microphoneIndex = microphoneIndex
        self.logger = logger
        videoTrack = writer.addTrack(for: encoder, name: "Screen")
        // One track per source in `sources`' order (the system sound first), or one mix of them all.
        let names = sources.indices.map { $0 == microphoneIndex ? "Microphone" : "System sound" }
        let trackNames = options.separateAudioTracks || names.count <= 1 ? names : ["System sound and microphone"]
        var encoders: [AudioEncoder] = []
        var tracks: [MovieWriter.TrackID] = []
        for name in trackNames {
            let audio = try AudioEncoder(logger: logger)
            encoders.append(audio)
            tracks.append(writer.addTrack(for: audio, name: name))
        }
        audioEncoders = encoders
        audioTracks = tracks
        mixer = Mutex(AudioMixer(sourceCount: sources.count, blockSize: encoders.first?.frameSize ?? 1024,
                                 maximumWait: Self.audioWait, firstDataWait: Self.firstAudioWait))
        // Up to half a second of pictures may wait for the encoder (its first frames are slow: libx264
        // faults its buffers in), allocated only when it falls behind; past that, frames are dropped,
        // counted. What a kill -9 loses is this queue, plus the ~5 frames libx264 holds, plus the open
        // fragment (a quarter second): under a second. A one-second queue let a loaded machine lose
        // 1.24 s; at 1080p30 on an idle machine even 6 frames dropped nothing.
        let queueDepth = max(4, options.framesPerSecond / 2)
        frames = BoundedQueue(capacity: queueDepth)
        freeFrames = BoundedQueue(capacity: queueDepth + 1)
        frameLimit = queueDepth + 1
        for _ in 0..<3 {
            _ = freeFrames.push(VideoFrame(width: capture.outputWidth, height: capture.outputHeight))
        }
        framesAllocated = 3
    }

    func requestStop() {
        stopRequested.store(true, ordering: .releasing)
    }

    func setMicrophone(on: Bool) {
        guard microphoneOn.exchange(on, ordering: .acquiringAndReleasing) != on else { return }
        let start = startTime.load(ordering: .acquiring)
        let position = start == 0 ? 0 : Self.samples(from: start, to: MonotonicClock.now())
        microphoneSwitches.withLock { $0.append((position, on)) }
        logger.info("microphone \(on ? "on" : "off") at \(Double(position) / 48_000) s")
    }

    func statistics() -> RecordingStatistics {
        var statistics = RecordingStatistics()
        let start = startTime.load(ordering: .acquiring)
        if start != 0 {
            let end = endTime.load(ordering: .acquiring)
            statistics.elapsedSeconds = Double((end != 0 ? end : MonotonicClock.now()) - start) / 1e9
        }
        statistics.framesWritten = framesWritten.load(ordering: .relaxed)
        statistics.framesDropped = framesDropped.load(ordering: .relaxed)
        statistics.bytesWritten = writer.bytesWritten
        statistics.microphoneOn = microphoneIndex != nil && microphoneOn.load(ordering: .relaxed)
        statistics.capturing = start != 0
        return statistics
    }

    /// Records until stopped; returns the error that ended it, if any. The file is finished either way.
    func run() async -> ReplayError? {
        guard !ran.exchange(true, ordering: .acquiringAndReleasing) else { return ReplayError(.internal, "a recording runs once") }
        do {
            try writer.start()
        } catch {
            return ReplayError.from(error)
        }
        // The sound server may take a while to send a new stream's first samples (over a second for
        // a monitor on a fresh PulseAudio): the recording's time zero waits for them, at most 3 s,
        // like iOS's count-down, so that it does not begin with silence. The session says
        // "starting" meanwhile.
        let sourcesStarted = MonotonicClock.now()
        for source in sources { source.start() }
        // Windows beneath replayd's own (the indicator) are redirected now, so that their clients have
        // repainted them before the first frame is recomposed from them.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                self.capture.prime()
                continuation.resume()
            }
            thread.name = "replayd-prime"
            thread.start()
        }
        while !sources.allSatisfy(\.hasData), MonotonicClock.now() - sourcesStarted < Self.soundStartTimeout,
              !stopRequested.load(ordering: .acquiring) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if let late = sources.first(where: { !$0.hasData }) {
            logger.warning("audio \(late.device) sent nothing for 3 s; recording starts without waiting for it")
        }
        // At least 100 ms after priming (usually already spent waiting for the sound): a few frames of
        // the other clients' time to repaint their redirected windows.
        while MonotonicClock.now() - sourcesStarted < 100_000_000 {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let start = MonotonicClock.now()
        startTime.store(start, ordering: .releasing)
        logger.debug("time zero of the recording: \(start / 1_000_000_000).\(String(format: "%09lld", start % 1_000_000_000)) s CLOCK_MONOTONIC")
        for (index, source) in sources.enumerated() {
            source.deliver(to: { [self] anchor, offset, samples, latency in
                let position = Self.samples(from: start, to: anchor) + offset
                // Wait for a bursty source as long as its latency says, plus 100 ms, at most 3 s.
                let wait = min(Self.maximumAudioWait, Int(Self.samples(from: 0, to: latency)) + 4_800)
                self.mixer.withLock { mixer in
                    if wait > mixer.maximumWait { mixer.maximumWait = wait }
                    mixer.append(source: index, position: position, samples: samples)
                }
            })
        }
        let group = DispatchGroup()
        spawn("replayd-capture", group) { self.captureLoop(start: start) }
        spawn("replayd-video", group) { self.videoLoop(start: start) }
        if !audioEncoders.isEmpty { spawn("replayd-audio", group) { self.audioLoop(start: start) } }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            group.notify(queue: .global()) { continuation.resume() }
        }
        do {
            try writer.finish()
        } catch {
            record(ReplayError.from(error))
        }
        let counters = mixer.withLock { $0.perSourceCounters }
        for (source, counter) in zip(sources, counters) where counter != AudioMixer.Counters() {
            logger.info("audio \(source.device): \(counter.silenceFilled) samples of silence filled in, \(counter.discarded) late samples discarded")
        }
        logger.info("recording finished: \(framesWritten.load(ordering: .relaxed)) frames, \(framesDropped.load(ordering: .relaxed)) dropped, \(writer.bytesWritten) bytes")
        return failure.withLock { $0 }
    }

    private func spawn(_ name: String, _ group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        let thread = Thread {
            body()
            group.leave()
        }
        thread.name = name
        thread.start()
    }

    /// Keeps the first error (the one that ended the recording), logs it, and stops.
    private func record(_ error: ReplayError) {
        let first = failure.withLock { failure in
            guard failure == nil else { return false }
            failure = error
            return true
        }
        if first { logger.error("\(error.message)") }
        requestStop()
    }

    // MARK: Capture thread

    private func captureLoop(start: Int64) {
        let fps = Int64(options.framesPerSecond)
        let interval = 1_000_000_000 / fps
        // Frame n is due at start + n/fps exactly: no rounding error accumulates.
        let ending = RecordingEnd(durationSeconds: options.durationSeconds, framesPerSecond: fps)
        var index: Int64 = 0
        var tick = start
        var end: Int64?   // the recording's end, once its last picture went out
        var lastSent = Int64.min
        var push = PushThrough(framesPerSecond: fps)
        var latestChange: Int64 = -1   // the capture's own copy of `lastChange` (it is the only writer)
        defer {
            endTime.store(end ?? tick, ordering: .releasing)
            frames.close()
        }
        while true {
            tick = start + index * 1_000_000_000 / fps
            MonotonicClock.sleep(until: tick)
            let stopping = stopRequested.load(ordering: .acquiring)
            let late = MonotonicClock.now() - tick
            if late >= interval, !stopping {
                // Behind by whole frames (the machine was busy): skip them, counted.
                let next = ending.skip(from: index, missed: late / interval)
                framesDropped.add(Int(next - index), ordering: .relaxed)
                index = next
                tick = start + index * 1_000_000_000 / fps
            }
            let last = ending.isLast(index, stopping: stopping)
            var changed = false
            do {
                changed = try capture.update()
            } catch {
                record(ReplayError(.captureFailed, "\(error.message); the recording stopped and the file was finished"))
                return
            }
            if changed {
                latestChange = index
                lastChange.store(index, ordering: .relaxed)
            }
            // A picture when it changed; a repeat at least once a second (fragments keep coming), while
            // a change is pushed through the encoder (`PushThrough`), and at the last tick (`RecordingEnd`).
            let pushing = push.repeatNow(at: index, lastChange: latestChange,
                                         encodedThrough: encodedThrough.load(ordering: .relaxed))
            if changed || pushing || tick - lastSent >= 1_000_000_000 || last {
                if sendFrame(tick: tick, index: index, waiting: last) { lastSent = tick }
            }
            if last {
                end = start + ending.end(lastTick: index) * 1_000_000_000 / fps
                return
            }
            index += 1
        }
    }

    /// Queues the captured picture for the encoder; drops it (counted) when the encoder is half a
    /// second behind, unless `waiting` (the last picture, which ends the video): that one waits.
    private func sendFrame(tick: Int64, index: Int64, waiting: Bool) -> Bool {
        guard let frame = takeFreeFrame() ?? (waiting ? freeFrames.pop() : nil) else {
            framesDropped.add(1, ordering: .relaxed)
            return false
        }
        frame.copy(from: capture.current)
        frame.timestamp = tick
        frame.tick = index
        var queued = frames.push(frame)
        var attempts = 0
        while !queued, waiting, attempts < 400 {
            MonotonicClock.sleep(until: MonotonicClock.now() + 5_000_000)
            queued = frames.push(frame)
            attempts += 1
        }
        guard queued else {
            _ = freeFrames.push(frame)
            framesDropped.add(1, ordering: .relaxed)
            return false
        }
        return true
    }

    /// A picture to fill: a free one, a new one while fewer than `frameLimit` exist, else nil (the
    /// encoder is half a second behind: the frame is dropped). Never blocks the capture thread.
    private func takeFreeFrame() -> VideoFrame? {
        if let frame = freeFrames.tryPop() { return frame }
        guard framesAllocated < frameLimit else { return nil }
        framesAllocated += 1
        return VideoFrame(width: capture.outputWidth, height: capture.outputHeight)
    }

    // MARK: Video thread

    private func videoLoop(start: Int64) {
        var failed = false
        while let frame = frames.pop() {
            defer { _ = freeFrames.push(frame) }
            guard !failed else { continue }
            do {
                if let latest = try writer.encode(frame, pts: frame.tick, with: videoEncoder, to: videoTrack) {
                    encodedThrough.store(latest, ordering: .relaxed)
                    // The screen has gone still and its last change is out of the encoder: put it on
                    // disk now. While the screen keeps changing, fragments close at their length.
                    if latest >= lastChange.load(ordering: .relaxed) { try writer.flushFragment() }
                }
                framesWritten.add(1, ordering: .relaxed)
            } catch {
                failed = true
                record(ReplayError.from(error))
            }
        }
        guard !failed else { return }
        do {
            try writer.encode(nil as VideoFrame?, pts: 0, with: videoEncoder, to: videoTrack)
        } catch {
            record(ReplayError.from(error))
        }
    }

    // MARK: Audio thread

    /// Cuts, mixes and encodes audio blocks on the media clock until the end of the video; at the
    /// end it waits (as long as the sources' latency needs) for the sound of the last moments.
    private func audioLoop(start: Int64) {
        var failed = false
        defer { for source in sources { source.stop() } }
        while true {
            MonotonicClock.sleep(until: MonotonicClock.now() + 10_000_000)
            let end = endTime.load(ordering: .acquiring)
            let endPosition = end == 0 ? Int64.max : Self.samples(from: start, to: end)
            let now = Self.samples(from: start, to: MonotonicClock.now())
            while let block = mixer.withLock({ mixer in mixer.cursor < endPosition ? mixer.nextBlock(now: now) : nil }) {
                guard !failed else { continue }
                do { try encode(block) } catch {
                    failed = true
                    record(ReplayError.from(error))
                }
            }
            if end != 0, mixer.withLock({ $0.cursor }) >= endPosition { break }
        }
        guard !failed else { return }
        for (encoder, track) in zip(audioEncoders, audioTracks) {
            do { try writer.encode(nil as UnsafeBufferPointer<Float>?, pts: 0, with: encoder, to: track) } catch {
                record(ReplayError.from(error))
                return
            }
        }
    }

    private func encode(_ block: (position: Int64, sources: [[Float]])) throws(MediaError) {
        let microphoneGain: Float = microphoneActive(at: block.position) ? 1 : 0
        let gains = sources.indices.map { $0 == microphoneIndex ? microphoneGain : 1 }
        if options.separateAudioTracks {
            for (index, samples) in block.sources.enumerated() {
                let scaled = gains[index] == 1 ? samples : AudioMixer.mix([samples], gains: [gains[index]])
                try scaled.withUnsafeBufferPointer { buffer throws(MediaError) in
                    try writer.encode(buffer, pts: block.position, with: audioEncoders[index], to: audioTracks[index])
                }
            }
        } else {
            let mixed = block.sources.count == 1 && gains[0] == 1 ? block.sources[0] : AudioMixer.mix(block.sources, gains: gains)
            try mixed.withUnsafeBufferPointer { buffer throws(MediaError) in
                try writer.encode(buffer, pts: block.position, with: audioEncoders[0], to: audioTracks[0])
            }
        }
    }

    private func microphoneActive(at position: Int64) -> Bool {
        microphoneSwitches.withLock { switches in
            switches.last { $0.position <= position }?.on ?? true
        }
    }

    // MARK: Clock

    static func samples(from start: Int64, to time: Int64) -> Int64 {
        let nanoseconds = time - start
        return (nanoseconds * 48 + (nanoseconds >= 0 ? 500_000 : -500_000)) / 1_000_000
    }
}

/// When to push the latest change through libx264's look-ahead with repeats at the full rate.
///
/// x264 gives a picture back only some frames later (its look-ahead and frame threads: about five).
/// While the screen changes every tick that is a sixth of a second; on a still screen no frames
/// follow, and the last change would wait in the encoder (lost to a crash) until more changes came.
/// So once the screen has been still for `settle` (a quarter of a second) after a change, repeats go
/// out until the encoder has given that change back. A repeat costs libx264 several milliseconds at
/// 1080p, so a push starts at most once per `spacing` (two thirds of a second): a cursor that blinks
/// twice a second pays for three pushes in two seconds. At worst a change comes just after a push
/// began and waits for the next: `spacing` plus the encoder's delay, 0.8 s at 30 fps, so it is on
/// disk within the second that `kill -9` may cost.
struct PushThrough {
    let settle: Int64
    let spacing: Int64
    private var target: Int64 = -1     // the change being pushed through, or -1
    private var lastStart = Int64.min / 2

    init(framesPerSecond fps: Int64) {
        settle = max(1, fps / 4)
        spacing = max(settle, fps * 2 / 3)
    }

    /// At tick `index`: whether to send a repeat, given the tick of the latest change and the latest
    /// tick the encoder gave back.
    mutating func repeatNow(at index: Int64, lastChange: Int64, encodedThrough: Int64) -> Bool {
        if target >= 0 {
            if encodedThrough < target { return true }
            target = -1
        }
        guard lastChange > encodedThrough, index - lastChange >= settle, index - lastStart >= spacing else { return false }
        target = lastChange
        lastStart = index
        return true
    }
}
