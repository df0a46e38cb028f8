import CPulse
package import ReplayMedia
package import Logging
import Synchronization
import Foundation

/// A sound source the capture pipeline mixes: the microphone (`PulseAudioSource`), the system sound
/// (`SystemSoundSource`) or a set of sink-inputs (`SinkInputAudioSource`). 48 kHz stereo float, stamped on the monotonic clock.
package protocol AudioCaptureSource: AnyObject, Sendable {
    /// What it records, for the log.
    var name: String { get }
    /// True once it is ready to deliver (some sources take a second to send their first chunk).
    var hasData: Bool { get }
    func start()
    /// From now on every chunk goes to `sink`, until `stop()`. Called once.
    func deliver(to sink: @escaping AudioSink)
    func stop()
}

extension PulseAudioSource: AudioCaptureSource {
    package var name: String { "microphone" }
}

/// Records what some of PulseAudio's playback streams (sink-inputs) play, each through a monitor
/// stream of that sink-input alone (`pa_stream_set_monitor_stream`: after its volume and mute, and
/// nothing else of the sink), mixed into one 48 kHz stereo signal:
/// - `.application(pid)`: the sink-inputs whose `application.process.id` is that process or one
///   below it (the application's own sound);
/// - `.unprotected`: every sink-input (what the system mix is built from while a protected one plays).
/// Sink-inputs with `openreplaykit.protected=1` are never recorded. Sink-inputs that appear later
/// are followed (subscription); one that goes away contributes silence from then on.
/// `.unprotected` also reads the system sound on its connection (`systemSound()`), held while an
/// announced sink-input has not been looked at.
///
/// Threads: PulseAudio's threaded main loop runs the context and the monitor streams (a
/// `SinkInputMonitor`: their chunks go into one buffer per sink-input); a pacing thread of ours
/// takes 10 ms from each buffer every 10 ms on the monotonic clock, a little behind (to absorb the
/// server's bursts), and delivers the sum. A buffer that runs dry gives silence there (counted);
/// one that runs too far ahead (the server's clock faster than ours) loses its oldest samples
/// (counted, logged): nothing silently.
package final class SinkInputAudioSource: AudioCaptureSource, @unchecked Sendable {
    package enum Selection: Sendable, Equatable {
        case application(processID: Int32)
        case unprotected

        /// What it records, for the log.
        var name: String {
            switch self {
            case .application(let pid): "application \(pid)"
            case .unprotected: "unprotected sink-inputs"
            }
        }
    }

    package let selection: Selection
    package var name: String { selection.name }

    fileprivate static let rate = 48_000
    fileprivate static let chunk = 480             // frames per 10 ms
    private static let prime = 1_440               // frames a buffer holds before it is drawn from (30 ms)
    fileprivate static let ceiling = 14_400        // frames beyond which the oldest are dropped (300 ms)
    fileprivate static let heldCeiling = 480_000   // system sound held beyond this is dropped, oldest first (10 s)
    /// How far behind the clock chunks are cut: the server's fragments and scheduling jitter.
    private static let delay: Int64 = 60_000_000

    private let logger: Logger
    /// PulseAudio's side. Its callbacks reach it and never this object, and this object's deinit
    /// stops PulseAudio's thread before letting it go: no callback meets anything being torn down.
    fileprivate let monitor: SinkInputMonitor
    private let stopping = Atomic<Bool>(false)
    private let sinkSlot = AudioSinkSlot()
    private let done = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    /// When protection began (a protected sink-input, none before: from its announcement) and
    /// ended (the last one gone), monotonic ns, in the order learnt. Begins and ends pair up and may
    /// nest: a sink-input that went away before it could be looked at adds a begin (its announcement)
    /// and an end (now), whatever else is protected.
    package func protectionHistory() -> [(time: Int64, active: Bool)] {
        monitor.protectionChanges.withLock { $0 }
    }

    /// True while a protected sink-input exists (as the last subscription event said).
    package var protectedActive: Bool { monitor.protectedNow.load(ordering: .acquiring) }

    package var hasData: Bool { monitor.ready.load(ordering: .acquiring) }

    /// How long the question about an announced sink-input waits before it is asked (ms; 0, the
    /// default, asks at once). Tests set it to show that the system sound is held, not let through,
    /// while the answer is on its way.
    package static var lookupDelayForTests: Int {
        get { lookupDelay.load(ordering: .relaxed) }
        set { lookupDelay.store(newValue, ordering: .relaxed) }
    }
    fileprivate static let lookupDelay = Atomic<Int>(0)

    /// The system sound (the default sink's monitor) read on this source's own connection, for the
    /// system mix that this source (`.unprotected`) stands in for while a protected sink-input plays.
    package func systemSound() -> SystemSoundSource {
        precondition(selection == .unprotected, "the system sound goes with the unprotected sink-inputs' mix")
        return SystemSoundSource(owner: self)
    }

    /// Connects to the server (its reason when it can't) and starts following sink-inputs.
    package init(selection: Selection, logger: Logger) throws(AudioError) {
        self.selection = selection
        self.logger = logger
        self.monitor = try SinkInputMonitor(selection: selection, logger: logger)
    }

    deinit {
        stop()
        monitor.close()
    }

    // MARK: Pacing thread

    package func start() {
        started.store(true, ordering: .releasing)
        let thread = Thread { [self] in
            self.paceLoop()
            self.done.signal()
        }
        thread.name = "replayd-audio-sink-inputs"
        thread.start()
    }

    package func deliver(to sink: @escaping AudioSink) {
        sinkSlot.set(sink)
    }

    package func stop() {
        guard started.load(ordering: .acquiring), !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        done.wait()
    }

    /// Every 10 ms of the clock, 10 ms from each sink-input's buffer, summed.
    private func paceLoop() {
        let anchor = MonotonicClock.now()
        var index: Int64 = 0
        var mixed = [Float](repeating: 0, count: Self.chunk * 2)
        var sink: AudioSink?
        while !stopping.load(ordering: .relaxed) {
            MonotonicClock.sleep(until: anchor + (index + 1) * 10_000_000 + Self.delay)
            for i in mixed.indices { mixed[i] = 0 }
            monitor.buffers.withLock { buffers in
                for key in Array(buffers.keys) {
                    var buffer = buffers[key]!
                    if !buffer.primed, buffer.samples.count / 2 >= Self.prime { buffer.primed = true }
                    if buffer.primed {
                        let have = min(Self.chunk, buffer.samples.count / 2)
                        for i in 0..<(have * 2) { mixed[i] += buffer.samples[i] }
                        buffer.samples.removeFirst(have * 2)
                        if have < Self.chunk {
                            // Ran dry: silence here, and wait for a few chunks again.
                            buffer.silence += Self.chunk - have
                            buffer.primed = false
                        }
                    }
                    if buffer.gone, buffer.samples.isEmpty {
                        if buffer.silence > 0 || buffer.dropped > 0 {
                            logger.info("audio \(name): sink-input \(key): \(buffer.silence) samples of silence filled, \(buffer.dropped) dropped (server ahead of the clock)")
                        }
                        buffers[key] = nil
                    } else {
                        buffers[key] = buffer
                    }
                }
            }
            for i in mixed.indices { mixed[i] = min(1, max(-1, mixed[i])) }
            if sink == nil { sink = sinkSlot.current }
            if let sink {
                mixed.withUnsafeBufferPointer { sink(anchor, index * Int64(Self.chunk), $0, Self.delay) }
            }
            index += 1
        }
    }
}

