import CFFmpeg
import ReplayFFmpeg
public import Logging
import Synchronization
import Foundation

/// A live stream (`StreamOutput`: RTMP, RTMPS, SRT) that survives the network: encoders hand it
/// packets and never wait for the network; one sender thread writes them, and when the connection
/// breaks (an error, or a write that does not move for `stallTimeout`) it connects again by itself
/// after `ReconnectBackoff`'s waits (0.5, 1, 2, 2… s), with the tracks as they are now.
///
/// - While it is down (`isLive` false) packets are dropped and counted; an encoder skips its
///   pictures. After a connection the stream starts on a keyframe: `takeKeyframeRequest()` says
///   when the video encoder must make one, and the sender drops what comes before it.
/// - `queueDelay` (how long the oldest packet has waited) says whether the link keeps up: the
///   input of `BitrateController`. A queue over `maximumQueueDelay` drops its pictures (counted)
///   and starts again at a keyframe; sound is never dropped on a connection that is up.
/// - `replaceTrack` (a new picture size): the next packet of the track carries the new decoder
///   configuration (FLV: a new sequence header), and later connections start with it.
///
/// The first connection is made in `start()`, which throws when it fails (a wrong address or
/// stream key ends the broadcast with the server's words); only later breaks are retried.
public final class ReconnectingStream: MediaDestination, Sendable {
    public enum Connection: Sendable, Equatable, CustomStringConvertible {
        case connecting
        case live
        /// The connection broke; try `attempt` comes in `retryIn`.
        case reconnecting(attempt: Int, retryIn: Duration)
        case finished

        public var description: String {
            switch self {
            case .connecting: "connecting"
            case .live: "live"
            case .reconnecting(let attempt, let wait):
                "reconnecting (try \(attempt) in \(wait / .seconds(1)) s)"
            case .finished: "finished"
            }
        }
    }

    public struct Counters: Sendable, Equatable {
        /// Video packets not sent: the connection was down, the queue too long, or they came
        /// before a new connection's keyframe.
        public var videoPacketsDropped = 0
        /// Sound packets not sent: the connection was down, or they came before a new connection's keyframe.
        public var audioPacketsDropped = 0
        /// Connections made again after a break.
        public var reconnections = 0
    }

    /// One packet waiting to go: its own reference to the encoder's data.
    private final class QueuedPacket: @unchecked Sendable {
        // `@unchecked Sendable`: made by the encoder thread, then touched only by the sender thread.
        var packet: UnsafeMutablePointer<AVPacket>?
        let timeBase: AVRational
        let defaultDuration: Int64
        let track: Int
        let isVideo: Bool
        let isKeyframe: Bool
        /// Decode time in seconds.
        let time: Double
        /// When it was queued (`MonotonicClock`).
        let queuedAt: Int64

        init?(_ encoded: EncodedPacket, track: Int, isVideo: Bool) {
            guard let clone = av_packet_clone(encoded.packet) else { return nil }
            packet = clone
            timeBase = encoded.timeBase
            defaultDuration = encoded.defaultDuration
            self.track = track
            self.isVideo = isVideo
            isKeyframe = clone.pointee.flags & AV_PKT_FLAG_KEY != 0
            let dts = clone.pointee.dts == Int64.min ? clone.pointee.pts : clone.pointee.dts
            time = Double(dts) * Double(encoded.timeBase.num) / Double(encoded.timeBase.den)
            queuedAt = MonotonicClock.now()
        }

        deinit { av_packet_free(&packet) }
    }

    private enum Item {
        case packet(QueuedPacket)
        /// From here on the track's packets use these parameters.
        case newParameters(track: Int)
    }

    private struct State {
        var tracks: [TrackParameters] = []
        var queue: [Item] = []
        var connection = Connection.connecting
        var started = false
        var finishing = false
        /// The video encoder must make a keyframe (a new connection, or pictures dropped).
        var keyframeWanted = false
        /// Queued pictures were dropped: the sender waits for a keyframe before the next.
        var resync = false
        var counters = Counters()
        /// The interrupt of the connection in use, for `finish` to end a write that hangs.
        var interrupt: IOInterrupt?
    }

    public let redactedURL: String
    private let url: String
    private let logger: Logger
    private let state = Mutex(State())
    /// Signalled for each item queued and at `finish`: the sender waits on it.
    private let wakeUp = DispatchSemaphore(value: 0)
    /// Signalled when the sender thread has ended.
    private let senderDone = DispatchSemaphore(value: 0)
    private let onChange: @Sendable (Connection) -> Void
    private let bytes = Atomic<Int64>(0)

    /// A write or a connection that does not move for this long counts as a broken connection.
    public static let stallTimeout = 5.0
    /// Pictures that waited longer than this are dropped (seconds): a live stream that falls this
    /// far behind catches up instead of growing its delay.
    public static let maximumQueueDelay = 3.0
    /// How long `finish` lets the queue drain before it gives up on the connection (seconds).
    public static let drainTimeout = 2.0

