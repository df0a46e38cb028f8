import CFFmpeg
import ReplayFFmpeg
public import Logging
import Synchronization

/// A live stream as a `MediaDestination`: FLV over RTMP or RTMPS, or MPEG-TS over SRT, through
/// libavformat (its own clients for those protocols). What the engine encodes once can go to a file
/// and a stream at the same time.
///
/// `start()` connects (blocking: call it off the cooperative pool, as the engine does). Packets are
/// interleaved by libavformat, so an RTMP server sees both tracks in decode order. Video and audio
/// encoder threads call it at once: the muxer and all that changes live in `state`, behind a `Mutex`.
public final class StreamOutput: MediaDestination, Sendable {
    /// The URL without its stream key, for logs and errors.
    public let redactedURL: String
    private struct State {
        let output: FormatOutput
        var timeBases: [AVRational] = []
        var lastDecodeTimes: [Int64] = []
        var started = false
        var finished = false
        var failure: MediaError?
    }
    private let state: Mutex<State>
    private let bytes = Atomic<Int64>(0)
    private let logger: Logger
    /// Gives up a connect or a write that blocks too long (`ReconnectingStream` arms it).
    let interrupt = IOInterrupt()

    /// A stream to `url`: `rtmp://`, `rtmps://` (FLV) or `srt://` (MPEG-TS). Nothing connects yet.
    public init(url: String, logger: Logger) throws(MediaError) {
        redactedURL = FormatOutput.redacted(url)
        self.logger = logger
        let format: String
        if url.hasPrefix("rtmp://") || url.hasPrefix("rtmps://") {
            format = "flv"
        } else if url.hasPrefix("srt://") {
            format = "mpegts"
        } else {
            throw MediaError(.outputNotWritable, "\(redactedURL) is not a stream address: it starts with rtmp://, rtmps:// or srt://")
        }
        let output: FormatOutput
        do throws(FFmpegError) {
            output = try FormatOutput(format: format, target: .url(url))
        } catch {
            throw MediaError(.writeFailed, "cannot set up the \(format) muxer for \(redactedURL): \(error.text)")
        }
        // Interleaving waits for every track; on a still screen a picture comes only once a second,
        // and the sound must not wait that long behind it.
        output.context.pointee.max_interleave_delta = 500_000
        output.setInterrupt(interrupt)
        state = Mutex(State(output: output))
    }

    package func addTrack(_ format: TrackFormat) throws(MediaError) -> Int {
        try state.withLock { (state: inout State) throws(MediaError) in
            precondition(!state.started, "tracks are added before the stream starts")
            let index = try state.output.addTrack(format, timeBase: format.timeBase)
            state.timeBases.append(format.timeBase)
            state.lastDecodeTimes.append(.min)
            return index
        }
    }

    /// Adds a track described by `parameters` (a copy of an encoder's, kept for reconnections).
    package func addTrack(_ parameters: TrackParameters) throws(MediaError) -> Int {
        try state.withLock { (state: inout State) throws(MediaError) in
            precondition(!state.started, "tracks are added before the stream starts")
            let index = try state.output.addTrack(parameters)
            state.timeBases.append(parameters.timeBase)
            state.lastDecodeTimes.append(.min)
            return index
        }
    }

    /// Connects and sends the stream's header.
    public func start() throws(MediaError) {
        try state.withLock { (state: inout State) throws(MediaError) in
            let output = state.output
            do throws(FFmpegError) {
                let flv = output.context.pointee.oformat.pointee.name.map(String.init(cString:)) == "flv"
                // A modest socket buffer (the kernel doubles it; 0.17 s of a 6 Mb/s stream): what
                // the link cannot carry then waits in `ReconnectingStream`'s queue, where it is
                // seen and the bitrate comes down, instead of in megabytes of kernel buffer.
                // No Nagle: RTMP's handshake and commands are small writes each waiting for an
                // answer, and a small sound packet must not wait for the ACK of the picture
                // before it.
                try output.writeHeader(options: flv ? [("flvflags", "no_duration_filesize")] : [],
                                       ioOptions: flv ? [("send_buffer_size", "65536"), ("tcp_nodelay", "1")] : [])
            } catch {
                throw MediaError(.writeFailed, "cannot connect to \(redactedURL): \(error.text)")
            }
            for i in 0..<output.streamCount { state.timeBases[i] = output.timeBase(of: Int32(i)) }
            state.started = true
            logger.info("streaming", metadata: ["url": "\(redactedURL)"])
        }
    }

    package func write(_ encoded: EncodedPacket, track: Int) throws(MediaError) {
        try state.withLock { (state: inout State) throws(MediaError) in
            if let failure = state.failure { throw failure }
            guard state.started, !state.finished else { return }
            let packet = encoded.packet
            if packet.pointee.duration == 0 { packet.pointee.duration = encoded.defaultDuration }
            packet.pointee.stream_index = Int32(track)
            av_packet_rescale_ts(packet, encoded.timeBase, state.timeBases[track])
            // The container's milliseconds can make two decode times one: the later waits a unit.
            if packet.pointee.dts <= state.lastDecodeTimes[track] {
                packet.pointee.dts = state.lastDecodeTimes[track] + 1
                if packet.pointee.pts < packet.pointee.dts { packet.pointee.pts = packet.pointee.dts }
            }
            state.lastDecodeTimes[track] = packet.pointee.dts
            let size = Int64(packet.pointee.size)
            do throws(FFmpegError) {
                try state.output.writeInterleaved(packet)
            } catch {
                let failure = MediaError(.writeFailed, "the stream to \(redactedURL) broke: \(error.text)")
                state.failure = failure
                throw failure
            }
            bytes.add(size, ordering: .relaxed)
        }
    }

    /// A stream has no fragments to cut: what is written goes out as it is written.
    package func flush() throws(MediaError) {}

    public func finish() throws(MediaError) {
        try state.withLock { (state: inout State) throws(MediaError) in
            guard !state.finished else { return }
            state.finished = true
            var result = state.failure
            if state.started, state.failure == nil {
                do throws(FFmpegError) { try state.output.writeTrailer() } catch {
                    result = MediaError(.writeFailed, "ending the stream to \(redactedURL) failed: \(error.text)")
                }
            }
            state.output.close()
            if let result { throw result }
        }
    }

    /// Bytes of media sent so far.
    public var bytesWritten: Int64 { bytes.load(ordering: .relaxed) }
}