/// What the computer plays: the default sink's monitor, read on the same PulseAudio connection as
/// the subscription to sink-inputs of the unprotected mix it belongs to
/// (`SinkInputAudioSource.systemSound()`).
///
/// Why one connection: the server announces a new sink-input (its subscription event, sent from its
/// main loop as the sink-input is made) before any of that sink-input's sound can be in the sink's
/// monitor (its client sends the sound only after the answer to its creation), and one connection
/// keeps that order up to PulseAudio's thread here. A chunk of the monitor that comes while an
/// announced sink-input has not been looked at yet (or before the first list of them) is held until
/// it has: when a chunk reaches the recording, the protection history already says whether a
/// protected sink-input may be in it, and no timing margin decides. So the system sound is cut as
/// soon as the monitor has sent it, not paced behind the unprotected mix.
///
/// Timing as `PulseAudioSource`'s: `ArrivalClock` from when the chunks arrive, and the sink's
/// latency added (its monitor's samples are heard that much later).
package final class SystemSoundSource: AudioCaptureSource, @unchecked Sendable {
    /// Keeps the connection (and its PulseAudio thread) for as long as this source is used.
    private let owner: SinkInputAudioSource
    package var name: String { "systemAudio" }
    package var hasData: Bool { owner.monitor.systemHasData.load(ordering: .acquiring) }

    fileprivate init(owner: SinkInputAudioSource) {
        self.owner = owner
    }

    package func start() { owner.monitor.startSystemStream() }
    package func deliver(to sink: @escaping AudioSink) { owner.monitor.systemSink.set(sink) }
    package func stop() { owner.monitor.systemStopped.store(true, ordering: .releasing) }
}

