import ReplayMedia
import ReplayCapture
import ReplayFFmpeg
import Logging
import Synchronization
import Foundation
import ReplaySystem

/// The threads of one capture and what they share. Every C handle here has one owner thread while
/// running: `capture` the capture thread, `videoEncoder` the video thread, `audioEncoders` the audio
/// thread; each destination serialises itself. `destinations` and the outputs are set before `run`
/// (under `attachLock`) and only read after. Hence `@unchecked Sendable`.
final class CapturePipeline: @unchecked Sendable {
    let configuration: EngineConfiguration
    let capture: any FrameSource
    /// Nil for a capture that follows the screen's size: it feeds taps only (a broadcast's frame
    /// ring, an app's own samples), and its pictures are encoded by whoever reads them.
    private let videoEncoder: VideoEncoder?
    private let sources: [any AudioCaptureSource]
    private let roles: [SoundRole]
    /// Which of `sources` make each track (one per configured source, or one for the mix).
    private let trackSources: [[Int]]
    private let microphoneIndex: Int?
    /// The unprotected sink-inputs' mix (the system sound while a protected sink-input plays), if any.
    private let unprotectedMixIndex: Int?
    private let audioEncoders: [AudioEncoder]
    private let audioTrackNames: [String]
    private let logger: Logger
    private let attachLock = Mutex<Void>(())
    private var destinations: [any MediaDestination] = []
    private var taps: [any FrameTap] = []
    private var audioTaps: [any AudioTap] = []
    private var videoOutputs = TrackOutputs()
    private var audioOutputs: [TrackOutputs]

    private let frames: BoundedQueue<VideoFrame>
    private let freeFrames: BoundedQueue<VideoFrame>
    private let frameLimit: Int
    private var framesAllocated = 0   // capture thread only
    /// What each sent picture changed, so that a pooled picture takes only what it lacks (capture thread only).
    private var sentChanges: ChangeHistory
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
    private let failure = Mutex<EngineError?>(nil)
    private let ran = Atomic<Bool>(false)

    private static let audioWait = 14_400   // samples (300 ms) a late source is waited for, at first
    private static let maximumAudioWait = 144_000   // and at most (3 s)
    private static let firstAudioWait = 240_000     // for a source's very first samples (5 s)
    private static let soundStartTimeout: Int64 = 3_000_000_000

    init(configuration: EngineConfiguration, capture: any FrameSource, encoder: VideoEncoder?,
         sources: [(AudioSource, [SoundRole])], logger: Logger) throws(MediaError) {
        self.configuration = configuration
        self.capture = capture
        self.videoEncoder = encoder
        let roles = sources.flatMap(\.1)
        self.roles = roles
        self.sources = roles.map(\.source)
        self.microphoneIndex = roles.firstIndex { if case .microphone = $0 { true } else { false } }
        self.unprotectedMixIndex = roles.firstIndex { if case .unprotectedMix = $0 { true } else { false } }
        var perEntry: [[Int]] = []
        var next = 0
        for entry in sources {
            perEntry.append(Array(next..<(next + entry.1.count)))
            next += entry.1.count
        }
        self.logger = logger
        // One track per source in `sources`' order (the system sound first), or one mix of them all.
        let names = sources.map(\.0.trackName)
        let separate = configuration.audioLayout == .separateTracks || names.count <= 1
        audioTrackNames = separate ? names : [names.contains("Application sound") ? "Application sound and microphone" : "System sound and microphone"]
        trackSources = separate ? perEntry : [Array(roles.indices)]
        var encoders: [AudioEncoder] = []
        for _ in audioTrackNames { encoders.append(try AudioEncoder(logger: logger)) }
        audioEncoders = encoders
        audioOutputs = encoders.map { _ in TrackOutputs() }
        mixer = Mutex(AudioMixer(sourceCount: roles.count, blockSize: encoders.first?.frameSize ?? 1024,
                                 maximumWait: Self.audioWait, firstDataWait: Self.firstAudioWait))
        // Up to half a second of pictures may wait for the encoder (its first frames are slow: libx264
        // faults its buffers in), allocated only when it falls behind; past that, frames are dropped,
        // counted. What a kill -9 loses is this queue, plus the ~5 frames libx264 holds, plus the open
        // fragment (a quarter second): under a second. A one-second queue let a loaded machine lose
        // 1.24 s; at 1080p30 on an idle machine even 6 frames dropped nothing.
        let queueDepth = max(4, configuration.framesPerSecond / 2)
        frames = BoundedQueue(capacity: queueDepth)
        freeFrames = BoundedQueue(capacity: queueDepth + 1)
        frameLimit = queueDepth + 1
        // Pooled pictures come back in turn: one is at most `frameLimit` pictures behind, unless
        // it stood unused while the pool was larger than needed (it then takes everything).
        sentChanges = ChangeHistory(depth: 2 * frameLimit)
        for _ in 0..<3 {
            _ = freeFrames.push(VideoFrame(width: capture.outputWidth, height: capture.outputHeight))
        }
        framesAllocated = 3
    }