    /// A stream to `url` (`rtmp://`, `rtmps://`, `srt://`). `onChange` hears each change of the
    /// connection, from the sender thread.
    public init(url: String, logger: Logger, onChange: @escaping @Sendable (Connection) -> Void = { _ in }) throws(MediaError) {
        // The same check of the address as the stream's, before anything connects.
        _ = try StreamOutput(url: url, logger: logger)
        self.url = url
        redactedURL = FormatOutput.redacted(url)
        self.logger = logger
        self.onChange = onChange
    }

    package func addTrack(_ format: TrackFormat) throws(MediaError) -> Int {
        state.withLock { state in
            precondition(!state.started, "tracks are added before the stream starts")
            state.tracks.append(TrackParameters(format))
            return state.tracks.count - 1
        }
    }

    /// Track `track` continues with `format`'s encoder (a new picture size): the next packet
    /// carries its decoder configuration, and later connections start with it.
    package func replaceTrack(_ track: Int, with format: TrackFormat) {
        let parameters = TrackParameters(format)
        state.withLock { state in
            state.tracks[track] = parameters
            if state.connection == .live { state.queue.append(.newParameters(track: track)) }
        }
        wakeUp.signal()
    }

    /// Connects (blocking, up to `stallTimeout` without progress) and starts the sender thread.
    public func start() throws(MediaError) {
        let output = try connect()
        state.withLock { state in
            state.started = true
            state.connection = .live
        }
        onChange(.live)
        let thread = Thread { [self] in
            send(first: output)
            senderDone.signal()
        }
        thread.name = "stream-sender"
        thread.start()
    }

    package func write(_ encoded: EncodedPacket, track: Int) throws(MediaError) {
        let queued = state.withLock { state -> Bool in
            let isVideo = state.tracks[track].kind == .video
            guard state.connection == .live, !state.finishing, let packet = QueuedPacket(encoded, track: track, isVideo: isVideo) else {
                if isVideo { state.counters.videoPacketsDropped += 1 } else { state.counters.audioPacketsDropped += 1 }
                return false
            }
            if isVideo, Self.delay(of: state.queue, now: packet.queuedAt, videoOnly: true) > Self.maximumQueueDelay {
                let before = state.queue.count
                state.queue.removeAll { if case .packet(let p) = $0 { p.isVideo } else { false } }
                state.counters.videoPacketsDropped += before - state.queue.count + (packet.isKeyframe ? 0 : 1)
                state.resync = true
                state.keyframeWanted = true
                logger.warning("the link is too slow: \(before - state.queue.count) queued pictures dropped, starting again at a keyframe")
                guard packet.isKeyframe else { return false }
            }
            state.queue.append(.packet(packet))
            return true
        }
        if queued { wakeUp.signal() }
    }

    /// A stream has no fragments to cut: the sender sends as soon as it can.
    package func flush() throws(MediaError) {}

    /// Lets the queue drain (up to `drainTimeout`), ends the stream and waits for the sender.
    public func finish() throws(MediaError) {
        let started = state.withLock { state -> Bool in
            state.finishing = true
            return state.started
        }
        guard started else { return }
        wakeUp.signal()
        if senderDone.wait(timeout: .now() + Self.drainTimeout) == .timedOut {
            logger.warning("the stream did not drain in \(Self.drainTimeout) s: closing it")
            state.withLock { $0.interrupt }?.abort()
            _ = senderDone.wait(timeout: .now() + 2)
        }
    }

    public var bytesWritten: Int64 { bytes.load(ordering: .relaxed) }

    /// True while a connection is up: packets written now will be sent.
    public var isLive: Bool { state.withLock { $0.connection == .live } }

    public var connection: Connection { state.withLock { $0.connection } }

    public var counters: Counters { state.withLock { $0.counters } }

    /// How long the oldest queued packet has waited: zero when the link keeps up.
    public var queueDelay: Duration {
        .nanoseconds(Int64(state.withLock { Self.delay(of: $0.queue, now: MonotonicClock.now()) } * 1e9))
    }

    /// True once after the stream wants a keyframe (a new connection, pictures dropped): the
    /// video encoder makes its next picture one.
    public func takeKeyframeRequest() -> Bool {
        state.withLock { state in
            defer { state.keyframeWanted = false }
            return state.keyframeWanted
        }
    }

    /// How long the oldest packet in `queue` (the oldest picture, with `videoOnly`) has waited, in seconds.
    private static func delay(of queue: [Item], now: Int64, videoOnly: Bool = false) -> Double {
        for item in queue {
            if case .packet(let packet) = item, packet.isVideo || !videoOnly { return Double(now - packet.queuedAt) / 1e9 }
        }
        return 0
    }

    // MARK: The sender thread