/// One sink-input's samples, between PulseAudio's thread and the pacing thread.
private struct StreamBuffer {
    var samples: [Float] = []
    var primed = false
    var silence = 0
    var dropped = 0
    var gone = false
}

/// A `SinkInputAudioSource`'s PulseAudio side: the threaded main loop, the context, its
/// subscription to sink-inputs and one monitor stream per wanted sink-input. It owns those C
/// handles. Its callbacks run on PulseAudio's thread and reach only this object; `close()` stops
/// that thread (its owner calls it before letting it go), and only then are the handles freed.
private final class SinkInputMonitor: @unchecked Sendable {
    private let selection: SinkInputAudioSource.Selection
    private let logger: Logger
    private let mainloop: OpaquePointer
    private let context: OpaquePointer
    // Main-loop thread only (and close(), once that thread has stopped):
    private var streams: [UInt32: OpaquePointer] = [:]
    private var tags: [UInt32: Unmanaged<SinkInputTag>] = [:]
    private var protectedInputs: Set<UInt32> = []
    private var members: Set<Int32> = []
    private var listed = false
    private var closed = false
    /// Sink-inputs announced (new or changed) that have not been looked at yet, with when each was
    /// first announced: one of them may be protected.
    private var announced: [UInt32: Int64] = [:]
    /// When this connection was made: a protected sink-input in the first list may have played since.
    private let connectedAt = MonotonicClock.now()
    // The system sound (`SystemSoundSource`), main-loop thread only:
    private var systemStream: OpaquePointer?
    private var systemClock = ArrivalClock(sampleRate: SinkInputAudioSource.rate)
    private var systemLastRead: Int64?
    private var systemHeld: [[Float]] = []
    private var systemHeldFrames = 0
    private var systemHeldDropped = 0
    private var systemDelivered: Int64 = 0
    private var systemAhead: Int64?
    private var systemAskedAhead = false
    // Shared with the sources:
    let systemSink = AudioSinkSlot()
    let systemHasData = Atomic<Bool>(false)
    let systemStopped = Atomic<Bool>(false)
    let buffers = Mutex<[UInt32: StreamBuffer]>([:])
    let ready = Atomic<Bool>(false)
    /// Protection begun and ended (monotonic ns), as `SinkInputAudioSource.protectionHistory()` says.
    let protectionChanges = Mutex<[(time: Int64, active: Bool)]>([])
    let protectedNow = Atomic<Bool>(false)

    private var name: String { selection.name }

    /// A sink-input's index and this monitor, as PulseAudio's callbacks get them (userdata): for a
    /// monitor stream's reads, and for one question about an announced sink-input (released at its end).
    private final class SinkInputTag {
        let index: UInt32
        unowned let owner: SinkInputMonitor
        init(index: UInt32, owner: SinkInputMonitor) {
            self.index = index
            self.owner = owner
        }
    }

