import CFFmpeg
import ReplayFFmpeg
public import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// AVAssetWriter's role: a fragmented MP4 through libavformat. The header (an empty `moov`) goes
/// out at `start()`, then a `moof`+`mdat` fragment at least every `fragmentDuration` (a quarter of
/// a second), each flushed to the file at once: if the process dies, the file plays up to the last
/// fragment.
///
/// Called from the video and audio encoder threads: the muxer is not thread-safe, so it and all
/// that changes live in `state`, behind one `Mutex`.
public final class MovieWriter: MediaDestination, Sendable {
    public let path: String
    private struct State {
        let output: FormatOutput
        var timeBases: [AVRational] = []
        var decodeTimes: [Int64] = []   // the last decode time written to each track (-1: none yet)
        var ends: [Int64] = []          // where each track's last packet ends (presentation), in its time base
        var started = false
        var finished = false
        var failure: MediaError?
    }
    private let state: Mutex<State>
    private let logger: Logger
    private let bytes = Atomic<Int64>(0)
    private let fragmentDurationMicroseconds: Int64

    /// Creates the file, which must not exist yet (mode 0600: a recording is private).
    public init(path: String, fragmentDuration: Double = 0.25, logger: Logger) throws(MediaError) {
        self.path = path
        self.logger = logger
        let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == EEXIST {
                throw MediaError(.outputExists, "\(path) already exists")
            }
            throw MediaError(.outputNotWritable, "cannot create \(path): \(String(cString: strerror(code)))")
        }
        close(fd)
        let output: FormatOutput
        do throws(FFmpegError) {
            output = try FormatOutput(format: "mp4", target: .url(path))
        } catch {
            unlink(path)
            throw MediaError(.writeFailed, "cannot set up the MP4 muxer: \(error.text)")
        }
        fragmentDurationMicroseconds = Int64(fragmentDuration * 1_000_000)
        output.context.pointee.flags |= AVFMT_FLAG_FLUSH_PACKETS
        // Our timestamps are never negative (the AAC priming packet is left out): the muxer must not
        // shift them by the first packet it happens to see, which would move one track against the other.
        output.context.pointee.avoid_negative_ts = AVFMT_AVOID_NEG_TS_DISABLED
        state = Mutex(State(output: output))
    }

    /// Adds a track carrying what `format` describes. Before `start()`.
    /// A video track counts time in half frame ticks at least: a B-frame's decode time falls between
    /// two ticks at the start (see `write`).
    package func addTrack(_ format: TrackFormat) throws(MediaError) -> Int {
        let timeBase = format.kind == .video ? AVRational(num: format.timeBase.num, den: format.timeBase.den * 2) : format.timeBase
        return try state.withLock { (state: inout State) throws(MediaError) in
            precondition(!state.started, "tracks are added before the movie starts")
            let index = try state.output.addTrack(format, timeBase: timeBase)
            state.timeBases.append(timeBase)   // the muxer may change it (`start`)
            state.decodeTimes.append(-1)
            state.ends.append(0)
            return index
        }
    }

    /// Opens the file and writes the header.
    public func start() throws(MediaError) {
        try state.withLock { (state: inout State) throws(MediaError) in
            let output = state.output
            do throws(FFmpegError) {
                try output.writeHeader(options: [
                    ("movflags", "frag_keyframe+empty_moov+default_base_moof"),
                    ("frag_duration", String(fragmentDurationMicroseconds)),
                    // Both tracks start at zero on the one media clock: no edit list is needed.
                    ("use_editlist", "0"),
                ])
            } catch {
                throw mediaError(error, doing: "writing the movie header")
            }
            // The muxer may have changed the track time bases.
            for i in 0..<output.streamCount { state.timeBases[i] = output.timeBase(of: Int32(i)) }
            state.started = true
            bytes.store(output.position, ordering: .relaxed)
        }
    }

    /// Writes one encoded packet of `track`.
    ///
    /// A track's decode times start at zero and rise at least one unit of its time base per packet
    /// (a no-op for sound, whose packets decode when they play). With B-frames libx264 dates its
    /// first packet's decoding back by the gap to the next picture, and its B-frame comes out after
    /// the P-frame that follows it: frames 0, 2, 1 decode at -1, 0, 1 ticks. An MP4 fragment cannot
    /// start before zero, and without edit lists only moving presentation times (the video against
    /// the sound) would make room; instead the P-frame decodes a fraction of a tick after zero (0, 1
    /// unit, 1 tick), and every presentation time stays where the clock put it. A raised packet is
    /// shortened by as much (1 unit, then a tick less 1 unit), so that a fragment ending after it
    /// does not overlap the next packet: libavformat would move that one and drop its presentation
    /// time.
    package func write(_ encoded: EncodedPacket, track: Int) throws(MediaError) {
        let packet = encoded.packet
        // A packet with its duration set spares the muxer a guess at each fragment's end.
        if packet.pointee.duration == 0 { packet.pointee.duration = encoded.defaultDuration }
        try mux { state in
            packet.pointee.stream_index = Int32(track)
            av_packet_rescale_ts(packet, encoded.timeBase, state.timeBases[track])
            let earliest = state.decodeTimes[track] + 1
            if packet.pointee.dts < earliest {
                // Raised: the next packet may decode as soon as a tick after the encoder's time, so
                // this one must end by then (a fragment that ends here must not overlap the next).
                packet.pointee.duration = max(1, packet.pointee.duration - (earliest - packet.pointee.dts))
                packet.pointee.dts = earliest
            }
            state.decodeTimes[track] = packet.pointee.dts
            let end = max(packet.pointee.pts, packet.pointee.dts) + packet.pointee.duration
            state.ends[track] = max(state.ends[track], end)
            return packet
        }
    }

    /// Cuts the fragment now (rather than when the next packet is a fragment's length later) and
    /// puts it on disk: on a still screen the next packet may be seconds away.
    package func flush() throws(MediaError) {
        try mux { _ in nil }
    }

    /// Under the lock, hands the muxer the packet `prepare` returns (nil cuts the fragment and
    /// flushes it to the file). The first failure sticks: later writes throw it.
    private func mux(_ prepare: (inout State) -> UnsafeMutablePointer<AVPacket>?) throws(MediaError) {
        try state.withLock { (state: inout State) throws(MediaError) in
            if let failure = state.failure { throw failure }
            guard state.started, !state.finished else { return }
            let output = state.output
            let packet = prepare(&state)
            // Whichever fragment this packet may start (the muxer cuts one by length or at a
            // keyframe before writing it) begins at the packet's own decode time. Otherwise
            // libavformat starts a fragment where the last packet of the one before ended (its time
            // plus its duration, one tick): on a screen that was still, the first picture after the
            // pause would show that much too early.
            if packet != nil { av_opt_set(output.context.pointee.priv_data, "movflags", "+frag_discont", 0) }
            do throws(FFmpegError) {
                try output.write(packet)
            } catch {
                let failure = mediaError(error, doing: "writing the movie")
                state.failure = failure
                throw failure
            }
            if packet == nil { output.flush() }
            bytes.store(output.position, ordering: .relaxed)
        }
    }

    /// Writes the trailer, closes the file and states each track's duration and the movie's in its
    /// header (`MovieDurations`: libavformat leaves them 0 with `empty_moov`). After a write failure
    /// it still closes what it can: the fragments already on disk stay playable, and the header
    /// says nothing (readers add up the fragments there, as after a crash).
    public func finish() throws(MediaError) {
        try state.withLock { (state: inout State) throws(MediaError) in
            guard !state.finished else { return }
            state.finished = true
            let output = state.output
            var result: MediaError? = state.failure
            if state.started, state.failure == nil {
                do throws(FFmpegError) {
                    try output.writeTrailer()
                } catch {
                    result = mediaError(error, doing: "finishing the movie")
                }
                bytes.store(output.position, ordering: .relaxed)
            }
            output.close()
            if state.failure != nil, state.started { cutUnfinishedFragment() }
            if let result { throw result }
            if state.started { writeDurations(ends: state.ends, timeBases: state.timeBases) }
        }
    }

    /// Where each track ends, as written so far (seconds).
    package var trackEnds: [Double] {
        state.withLock { state in
            zip(state.ends, state.timeBases).map { Double($0) * Double($1.num) / Double($1.den) }
        }
    }

    /// After a write error: cuts the closed file after its last complete fragment, so that what
    /// readers state agrees with the packets there (a fragment cut short by a full disk promises
    /// samples that are missing). Logged, not thrown: the file plays either way.
    private func cutUnfinishedFragment() {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { return }
        let fileSize = Int64(status.st_size)
        var boxes: [(type: String, size: Int64)] = []
        var offset: Int64 = 0
        var header = [UInt8](repeating: 0, count: 16)
        while offset + 8 <= fileSize {
            let count = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 16, off_t(offset)) }
            guard count >= 8, let box = MovieDurations.header(in: Array(header.prefix(count)), at: 0, end: Int(fileSize - offset)) else { break }
            boxes.append((box.type, Int64(box.size)))
            guard box.size >= 8 else { break }
            offset += Int64(box.size)
        }
        let length = MovieDurations.completeLength(of: boxes, fileSize: fileSize)
        guard length < fileSize, length > 0 else { return }
        if ftruncate(fd, off_t(length)) == 0 {
            logger.info("cut \(path) after its last complete fragment: \(fileSize - length) bytes of an unfinished one dropped")
            bytes.store(length, ordering: .relaxed)
        }
    }

    /// Overwrites the header's durations in the closed file (under the lock). A failure here loses
    /// only the stated durations (players then add up the fragments): logged, not thrown.
    private func writeDurations(ends: [Int64], timeBases: [AVRational]) {
        let trackEnds = zip(ends, timeBases).map { MovieDurations.End($0, numerator: Int64($1.num), denominator: Int64($1.den)) }
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            logger.warning("cannot reopen \(path) to write its durations: \(String(cString: strerror(errno)))")
            return
        }
        defer { close(fd) }
        // ftyp and the empty moov: under a kilobyte per track.
        var header = [UInt8](repeating: 0, count: 64 * 1024)
        let count = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return }
        header.removeSubrange(count...)
        do {
            for patch in try MovieDurations.patches(header: header, ends: trackEnds) {
                let written = patch.bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(patch.offset)) }
                guard written == patch.bytes.count else {
                    logger.warning("cannot write the durations into \(path): \(String(cString: strerror(errno)))")
                    return
                }
            }
        } catch {
            logger.warning("the durations of \(path) are left unstated: \(error)")
        }
    }

    /// Bytes in the file so far.
    public var bytesWritten: Int64 { bytes.load(ordering: .relaxed) }

    private func mediaError(_ error: FFmpegError, doing what: String) -> MediaError {
        if error.avErrorCode.isDiskFull {
            return MediaError(.diskFull, "the disk is full: the recording stopped at \(path) (it plays up to there)")
        }
        return MediaError(.writeFailed, "\(what) failed for \(path): \(error.text)")
    }
}
