import CPulse
package import ReplayMedia
package import Logging
import Synchronization
import Foundation

/// A sound source the capture pipeline mixes: a PulseAudio device (`PulseAudioSource`) or a set of
/// sink-inputs (`SinkInputAudioSource`). 48 kHz stereo float, stamped on the monotonic clock.
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
    package var name: String { "\(device)" }
}

/// Records what some of PulseAudio's playback streams (sink-inputs) play, each through a monitor
/// stream of that sink-input alone (`pa_stream_set_monitor_stream`: after its volume and mute, and
/// nothing else of the sink), mixed into one 48 kHz stereo signal:
/// - `.application(pid)`: the sink-inputs whose `application.process.id` is that process or one
///   below it (the application's own sound);
/// - `.unprotected`: every sink-input (what the system mix is built from while a protected one plays).
/// Sink-inputs with `openreplaykit.protected=1` are never recorded. Sink-inputs that appear later
/// are followed (subscription); one that goes away contributes silence from then on.
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
    /// How far behind the clock chunks are cut: the server's fragments and scheduling jitter.
    private static let delay: Int64 = 60_000_000

    private let logger: Logger
    /// PulseAudio's side. Its callbacks reach it and never this object, and this object's deinit
    /// stops PulseAudio's thread before letting it go: no callback meets anything being torn down.
    private let monitor: SinkInputMonitor
    private let stopping = Atomic<Bool>(false)
    private let sinkSlot = AudioSinkSlot()
    private let done = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    /// When a protected sink-input began to exist (none before) or the last one ceased to
    /// (monotonic ns), oldest first.
    package func protectionHistory() -> [(time: Int64, active: Bool)] {
        monitor.protectionChanges.withLock { $0 }
    }

    /// True while a protected sink-input exists (as the last subscription event said).
    package var protectedActive: Bool { monitor.protectedNow.load(ordering: .acquiring) }

    package var hasData: Bool { monitor.ready.load(ordering: .acquiring) }

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
    private var tags: [UInt32: Unmanaged<StreamTag>] = [:]
    private var protectedInputs: Set<UInt32> = []
    private var members: Set<Int32> = []
    private var listed = false
    private var closed = false
    // Shared with the source:
    let buffers = Mutex<[UInt32: StreamBuffer]>([:])
    let ready = Atomic<Bool>(false)
    /// When a protected sink-input began or ceased to exist (monotonic ns, any protected now).
    let protectionChanges = Mutex<[(time: Int64, active: Bool)]>([])
    let protectedNow = Atomic<Bool>(false)

    private var name: String { selection.name }

    /// Identifies a monitor stream in its read callback.
    private final class StreamTag {
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
        for (_, stream) in streams {
            pa_stream_set_read_callback(stream, nil, nil)
            pa_stream_disconnect(stream)
            pa_stream_unref(stream)
        }
        streams = [:]
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
            setProtected(index, false)
            return
        }
        // New, or changed (its properties may now say protected): look again.
        if let operation = pa_context_get_sink_input_info(context, index, { _, info, eol, userdata in
            guard eol == 0, let info else { return }
            Unmanaged<SinkInputMonitor>.fromOpaque(userdata!).takeUnretainedValue().consider(info)
        }, Unmanaged.passUnretained(self).toOpaque()) { pa_operation_unref(operation) }
    }

    private func listDone() {
        listed = true
        if streams.isEmpty { ready.store(true, ordering: .releasing) }
    }

    private func consider(_ info: UnsafePointer<pa_sink_input_info>) {
        let index = info.pointee.index
        let isProtected = pa_proplist_gets(info.pointee.proplist, "openreplaykit.protected").map { String(cString: $0) } == "1"
        setProtected(index, isProtected)
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

    private func setProtected(_ index: UInt32, _ on: Bool) {
        let before = !protectedInputs.isEmpty
        if on { protectedInputs.insert(index) } else { protectedInputs.remove(index) }
        let after = !protectedInputs.isEmpty
        guard before != after else { return }
        protectedNow.store(after, ordering: .releasing)
        protectionChanges.withLock { $0.append((MonotonicClock.now(), after)) }
        logger.info("a protected sink-input \(after ? "plays: it is left out of the system sound" : "is gone")")
    }

    private func beginStream(_ index: UInt32) {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(SinkInputAudioSource.rate), channels: 2)
        guard let stream = pa_stream_new(context, "replayd monitor of \(index)", &spec, nil) else { return }
        pa_stream_set_monitor_stream(stream, index)
        let tag = Unmanaged.passRetained(StreamTag(index: index, owner: self))
        pa_stream_set_read_callback(stream, { stream, _, userdata in
            let tag = Unmanaged<StreamTag>.fromOpaque(userdata!).takeUnretainedValue()
            tag.owner.readable(stream!, index: tag.index)
        }, tag.toOpaque())
        let bytes = UInt32(SinkInputAudioSource.chunk * 2 * MemoryLayout<Float>.size)
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max, fragsize: bytes)
        let flags = pa_stream_flags_t(rawValue: PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_DONT_MOVE.rawValue)
        guard pa_stream_connect_record(stream, nil, &attributes, flags) >= 0 else {
            logger.warning("cannot monitor sink-input \(index): \(String(cString: pa_strerror(pa_context_errno(context))))")
            pa_stream_unref(stream)
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
        pa_stream_set_read_callback(stream, nil, nil)
        pa_stream_disconnect(stream)
        pa_stream_unref(stream)
        tags.removeValue(forKey: index)?.release()
        buffers.withLock { $0[index]?.gone = true }
        logger.info("audio \(name): sink-input \(index) ended")
    }

    private func readable(_ stream: OpaquePointer, index: UInt32) {
        var data: UnsafeRawPointer?
        var length = 0
        while pa_stream_peek(stream, &data, &length) == 0, length > 0 {
            if let data {
                let floats = UnsafeBufferPointer(start: data.assumingMemoryBound(to: Float.self), count: length / MemoryLayout<Float>.size)
                buffers.withLock { buffers in
                    guard buffers[index] != nil else { return }
                    buffers[index]!.samples.append(contentsOf: floats)
                    let excess = buffers[index]!.samples.count / 2 - SinkInputAudioSource.ceiling
                    if excess > 0 {
                        buffers[index]!.samples.removeFirst(excess * 2)
                        buffers[index]!.dropped += excess
                    }
                }
            }
            pa_stream_drop(stream)
        }
        if listed, !ready.load(ordering: .relaxed) { ready.store(true, ordering: .releasing) }
    }
}