    /// A new connection with the tracks as they are now.
    private func connect() throws(MediaError) -> StreamOutput {
        let output = try StreamOutput(url: url, logger: logger)
        for track in state.withLock({ $0.tracks }) { _ = try output.addTrack(track) }
        state.withLock { $0.interrupt = output.interrupt }
        output.interrupt.arm(seconds: Self.stallTimeout)
        defer { output.interrupt.arm(seconds: nil) }
        try output.start()
        return output
    }

    private func announce(_ connection: Connection) {
        state.withLock { $0.connection = connection }
        onChange(connection)
    }

    /// The next item, waiting for one; nil once finishing with nothing left.
    private func nextItem() -> (item: Item, resync: Bool)? {
        while true {
            let next = state.withLock { state -> (Item, Bool)?? in
                if !state.queue.isEmpty {
                    defer { state.resync = false }
                    return (state.queue.removeFirst(), state.resync)
                }
                return state.finishing ? .some(nil) : nil
            }
            if let next { return next }
            wakeUp.wait()
        }
    }

    /// Waits `delay` unless the stream finishes first (then true).
    private func waitOrFinish(_ delay: Duration) -> Bool {
        let deadline = DispatchTime.now() + .nanoseconds(Int(delay / .nanoseconds(1)))
        while DispatchTime.now() < deadline {
            if state.withLock({ $0.finishing }) { return true }
            _ = wakeUp.wait(timeout: deadline)
        }
        return state.withLock { $0.finishing }
    }

    private func send(first: StreamOutput) {
        var output: StreamOutput? = first
        var backoff = ReconnectBackoff()
        // A new connection starts at a keyframe: what comes before it (sound too) is dropped.
        var freshConnection = true
        var waitingForKeyframe = true
        var keyframeTime = -Double.infinity
        var newParameters = Set<Int>()
        while true {
            guard let current = output else {
                let delay = backoff.nextDelay()
                announce(.reconnecting(attempt: backoff.attempts, retryIn: delay))
                if waitOrFinish(delay) { break }
                do throws(MediaError) {
                    let fresh = try connect()
                    output = fresh
                    backoff.reset()
                    freshConnection = true
                    waitingForKeyframe = true
                    newParameters.removeAll()
                    state.withLock { state in
                        state.keyframeWanted = true
                        state.counters.reconnections += 1
                    }
                    logger.info("reconnected", metadata: ["url": "\(redactedURL)"])
                    announce(.live)
                } catch {
                    logger.warning("reconnecting failed: \(error.message)")
                }
                continue
            }
            guard let (item, resync) = nextItem() else { break }
            if resync { waitingForKeyframe = true }
            guard case .packet(let queued) = item else {
                if case .newParameters(let track) = item { newParameters.insert(track) }
                continue
            }
            if waitingForKeyframe, queued.isVideo, queued.isKeyframe {
                waitingForKeyframe = false
                if freshConnection { keyframeTime = queued.time }
                freshConnection = false
            }
            if (waitingForKeyframe && (queued.isVideo || freshConnection)) || (!queued.isVideo && queued.time < keyframeTime) {
                state.withLock { state in
                    if queued.isVideo { state.counters.videoPacketsDropped += 1 } else { state.counters.audioPacketsDropped += 1 }
                }
                continue
            }
            guard let packet = queued.packet else { continue }
            if newParameters.remove(queued.track) != nil {
                let extradata = state.withLock { $0.tracks[queued.track] }.extradata
                if let side = av_packet_new_side_data(packet, AV_PKT_DATA_NEW_EXTRADATA, extradata.count) {
                    extradata.withUnsafeBufferPointer { side.update(from: $0.baseAddress!, count: extradata.count) }
                }
            }
            let size = Int64(packet.pointee.size)
            current.interrupt.arm(seconds: Self.stallTimeout)
            do throws(MediaError) {
                try current.write(EncodedPacket(packet: packet, timeBase: queued.timeBase, defaultDuration: queued.defaultDuration),
                                  track: queued.track)
                current.interrupt.arm(seconds: nil)
                bytes.add(size, ordering: .relaxed)
            } catch {
                logger.warning("the stream broke, reconnecting: \(error.message)")
                // Closing must not wait on a dead link either.
                current.interrupt.abort()
                try? current.finish()
                output = nil
                state.withLock { state in
                    state.connection = .reconnecting(attempt: 0, retryIn: .zero)
                    for item in state.queue {
                        if case .packet(let p) = item {
                            if p.isVideo { state.counters.videoPacketsDropped += 1 } else { state.counters.audioPacketsDropped += 1 }
                        }
                    }
                    state.queue.removeAll()
                }
            }
        }
        if let output {
            output.interrupt.arm(seconds: 1)
            do throws(MediaError) { try output.finish() } catch {
                logger.warning("ending the stream: \(error.message)")
            }
        }
        announce(.finished)
    }
}