    /// Adds a tap that sees every picture before the encoder. Before `run`.
    func attach(tap: any FrameTap) throws(EngineError) {
        try attachLock.withLock { _ throws(EngineError) in
            guard !ran.load(ordering: .acquiring) else {
                throw EngineError(.misuse, "a frame tap is attached before the capture runs")
            }
            taps.append(tap)
        }
    }

    /// Adds a tap that hears every source's sound as it is cut for the encoder. Before `run`.
    func attach(audioTap: any AudioTap) throws(EngineError) {
        try attachLock.withLock { _ throws(EngineError) in
            guard !ran.load(ordering: .acquiring) else {
                throw EngineError(.misuse, "an audio tap is attached before the capture runs")
            }
            audioTaps.append(audioTap)
        }
    }

    /// Adds `destination`'s tracks: the screen, then each sound track. Before `run`.
    func attach(_ destination: any MediaDestination) throws(EngineError) {
        try attachLock.withLock { _ throws(EngineError) in
            guard !ran.load(ordering: .acquiring) else {
                throw EngineError(.misuse, "a destination is attached before the capture runs")
            }
            guard configuration.screenSizeChanges == .scaledToFit, let videoEncoder else {
                throw EngineError(.misuse, "a capture whose pictures follow the screen's size feeds taps only: a destination's track has one size")
            }
            do throws(MediaError) {
                videoOutputs.add(destination, track: try destination.addTrack(videoEncoder.trackFormat(name: "Screen")))
                for (index, encoder) in audioEncoders.enumerated() {
                    audioOutputs[index].add(destination, track: try destination.addTrack(encoder.trackFormat(name: audioTrackNames[index])))
                }
            } catch {
                throw EngineError(error)
            }
            destinations.append(destination)
        }
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

    func statistics() -> EngineStatistics {
        var statistics = EngineStatistics()
        let start = startTime.load(ordering: .acquiring)
        if start != 0 {
            let end = endTime.load(ordering: .acquiring)
            statistics.elapsedSeconds = Double((end != 0 ? end : MonotonicClock.now()) - start) / 1e9
        }
        statistics.framesWritten = framesWritten.load(ordering: .relaxed)
        statistics.framesDropped = framesDropped.load(ordering: .relaxed)
        statistics.bytesWritten = attachLock.withLock { _ in destinations.reduce(0) { $0 + $1.bytesWritten } }
        statistics.microphoneOn = microphoneIndex != nil && microphoneOn.load(ordering: .relaxed)
        statistics.capturing = start != 0
        return statistics
    }

    /// Records until stopped; returns the error that ended it, if any. The file is finished either way.
    func run() async -> EngineError? {
        let destinations = attachLock.withLock { _ in
            ran.exchange(true, ordering: .acquiringAndReleasing) ? nil : self.destinations
        }
        guard let destinations else { return EngineError(.misuse, "a capture runs once") }
        do throws(MediaError) {
            for destination in destinations { try destination.start() }
        } catch {
            return EngineError(error)
        }
        // The sound server may take a while to send a new stream's first samples (over a second for
        // a monitor on a fresh PulseAudio): the recording's time zero waits for them, at most 3 s,
        // like iOS's count-down, so that it does not begin with silence. The session says
        // "starting" meanwhile.
        // Toolkits watching the root window's `_OPENREPLAYKIT_CAPTURED` hide what they protect from now on.
        let display = configuration.video.display
        await DedicatedThread.run(named: "replay-flag") { CapturedFlag.begin(display: display) }
        let sourcesStarted = MonotonicClock.now()
        for source in sources { source.start() }
        // Windows beneath replayd's own (the indicator) are redirected now, so that their clients have
        // repainted them before the first frame is recomposed from them.
        await DedicatedThread.run(named: "replay-prime") { self.capture.prime() }
        while !sources.allSatisfy(\.hasData), MonotonicClock.now() - sourcesStarted < Self.soundStartTimeout,
              !stopRequested.load(ordering: .acquiring) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if let late = sources.first(where: { !$0.hasData }) {
            logger.warning("audio \(late.name) sent nothing for 3 s; recording starts without waiting for it")
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
            // Weak: the source keeps its sink, and the pipeline keeps the source (a strong `self` here kept
            // every finished recording's pipeline, its capture and its sound sources alive: 130 MB a session).
            source.deliver(to: { [weak self] anchor, offset, samples, latency in
                guard let self else { return }
                let position = Self.samples(from: start, to: anchor) + offset
                // Wait for a bursty source as long as its latency says, plus 100 ms, at most 3 s.
                let wait = min(Self.maximumAudioWait, Int(Self.samples(from: 0, to: latency)) + 4_800)
                self.mixer.withLock { mixer in
                    if wait > mixer.maximumWait { mixer.maximumWait = wait }
                    mixer.append(source: index, position: position, samples: samples)
                }
            })
        }
        // With no destination (in-app capture: taps only) nothing is encoded: no video thread, and the
        // audio thread only cuts the sound for the taps.
        let encoding = !destinations.isEmpty
        var threads: [(name: String, body: @Sendable () -> Void)] = [("replay-capture", { self.captureLoop(start: start, encoding: encoding) })]
        if encoding { threads.append(("replay-video", { self.videoLoop(start: start) })) }
        if !audioEncoders.isEmpty { threads.append(("replay-audio", { self.audioLoop(start: start, encoding: encoding) })) }
        await DedicatedThread.runAll(threads)
        await DedicatedThread.run(named: "replay-flag") { CapturedFlag.end(display: display) }
        for destination in destinations {
            do throws(MediaError) { try destination.finish() } catch { record(EngineError(error)) }
        }
        let counters = mixer.withLock { $0.perSourceCounters }
        for (source, counter) in zip(sources, counters) where counter != AudioMixer.Counters() {
            logger.info("audio \(source.name): \(counter.silenceFilled) samples of silence filled in, \(counter.discarded) late samples discarded, \(counter.notWaitedFor) not waited for (silent there)")
        }
        logger.info("capture finished: \(framesWritten.load(ordering: .relaxed)) frames, \(framesDropped.load(ordering: .relaxed)) dropped, \(statistics().bytesWritten) bytes")
        return failure.withLock { $0 }
    }

    /// Keeps the first error (the one that ended the recording), logs it, and stops.
    private func record(_ error: EngineError) {
        let first = failure.withLock { failure in
            guard failure == nil else { return false }
            failure = error
            return true
        }
        if first { logger.error("\(error.message)") }
        requestStop()
    }

    // MARK: Capture thread

    private func captureLoop(start: Int64, encoding: Bool) {
        let fps = Int64(configuration.framesPerSecond)
        let interval = 1_000_000_000 / fps
        // Frame n is due at start + n/fps exactly: no rounding error accumulates.
        let ending = RecordingEnd(durationSeconds: configuration.durationSeconds, framesPerSecond: fps)
        var index: Int64 = 0
        var tick = start
        var end: Int64?   // the recording's end, once its last picture went out
        var lastSent: Int64?   // nil until the first picture went out (which goes out changed or not)
        var spacing = PictureSpacing(framesPerSecond: fps)   // capture only
        var push = PushThrough(framesPerSecond: fps)
        var latestChange: Int64 = -1   // the capture's own copy of `lastChange` (it is the only writer)
        var previous: Int64?   // when the last picture was taken
        defer {
            endTime.store(end ?? tick, ordering: .releasing)
            frames.close()
        }
        while true {
            tick = start + index * 1_000_000_000 / fps
            // Capture only (an app's own samples, no encoder on a frame clock): a picture is taken as soon
            // as the application draws instead of at the next tick, so that what it draws reaches its handler
            // in milliseconds, not up to a frame later; at most `fps` a second on average (`PictureSpacing`).
            let earliest = previous.map { spacing.earliest(after: $0) }
            if !encoding, let earliest, earliest < tick {
                MonotonicClock.sleep(until: earliest)
                if capture.waitForChange(until: tick) { tick = max(MonotonicClock.now(), earliest) }
            } else {
                MonotonicClock.sleep(until: tick)
            }
            previous = tick
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
            do throws(CaptureError) {
                changed = try capture.update()
            } catch {
                record(EngineError(.captureFailed, "\(error.message); the capture stopped and its destinations were finished"))
                return
            }
            if capture.endedByPerson, !stopping { requestStop() }
            if changed {
                latestChange = index
                lastChange.store(index, ordering: .relaxed)
            }
            // A picture when it changed; a repeat at least once a second (fragments keep coming), while
            // a change is pushed through the encoder (`PushThrough`), and at the last tick (`RecordingEnd`).
            let pushing = push.repeatNow(at: index, lastChange: latestChange,
                                         encodedThrough: encodedThrough.load(ordering: .relaxed))
            if changed || pushing || lastSent.map({ tick - $0 >= 1_000_000_000 }) ?? true || last {
                if sendFrame(tick: tick, index: index, waiting: last, encoding: encoding) {
                    lastSent = tick
                    spacing.sent(at: tick)
                }
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
    /// Not `encoding` (taps only): the taps' copy is the picture's whole journey.
    private func sendFrame(tick: Int64, index: Int64, waiting: Bool, encoding: Bool) -> Bool {
        // Taps see every picture, whether or not the encoder keeps up.
        for tap in taps { tap.receive(capture.current, tick: index, time: tick) }
        guard encoding else {
            // As if encoded at once: no repeats to push a change through an encoder (`PushThrough`).
            encodedThrough.store(index, ordering: .relaxed)
            framesWritten.add(1, ordering: .relaxed)
            capture.current.changedBlocks.removeAll()
            return true
        }
        guard let frame = takeFreeFrame() ?? (waiting ? freeFrames.pop() : nil) else {
            framesDropped.add(1, ordering: .relaxed)
            return false
        }
        // Only the macroblocks that changed since this pooled picture last held one: on a still
        // screen a small part of the picture instead of all of it. This picture's own changes are
        // recorded first, so that they are among them (a picture then not queued leaves its record,
        // and its changes stay in the capture's map for the next: a superset, harmless).
        let number = sentChanges.record(capture.current.changedBlocks)
        frame.copy(from: capture.current, blocks: sentChanges.changes(since: frame.pictureNumber))
        frame.timestamp = tick
        frame.tick = index
        // Numbered before the encoder's thread may take it.
        frame.pictureNumber = number
        var queued = frames.push(frame)
        var attempts = 0
        while !queued, waiting, attempts < 400 {
            MonotonicClock.sleep(until: MonotonicClock.now() + 5_000_000)
            queued = frames.push(frame)
            attempts += 1
        }
        guard queued else {
            _ = freeFrames.push(frame)   // holding picture `number`, as recorded
            framesDropped.add(1, ordering: .relaxed)
            return false
        }
        // The next picture's changes count from this one (a dropped picture's stay in).
        capture.current.changedBlocks.removeAll()
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
        guard let videoEncoder else { return }
        var failed = false
        while let frame = frames.pop() {
            defer { _ = freeFrames.push(frame) }
            guard !failed else { continue }
            do throws(MediaError) {
                if let latest = try videoEncoder.encode(frame, pts: frame.tick, to: videoOutputs) {
                    encodedThrough.store(latest, ordering: .relaxed)
                    // The screen has gone still and its last change is out of the encoder: put it on
                    // disk now. While the screen keeps changing, fragments close at their length.
                    if latest >= lastChange.load(ordering: .relaxed) {
                        for destination in destinations { try destination.flush() }
                    }
                }
                framesWritten.add(1, ordering: .relaxed)
            } catch {
                failed = true
                record(EngineError(error))
            }
        }
        guard !failed else { return }
        do throws(MediaError) {
            try videoEncoder.encode(nil, pts: 0, to: videoOutputs)
        } catch {
            record(EngineError(error))
        }
    }

    // MARK: Audio thread

    /// Cuts, mixes and encodes audio blocks on the media clock until the end of the video; at the
    /// end it waits (as long as the sources' latency needs) for the sound of the last moments.
    private func audioLoop(start: Int64, encoding: Bool) {
        var failed = false
        defer { for source in sources { source.stop() } }
        while true {
            MonotonicClock.sleep(until: MonotonicClock.now() + 10_000_000)
            let end = endTime.load(ordering: .acquiring)
            let endPosition = end == 0 ? Int64.max : Self.samples(from: start, to: end)
            let now = Self.samples(from: start, to: MonotonicClock.now())
            // Whether a protected sink-input is near the block is decided with the cut, once: the
            // unprotected mix is waited for only there, and the gains follow the same answer.
            while let (block, protected) = mixer.withLock({ mixer -> ((position: Int64, sources: [[Float]]), Bool)? in
                guard mixer.cursor < endPosition else { return nil }
                let protected = protectedActive(from: mixer.cursor, count: Int64(mixer.blockSize))
                let unwaited: Set<Int> = protected ? [] : unprotectedMixIndex.map { [$0] } ?? []
                return mixer.nextBlock(now: now, unwaited: unwaited).map { ($0, protected) }
            }) {
                // One look at the microphone switches per block, for both the taps and the encoders.
                let gains = gains(at: block.position, protected: protected)
                tapAudio(block, gains: gains, start: start)
                guard !failed, encoding else { continue }
                do throws(MediaError) { try encode(block, gains: gains) } catch {
                    failed = true
                    record(EngineError(error))
                }
            }
            if end != 0, mixer.withLock({ $0.cursor }) >= endPosition { break }
        }
        guard !failed, encoding else { return }
        for (encoder, outputs) in zip(audioEncoders, audioOutputs) {
            do throws(MediaError) { try encoder.encode(nil, pts: 0, to: outputs) } catch {
                record(EngineError(error))
                return
            }
        }
    }

    /// The block to the audio taps, on the media clock: the microphone (silent while off) as
    /// `.microphone`, every other source mixed with its gain (the app's own sound; the system sound,
    /// with protected sink-inputs silent) as `.application`.
    private func tapAudio(_ block: (position: Int64, sources: [[Float]]), gains: [Float], start: Int64) {
        guard !audioTaps.isEmpty else { return }
        let time = start + block.position * 1_000_000_000 / 48_000
        let others = block.sources.indices.filter { $0 != microphoneIndex }
        var tapped: [(TappedAudioSource, [Float])] = []
        if !others.isEmpty {
            let blocks = others.map { block.sources[$0] }
            let otherGains = others.map { gains[$0] }
            tapped.append((.application, blocks.count == 1 && otherGains[0] == 1 ? blocks[0] : AudioMixer.mix(blocks, gains: otherGains)))
        }
        if let microphoneIndex {
            let samples = block.sources[microphoneIndex]
            tapped.append((.microphone, gains[microphoneIndex] == 1 ? samples : AudioMixer.mix([samples], gains: [gains[microphoneIndex]])))
        }
        for (source, samples) in tapped {
            samples.withUnsafeBufferPointer { buffer in
                for tap in audioTaps { tap.receive(audio: buffer, from: source, time: time) }
            }
        }
    }

    /// Each source's gain for the block at `position`: the microphone 0 while it is off; where
    /// `protected` (a protected sink-input plays, or did half a second before: the sink's monitor may
    /// still hold its last sound), the system sound is the unprotected sink-inputs' mix instead of
    /// the monitor.
    private func gains(at position: Int64, protected: Bool) -> [Float] {
        let microphoneGain: Float = microphoneActive(at: position) ? 1 : 0
        return roles.map { role in
            switch role {
            case .microphone: microphoneGain
            case .systemMonitor: protected ? 0 : 1
            case .unprotectedMix: protected ? 1 : 0
            case .plain: 1
            }
        }
    }

    private func encode(_ block: (position: Int64, sources: [[Float]]), gains: [Float]) throws(MediaError) {
        for (track, members) in trackSources.enumerated() {
            let blocks = members.map { block.sources[$0] }
            let trackGains = members.map { gains[$0] }
            let mixed = blocks.count == 1 && trackGains[0] == 1 ? blocks[0] : AudioMixer.mix(blocks, gains: trackGains)
            try mixed.withUnsafeBufferPointer { buffer throws(MediaError) in
                try audioEncoders[track].encode(buffer, pts: block.position, to: audioOutputs[track])
            }
        }
    }

    /// Whether any sample of [position, position + count) falls where a protected sink-input played.
    private func protectedActive(from position: Int64, count: Int64) -> Bool {
        let start = startTime.load(ordering: .acquiring)
        guard start != 0 else { return false }
        var spans: [(start: Int64, end: Int64)] = []
        for role in roles {
            guard case .unprotectedMix(let source) = role else { continue }
            // Begins and ends pair up, and may nest (a sink-input that went away before it could be
            // looked at is one begin and end inside whatever else was protected, possibly from
            // earlier): a span runs from its earliest begin to its latest end.
            var depth = 0
            var from: Int64 = 0, to: Int64 = 0
            for change in source.protectionHistory() {
                let at = Self.samples(from: start, to: change.time)
                if change.active {
                    from = depth == 0 ? at : min(from, at)
                    to = depth == 0 ? at : to
                    depth += 1
                } else if depth > 0 {
                    depth -= 1
                    to = max(to, at)
                    // A margin on both sides: from 100 ms before it began to 500 ms after it ended.
                    if depth == 0 { spans.append((from - 4_800, to + 24_000)) }
                }
            }
            if depth > 0 { spans.append((from - 4_800, Int64.max)) }
        }
        return spans.contains { $0.start < position + count && position < $0.end }
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
