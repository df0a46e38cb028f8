import CFFmpeg
import ReplayFFmpeg
public import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An in-memory clip ring ("instant replay", `startClipBuffering` on iOS 15) as a
/// `MediaDestination`: it keeps the encoded packets of the last `capacity` seconds, whole keyframe
/// groups at a time, so that memory is bounded by the encoded stream (a few MB a minute), never
/// raw pictures; `export(lastSeconds:to:)` writes the last seconds as an MP4 without re-encoding,
/// while buffering goes on.
///
/// A clip starts at a keyframe: it may be up to one keyframe interval (2 s of motion) longer than
/// asked, never shorter (unless the buffer holds less). Called from the encoder threads and from
/// whoever exports: every mutable thing lives in `state`, behind its `Mutex`.
public final class ClipBuffer: MediaDestination, Sendable {
    /// One track's codec parameters, copied when it was added: an export needs them after the
    /// encoder is gone. Owned here, freed in deinit.
    private final class Track: @unchecked Sendable {
        // `@unchecked Sendable`: written once at creation, then only read (under the buffer's lock).
        let parameters: UnsafeMutablePointer<AVCodecParameters>
        let timeBase: AVRational
        let name: String
        let isVideo: Bool

        init(_ format: TrackFormat) throws(MediaError) {
            guard let parameters = avcodec_parameters_alloc() else { throw MediaError(.encoderFailed, "out of memory keeping a clip track") }
            avcodec_parameters_from_context(parameters, format.codec)
            self.parameters = parameters
            timeBase = format.timeBase
            name = format.name
            isVideo = format.kind == .video
        }

        deinit {
            var parameters: UnsafeMutablePointer<AVCodecParameters>? = self.parameters
            avcodec_parameters_free(&parameters)
        }
    }

    /// One kept packet: our own reference to the encoder's data.
    private final class Kept: @unchecked Sendable {
        // `@unchecked Sendable`: created by the writer, then only read; freed once, in deinit.
        let packet: UnsafeMutablePointer<AVPacket>
        let track: Int
        /// Decode time in seconds (the packet's own time base is its track's).
        let time: Double
        let isKeyframe: Bool

        init?(cloning packet: UnsafeMutablePointer<AVPacket>, track: Int, timeBase: AVRational, isVideo: Bool) {
            guard let clone = av_packet_clone(packet) else { return nil }
            self.packet = clone
            self.track = track
            let dts = clone.pointee.dts == ReplayFFmpeg.noTimestamp ? clone.pointee.pts : clone.pointee.dts
            time = Double(dts) * Double(timeBase.num) / Double(timeBase.den)
            isKeyframe = isVideo && (clone.pointee.flags & AV_PKT_FLAG_KEY) != 0
        }

        deinit {
            var packet: UnsafeMutablePointer<AVPacket>? = self.packet
            av_packet_free(&packet)
        }
    }

    private struct State {
        var tracks: [Track] = []
        var packets: [Kept] = []
        var bytes: Int64 = 0
    }

    /// Seconds kept.
    public let capacity: Double
    private let state = Mutex(State())
    private let logger: Logger

    public init(seconds capacity: Double, logger: Logger) {
        self.capacity = capacity
        self.logger = logger
    }

    package func addTrack(_ format: TrackFormat) throws(MediaError) -> Int {
        let track = try Track(format)
        return state.withLock { state in
            state.tracks.append(track)
            return state.tracks.count - 1
        }
    }

    public func start() throws(MediaError) {}

    package func write(_ encoded: EncodedPacket, track: Int) throws(MediaError) {
        if encoded.packet.pointee.duration == 0 { encoded.packet.pointee.duration = encoded.defaultDuration }
        try state.withLock { (state: inout State) throws(MediaError) in
            let info = state.tracks[track]
            // Packets keep the encoder's time base, their track's.
            guard let kept = Kept(cloning: encoded.packet, track: track, timeBase: info.timeBase, isVideo: info.isVideo) else {
                throw MediaError(.encoderFailed, "out of memory keeping a packet for the clip buffer")
            }
            state.packets.append(kept)
            state.bytes += Int64(kept.packet.pointee.size)
            // Forget whole keyframe groups while what is left still spans the capacity.
            while let second = state.packets.dropFirst().firstIndex(where: \.isKeyframe),
                  kept.time - state.packets[second].time >= capacity {
                for old in state.packets[..<second] { state.bytes -= Int64(old.packet.pointee.size) }
                state.packets.removeFirst(second)
            }
        }
    }

