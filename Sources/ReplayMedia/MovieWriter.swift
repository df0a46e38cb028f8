import CFFmpeg
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
/// Called from the video and audio encoder threads: one lock serialises them (the muxer is not
/// thread-safe), which is why this class is `@unchecked Sendable`.
public final class MovieWriter: @unchecked Sendable {
    public struct TrackID: Hashable, Sendable { let index: Int32 }

    public let path: String
    private let context: UnsafeMutablePointer<AVFormatContext>
    private let lock = Mutex<Void>(())
    private var timeBases: [AVRational] = []
    private var decodeTimes: [Int64] = []   // the last decode time written to each track (-1: none yet)
    private var ends: [Int64] = []          // where each track's last packet ends (presentation), in its time base
    private var started = false
    private var finished = false
    private var failure: MediaError?
    private let logger: Logger
    private let bytes = Atomic<Int64>(0)

    /// Creates the file, which must not exist yet (mode 0600: a recording is private).
    public init(path: String, fragmentDuration: Double = 0.25, logger: Logger) throws(MediaError) {
        self.path = path
        self.logger = logger
        let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == EEXIST {
                throw MediaError(.outputExists, "\(path) already exists: choose another name with -o, or remove it")
            }
            throw MediaError(.outputNotWritable, "cannot create \(path): \(String(cString: strerror(code))); choose a folder you can write to with -o")
        }
        close(fd)
        var context: UnsafeMutablePointer<AVFormatContext>?
        let status = avformat_alloc_output_context2(&context, nil, "mp4", path)
        guard status >= 0, let context else {
            unlink(path)
            throw MediaError(.writeFailed, "cannot set up the MP4 muxer: \(AVErrorCode(rawValue: status))")
        }
        self.context = context
        self.fragmentDurationMicroseconds = Int64(fragmentDuration * 1_000_000)
        context.pointee.flags |= AVFMT_FLAG_FLUSH_PACKETS
        // Our timestamps are never negative (the AAC priming packet is left out): the muxer must not
        // shift them by the first packet it happens to see, which would move one track against the other.
        context.pointee.avoid_negative_ts = AVFMT_AVOID_NEG_TS_DISABLED
    }

    private let fragmentDurationMicroseconds: Int64

    deinit {
        if context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
        avformat_free_context(context)
    }

    /// Adds a track carrying what `encoder` produces. Before `start()`.
    /// A video track counts time in half frame ticks at least: a B-frame's decode time falls between
    /// two ticks at the start (see `write`).
    /// `name` is the track's handler name, what players list for it ("Screen", "Microphone").
    package func addTrack(for encoder: VideoEncoder, name: String) -> TrackID {
        let tick = encoder.context.pointee.time_base
        return addTrack(codec: encoder.context, timeBase: AVRational(num: tick.num, den: tick.den * 2), name: name)
    }
    package func addTrack(for encoder: AudioEncoder, name: String) -> TrackID {
        addTrack(codec: encoder.context, timeBase: encoder.context.pointee.time_base, name: name)
    }

    private func addTrack(codec: UnsafeMutablePointer<AVCodecContext>, timeBase: AVRational, name: String) -> TrackID {
        lock.withLock { _ in
            precondition(!started, "tracks are added before the movie starts")
            guard let stream = avformat_new_stream(context, nil) else { fatalError("out of memory adding a track") }
            avcodec_parameters_from_context(stream.pointee.codecpar, codec)
            stream.pointee.time_base = timeBase
            av_dict_set(&stream.pointee.metadata, "handler_name", name, 0)
            timeBases.append(timeBase)   // the muxer may change it (`start`)
            decodeTimes.append(-1)
            ends.append(0)
            return TrackID(index: stream.pointee.index)
        }
    }

    /// Opens the file and writes the header.
    public func start() throws(MediaError) {
        try lock.withLock { _ throws(MediaError) in
            var status = avio_open(&context.pointee.pb, path, AVIO_FLAG_WRITE)
            guard status >= 0 else {
                throw MediaError(.outputNotWritable, "cannot open \(path) for writing: \(AVErrorCode(rawValue: status))")
            }
            var options: OpaquePointer?
            defer { av_dict_free(&options) }
            av_dict_set(&options, "movflags", "frag_keyframe+empty_moov+default_base_moof", 0)
            av_dict_set(&options, "frag_duration", String(fragmentDurationMicroseconds), 0)
            // Both tracks start at zero on the one media clock: no edit list is needed.
            av_dict_set(&options, "use_editlist", "0", 0)
            status = avformat_write_header(context, &options)
            guard status >= 0 else { throw mediaError(status, doing: "writing the movie header") }
            // The muxer may have changed the track time bases.
            for i in 0..<Int(context.pointee.nb_streams) {
                timeBases[i] = context.pointee.streams[i]!.pointee.time_base
            }
            avio_flush(context.pointee.pb)
            started = true
            bytes.store(avio_tell(context.pointee.pb), ordering: .relaxed)
        }
    }

    /// Writes one encoded packet whose times are in `timeBase` units (the encoder's).
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
    func write(_ packet: UnsafeMutablePointer<AVPacket>, to track: TrackID, timeBase: AVRational, defaultDuration: Int64 = 0) throws(MediaError) {
        // A packet with its duration set spares the muxer a guess at each fragment's end.
        if packet.pointee.duration == 0 { packet.pointee.duration = defaultDuration }
        try mux {
            packet.pointee.stream_index = track.index
            av_packet_rescale_ts(packet, timeBase, timeBases[Int(track.index)])
            let earliest = decodeTimes[Int(track.index)] + 1
            if packet.pointee.dts < earliest {
                // Raised: the next packet may decode as soon as a tick after the encoder's time, so
                // this one must end by then (a fragment that ends here must not overlap the next).
                packet.pointee.duration = max(1, packet.pointee.duration - (earliest - packet.pointee.dts))
                packet.pointee.dts = earliest
            }
            decodeTimes[Int(track.index)] = packet.pointee.dts
            let end = max(packet.pointee.pts, packet.pointee.dts) + packet.pointee.duration
            ends[Int(track.index)] = max(ends[Int(track.index)], end)
            return packet
        }
    }

    /// Cuts the fragment now (rather than when the next packet is a fragment's length later) and
    /// puts it on disk: on a still screen the next packet may be seconds away.
    package func flushFragment() throws(MediaError) {
        try mux { nil }
    }

    /// Under the lock, hands the muxer the packet `prepare` returns (nil cuts the fragment and
    /// flushes it to the file). The first failure sticks: later writes throw it.
    private func mux(_ prepare: () -> UnsafeMutablePointer<AVPacket>?) throws(MediaError) {
        try lock.withLock { _ throws(MediaError) in
            if let failure { throw failure }
            guard started, !finished else { return }
            let packet = prepare()
            // Whichever fragment this packet may start (the muxer cuts one by length or at a
            // keyframe before writing it) begins at the packet's own decode time. Otherwise
            // libavformat starts a fragment where the last packet of the one before ended (its time
            // plus its duration, one tick): on a screen that was still, the first picture after the
            // pause would show that much too early.
            if packet != nil { av_opt_set(context.pointee.priv_data, "movflags", "+frag_discont", 0) }
            let status = av_write_frame(context, packet)
            let ioError = context.pointee.pb.pointee.error
            if status < 0 || ioError < 0 {
                let error = mediaError(ioError < 0 ? ioError : status, doing: "writing the movie")
                failure = error
                throw error
            }
            if packet == nil { avio_flush(context.pointee.pb) }
            bytes.store(avio_tell(context.pointee.pb), ordering: .relaxed)
        }
    }

    /// Writes the trailer, closes the file and states each track's duration and the movie's in its
    /// header (`MovieDurations`: libavformat leaves them 0 with `empty_moov`). After a write failure
    /// it still closes what it can: the fragments already on disk stay playable, and the header
    /// says nothing (readers add up the fragments there, as after a crash).
    public func finish() throws(MediaError) {
        try lock.withLock { _ throws(MediaError) in
            guard !finished else { return }
            finished = true
            var result: MediaError? = failure
            if started, failure == nil {
                let status = av_write_trailer(context)
                if status < 0 || context.pointee.pb.pointee.error < 0 {
                    let code = status < 0 ? status : context.pointee.pb.pointee.error
                    result = mediaError(code, doing: "finishing the movie")
                }
                bytes.store(avio_tell(context.pointee.pb), ordering: .relaxed)
            }
            if context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
            if failure != nil, started { cutUnfinishedFragment() }
            if let result { throw result }
            if started { writeDurations() }
        }
    }

    /// Where each track ends, as written so far (seconds).
    package var trackEnds: [Double] {
        lock.withLock { _ in
            zip(ends, timeBases).map { Double($0) * Double($1.num) / Double($1.den) }
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
            guard count >= 8 else { break }
            var size = header[0..<4].reduce(Int64(0)) { $0 << 8 | Int64($1) }
            if size == 1, count == 16 { size = header[8..<16].reduce(Int64(0)) { $0 << 8 | Int64($1) } }
            if size == 0 { size = fileSize - offset }
            boxes.append((String(decoding: header[4..<8], as: UTF8.self), size))
            guard size >= 8 else { break }
            offset += size
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
    private func writeDurations() {
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

    /// Encodes one picture stamped with its frame tick (or flushes, with nil) and writes what comes out to `track`.
    /// Returns the latest tick written (the encoder holds frames for its look-ahead), nil if none came out.
    @discardableResult
    package func encode(_ frame: VideoFrame?, pts: Int64, with encoder: VideoEncoder, to track: TrackID) throws(MediaError) -> Int64? {
        let timeBase = encoder.context.pointee.time_base
        var latest: Int64?
        try encoder.encode(frame, pts: pts) { packet throws(MediaError) in
            latest = max(latest ?? .min, packet.pointee.pts)
            try write(packet, to: track, timeBase: timeBase, defaultDuration: 1)
        }
        return latest
    }

    /// Encodes one block of interleaved stereo samples (or flushes, with nil) and writes it to `track`.
    package func encode(_ samples: UnsafeBufferPointer<Float>?, pts: Int64, with encoder: AudioEncoder, to track: TrackID) throws(MediaError) {
        let timeBase = encoder.context.pointee.time_base
        try encoder.encode(samples, pts: pts) { packet throws(MediaError) in
            // The priming packet (before the first sample) has nothing of ours and a negative time: an
            // MP4 without edit lists cannot place it, so both tracks simply start at the same zero.
            guard packet.pointee.pts >= 0 else { return }
            try write(packet, to: track, timeBase: timeBase)
        }
    }

    /// Bytes in the file so far.
    public var bytesWritten: Int64 { bytes.load(ordering: .relaxed) }

    private func mediaError(_ status: Int32, doing what: String) -> MediaError {
        let code = AVErrorCode(rawValue: status)
        if code.isDiskFull {
            return MediaError(.diskFull, "the disk is full: the recording stopped at \(path) (it plays up to there); free some space or record to another disk with -o")
        }
        return MediaError(.writeFailed, "\(what) failed for \(path): \(code)")
    }
}