    /// Connects to the server (its reason when it can't) and starts following sink-inputs.
    init(selection: SinkInputAudioSource.Selection, logger: Logger) throws(AudioError) {
        guard let mainloop = pa_threaded_mainloop_new() else { throw AudioError(message: "cannot create a PulseAudio main loop") }
        guard let context = pa_context_new(pa_threaded_mainloop_get_api(mainloop), "replayd") else {
            pa_threaded_mainloop_free(mainloop)
            throw AudioError(message: "cannot create a PulseAudio context")
        }
        self.mainloop = mainloop
        self.context = context
        self.selection = selection
        self.logger = logger
        if case .application(let pid) = selection { members = ProcessTree.members(rootedAt: pid) }
        // The state callback only wakes the waiting thread: its userdata is the main loop itself.
        pa_context_set_state_callback(context, { _, userdata in
            pa_threaded_mainloop_signal(OpaquePointer(userdata!), 0)
        }, UnsafeMutableRawPointer(mainloop))
        pa_threaded_mainloop_lock(mainloop)
        var failure: String?
        if pa_context_connect(context, nil, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 || pa_threaded_mainloop_start(mainloop) < 0 {
            failure = String(cString: pa_strerror(pa_context_errno(context)))
        } else {
            while true {
                let state = pa_context_get_state(context)
                if state == PA_CONTEXT_READY { break }
                if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED {
                    failure = String(cString: pa_strerror(pa_context_errno(context)))
                    break
                }
                pa_threaded_mainloop_wait(mainloop)
            }
        }
        if failure == nil {
            let me = Unmanaged.passUnretained(self).toOpaque()
            pa_context_set_subscribe_callback(context, { _, event, index, userdata in
                let monitor = Unmanaged<SinkInputMonitor>.fromOpaque(userdata!).takeUnretainedValue()
                monitor.subscriptionEvent(event.rawValue, index: index)
            }, me)
            if let operation = pa_context_subscribe(context, PA_SUBSCRIPTION_MASK_SINK_INPUT, nil, nil) { pa_operation_unref(operation) }
            if let operation = pa_context_get_sink_input_info_list(context, { _, info, eol, userdata in
                let monitor = Unmanaged<SinkInputMonitor>.fromOpaque(userdata!).takeUnretainedValue()
                if eol != 0 { monitor.listDone() } else if let info { monitor.consider(info) }
            }, me) { pa_operation_unref(operation) }
        }
        pa_threaded_mainloop_unlock(mainloop)
        // deinit (which runs when a fully initialised object's init throws) closes it all; no
        // callback but the state's (which touches only the main loop) was set.
        if let failure { throw AudioError(message: failure) }
    }

    /// Stops PulseAudio's thread (no callback runs after this returns), then frees the streams,
    /// the context and the main loop. Once; not on PulseAudio's thread.
    func close() {
        guard !closed else { return }
        closed = true
        pa_threaded_mainloop_stop(mainloop)
        for stream in streams.values { Self.release(stream) }
        streams = [:]
        if let systemStream { Self.release(systemStream) }
        systemStream = nil
        for tag in tags.values { tag.release() }
        tags = [:]
        pa_context_disconnect(context)
        pa_context_unref(context)
        pa_threaded_mainloop_free(mainloop)
    }

    deinit {
        close()
    }

    // MARK: Main-loop thread (PulseAudio's callbacks, its lock held)

    private func subscriptionEvent(_ event: UInt32, index: UInt32) {
        guard event & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue else { return }
        if event & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue == PA_SUBSCRIPTION_EVENT_REMOVE.rawValue {
            endStream(index)
            setProtected(index, false, since: MonotonicClock.now())
            // One still announced stays so until its question is answered (it will be, if only
            // with "no such sink-input"): what it played meanwhile is held until then.
            return
        }
        // New, or changed (its properties may now say protected): the system sound is held from
        // now until it has been looked at again.
        if announced[index] == nil { announced[index] = MonotonicClock.now() }
        let lookup = Unmanaged.passRetained(SinkInputTag(index: index, owner: self))
        let delay = SinkInputAudioSource.lookupDelay.load(ordering: .relaxed)
        if delay > 0 {
            // Tests: the question waits on PulseAudio's own timer (its thread goes on reading the monitor).
            _ = pa_context_rttime_new(context, pa_rtclock_now() + UInt64(delay) * 1000, { api, event, _, userdata in
                api?.pointee.time_free(event)
                let lookup = Unmanaged<SinkInputTag>.fromOpaque(userdata!)
                lookup.takeUnretainedValue().owner.ask(lookup)
            }, lookup.toOpaque())
        } else {
            ask(lookup)
        }
    }

    /// Asks the server about one announced sink-input; the answer (or its absence) settles it.
    private func ask(_ lookup: Unmanaged<SinkInputTag>) {
        let asked = pa_context_get_sink_input_info(context, lookup.takeUnretainedValue().index, { _, info, eol, userdata in
            let lookup = Unmanaged<SinkInputTag>.fromOpaque(userdata!)
            let (owner, index) = (lookup.takeUnretainedValue().owner, lookup.takeUnretainedValue().index)
            if eol == 0, let info {
                owner.consider(info, since: owner.announced[index] ?? MonotonicClock.now())
                owner.settle(index, answered: true)
            } else {
                owner.settle(index, answered: false)
            }
            // The end of the answer (after the info, or alone): the question is over.
            if eol != 0 { lookup.release() }
        }, lookup.toOpaque())
        if let asked {
            pa_operation_unref(asked)
        } else {
            settle(lookup.takeUnretainedValue().index, answered: false)
            lookup.release()
        }
    }

    /// The announced sink-input `index` has been looked at. When the server could not say what it
    /// was (it went away first), it is counted protected from its announcement until now: it may
    /// have played into the held sound. Then the held system sound goes on, if nothing else is pending.
    private func settle(_ index: UInt32, answered: Bool) {
        guard let since = announced.removeValue(forKey: index) else { return }
        if !answered, !protectedInputs.contains(index) {
            protectionChanges.withLock { $0.append(contentsOf: [(since, true), (MonotonicClock.now(), false)]) }
            logger.info("a sink-input went away before it could be looked at: the system sound leaves out its moment as if it were protected")
        }
        flushSystemSound()
    }

    private func listDone() {
        listed = true
        if streams.isEmpty { ready.store(true, ordering: .releasing) }
        flushSystemSound()
    }

    private func consider(_ info: UnsafePointer<pa_sink_input_info>, since: Int64? = nil) {
        let index = info.pointee.index
        let isProtected = pa_proplist_gets(info.pointee.proplist, "openreplaykit.protected").map { String(cString: $0) } == "1"
        // One in the first list may have played since before this connection.
        setProtected(index, isProtected, since: since ?? connectedAt)
        let wanted: Bool
        switch selection {
        case .unprotected:
            wanted = !isProtected
        case .application(let root):
            guard let text = pa_proplist_gets(info.pointee.proplist, "application.process.id"),
                  let pid = Int32(String(cString: text)) else { wanted = false; break }
            if !members.contains(pid) { members = ProcessTree.members(rootedAt: root) }
            wanted = !isProtected && members.contains(pid)
        }
        if wanted, streams[index] == nil {
            beginStream(index)
        } else if !wanted, streams[index] != nil {
            endStream(index)
        }
    }

    /// `since`: when it began (or ceased) to be protected, as near as is known: for one that
    /// becomes protected, its announcement (its sound can only follow that), never later.
    private func setProtected(_ index: UInt32, _ on: Bool, since: Int64) {
        let before = !protectedInputs.isEmpty
        if on { protectedInputs.insert(index) } else { protectedInputs.remove(index) }
        let after = !protectedInputs.isEmpty
        guard before != after else { return }
        protectedNow.store(after, ordering: .releasing)
        protectionChanges.withLock { $0.append((since, after)) }
        logger.info("a protected sink-input \(after ? "plays: it is left out of the system sound" : "is gone")")
    }

    // MARK: The system sound (main-loop thread)

    /// Connects the default sink's monitor on this connection. Once, from `SystemSoundSource.start()`.
    func startSystemStream() {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        guard systemStream == nil, !closed else { return }
        // Timing updates, as pa_simple asks: the stream's latency goes with its chunks.
        let timing = pa_stream_flags_t(rawValue: PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue)
        systemStream = recordStream(named: "system audio", device: "@DEFAULT_MONITOR@", flags: timing) { stream in
            pa_stream_set_read_callback(stream, { stream, _, userdata in
                Unmanaged<SinkInputMonitor>.fromOpaque(userdata!).takeUnretainedValue().systemReadable(stream!)
            }, Unmanaged.passUnretained(self).toOpaque())
        }
        if systemStream == nil {
            logger.error("audio systemAudio: cannot record the default sink's monitor: \(String(cString: pa_strerror(pa_context_errno(context))))")
        }
    }

    /// A record stream on this connection: 48 kHz stereo float in 10 ms fragments, the latency
    /// adjusted to them, plus `flags`. `prepare` sets it up before it connects (its read callback,
    /// the sink-input it monitors). Nil when the server refuses (`pa_context_errno` says why).
    private func recordStream(named name: String, device: String?, flags: pa_stream_flags_t,
                              prepare: (OpaquePointer) -> Void) -> OpaquePointer? {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(SinkInputAudioSource.rate), channels: 2)
        guard let stream = pa_stream_new(context, name, &spec, nil) else { return nil }
        prepare(stream)
        let bytes = UInt32(SinkInputAudioSource.chunk * 2 * MemoryLayout<Float>.size)
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max, fragsize: bytes)
        guard pa_stream_connect_record(stream, device, &attributes, pa_stream_flags_t(rawValue: PA_STREAM_ADJUST_LATENCY.rawValue | flags.rawValue)) >= 0 else {
            pa_stream_set_read_callback(stream, nil, nil)
            pa_stream_unref(stream)
            return nil
        }
        return stream
    }

    /// Stops a record stream's callbacks and lets it go.
    private static func release(_ stream: OpaquePointer) {
        pa_stream_set_read_callback(stream, nil, nil)
        pa_stream_disconnect(stream)
        pa_stream_unref(stream)
    }

    /// Everything the stream has to read now, interleaved stereo; a hole in it is silence of its length.
    private static func takeAll(from stream: OpaquePointer) -> [Float] {
        var samples: [Float] = []
        var data: UnsafeRawPointer?
        var length = 0
        while pa_stream_peek(stream, &data, &length) == 0, length > 0 {
            let count = length / MemoryLayout<Float>.size
            if let data {
                samples.append(contentsOf: UnsafeBufferPointer(start: data.assumingMemoryBound(to: Float.self), count: count))
            } else {
                samples.append(contentsOf: repeatElement(0, count: count))
            }
            pa_stream_drop(stream)
        }
        return samples
    }

    private func systemReadable(_ stream: OpaquePointer) {
        let now = MonotonicClock.now()
        let chunk = Self.takeAll(from: stream)
        guard chunk.count >= 2, !systemStopped.load(ordering: .relaxed) else { return }
        systemHasData.store(true, ordering: .releasing)
        // As a blocking read would see it: a callback that comes after a pause found the server's
        // backlog gone, so the chunk before it was the freshest when it came.
        if let shift = systemClock.chunkArrived(frames: Int64(chunk.count / 2), readStarted: systemLastRead ?? now, readEnded: now) {
            logger.notice("audio systemAudio drifted \(shift / 1_000_000) ms from the clock; re-anchored")
        }
        systemLastRead = now
        if !systemAskedAhead {
            // Asked once the stream flows: a sink lowers its latency when our low-latency stream joins.
            systemAskedAhead = true
            let asked = pa_context_get_sink_info_by_name(context, "@DEFAULT_SINK@", { _, info, eol, userdata in
                let monitor = Unmanaged<SinkInputMonitor>.fromOpaque(userdata!).takeUnretainedValue()
                if eol == 0, let info {
                    monitor.systemAhead = min(Int64(info.pointee.latency) * 1000, 200_000_000)
                    monitor.logger.info("audio systemAudio: the default sink renders \(info.pointee.latency) µs ahead; monitor samples are stamped that much later")
                } else if monitor.systemAhead == nil {
                    monitor.systemAhead = 0
                }
                monitor.flushSystemSound()
            }, Unmanaged.passUnretained(self).toOpaque())
            if let asked { pa_operation_unref(asked) } else { systemAhead = 0 }
        }
        systemHeld.append(chunk)
        systemHeldFrames += chunk.count / 2
        // Held for long (no sink yet, or a server that does not answer): the oldest go, counted.
        while systemHeldFrames > SinkInputAudioSource.heldCeiling, systemHeld.count > 1 {
            let oldest = systemHeld.removeFirst()
            systemHeldFrames -= oldest.count / 2
            systemHeldDropped += oldest.count / 2
            systemDelivered += Int64(oldest.count / 2)
        }
        flushSystemSound()
    }

    /// Hands the held system sound on, in order, once nothing announced is waiting to be looked at,
    /// the first list has come, the stream is placed on the clock and the recording takes it.
    private func flushSystemSound() {
        guard !systemHeld.isEmpty, listed, announced.isEmpty, !systemStopped.load(ordering: .relaxed),
              let anchor = systemClock.anchor, let ahead = systemAhead, let sink = systemSink.current else { return }
        if systemHeldDropped > 0 {
            logger.warning("audio systemAudio: \(systemHeldDropped) samples held too long were dropped")
            systemHeldDropped = 0
        }
        var latency: pa_usec_t = 0
        var negative: Int32 = 0
        let reported = systemStream.map { pa_stream_get_latency($0, &latency, &negative) >= 0 } ?? false
        let latencyNanoseconds = reported && negative == 0 ? Int64(latency) * 1000 : 0
        for chunk in systemHeld {
            chunk.withUnsafeBufferPointer { sink(anchor + ahead, systemDelivered, $0, latencyNanoseconds) }
            systemDelivered += Int64(chunk.count / 2)
        }
        systemHeld.removeAll(keepingCapacity: true)
        systemHeldFrames = 0
    }

    private func beginStream(_ index: UInt32) {
        let tag = Unmanaged.passRetained(SinkInputTag(index: index, owner: self))
        guard let stream = recordStream(named: "replayd monitor of \(index)", device: nil, flags: PA_STREAM_DONT_MOVE, prepare: { stream in
            pa_stream_set_monitor_stream(stream, index)
            pa_stream_set_read_callback(stream, { stream, _, userdata in
                let tag = Unmanaged<SinkInputTag>.fromOpaque(userdata!).takeUnretainedValue()
                tag.owner.readable(stream!, index: tag.index)
            }, tag.toOpaque())
        }) else {
            logger.warning("cannot monitor sink-input \(index): \(String(cString: pa_strerror(pa_context_errno(context))))")
            tag.release()
            return
        }
        streams[index] = stream
        tags[index] = tag
        buffers.withLock { $0[index] = StreamBuffer() }
        logger.info("audio \(name): recording sink-input \(index)")
    }

    private func endStream(_ index: UInt32) {
        guard let stream = streams.removeValue(forKey: index) else { return }
        Self.release(stream)
        tags.removeValue(forKey: index)?.release()
        buffers.withLock { $0[index]?.gone = true }
        logger.info("audio \(name): sink-input \(index) ended")
    }

    private func readable(_ stream: OpaquePointer, index: UInt32) {
        let samples = Self.takeAll(from: stream)
        if !samples.isEmpty {
            buffers.withLock { buffers in
                guard buffers[index] != nil else { return }
                buffers[index]!.samples.append(contentsOf: samples)
                let excess = buffers[index]!.samples.count / 2 - SinkInputAudioSource.ceiling
                if excess > 0 {
                    buffers[index]!.samples.removeFirst(excess * 2)
                    buffers[index]!.dropped += excess
                }
            }
        }
        if listed, !ready.load(ordering: .relaxed) { ready.store(true, ordering: .releasing) }
    }
}