    public func flush() throws(MediaError) {}
    public func finish() throws(MediaError) {}

    /// Encoded bytes held now (what the buffer costs in memory, beside its bookkeeping).
    public var bytesWritten: Int64 { state.withLock { $0.bytes } }

    /// Seconds of pictures held now (from the first keyframe to the last packet).
    public var bufferedSeconds: Double {
        state.withLock { state in
            guard let first = state.packets.first(where: \.isKeyframe), let last = state.packets.last else { return 0 }
            return max(0, last.time - first.time)
        }
    }

    /// Writes the last `seconds` (from the keyframe at or before their start) to a new MP4 at
    /// `path` (which must not exist; mode 0600), without re-encoding. Returns the clip's length.
    @discardableResult
    public func export(lastSeconds seconds: Double, to path: String) throws(MediaError) -> Double {
        // A consistent copy of what is needed, taken under the lock; the file is written outside it.
        let (tracks, packets) = state.withLock { state -> ([Track], [Kept]) in
            guard let end = state.packets.last?.time else { return (state.tracks, []) }
            let start = state.packets.lastIndex { $0.isKeyframe && $0.time <= end - seconds }
                ?? state.packets.firstIndex(where: \.isKeyframe)
            return (state.tracks, start.map { Array(state.packets[$0...]) } ?? [])
        }
        guard let first = packets.first else {
            throw MediaError(.writeFailed, "the clip buffer holds no picture yet: nothing to save")
        }
        let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw MediaError(code == EEXIST ? .outputExists : .outputNotWritable,
                             code == EEXIST ? "\(path) already exists" : "cannot create \(path): \(String(cString: strerror(code)))")
        }
        close(fd)
        do throws(FFmpegError) {
            let output = try FormatOutput(format: "mp4", target: .url(path))
            output.context.pointee.avoid_negative_ts = AVFMT_AVOID_NEG_TS_MAKE_ZERO
            for track in tracks {
                _ = try output.addStream(timeBase: track.timeBase, handlerName: track.name) { parameters in
                    avcodec_parameters_copy(parameters, track.parameters)
                }
            }
            try output.writeHeader(options: [("movflags", "+faststart")])
            guard let packet = av_packet_alloc() else { throw FFmpegError("av_packet_alloc", message: "out of memory") }
            var owned: UnsafeMutablePointer<AVPacket>? = packet
            defer { av_packet_free(&owned) }
            for kept in packets {
                let timeBase = tracks[kept.track].timeBase
                // Every track starts where the first keyframe decodes.
                let origin = Int64((first.time * Double(timeBase.den) / Double(timeBase.num)).rounded())
                av_packet_ref(packet, kept.packet)
                packet.pointee.stream_index = Int32(kept.track)
                packet.pointee.pts -= origin
                packet.pointee.dts -= origin
                av_packet_rescale_ts(packet, timeBase, output.timeBase(of: Int32(kept.track)))
                let skip = packet.pointee.pts < 0 && !tracks[kept.track].isVideo   // sound from before the first picture
                if !skip { try output.writeInterleaved(packet) }
                av_packet_unref(packet)
            }
            try output.writeTrailer()
            output.close()
        } catch {
            unlink(path)
            throw MediaError(.writeFailed, "saving the clip to \(path) failed: \(error.text)")
        }
        let length = (packets.last?.time ?? first.time) - first.time
        logger.info("clip saved", metadata: ["path": "\(path)", "seconds": "\(length)", "packets": "\(packets.count)"])
        return length
    }
}
