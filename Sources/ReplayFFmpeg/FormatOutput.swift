package import CFFmpeg
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A deadline for a network output's blocking calls (connecting, writing): libavformat's network
/// code polls in steps of 100 ms and asks this between steps, so a connection that stopped moving
/// (a cable pulled, a proxy that holds the socket open) gives an error instead of blocking forever.
/// Set from the thread that calls the output; `abort()` from any thread ends the call under way.
package final class IOInterrupt: Sendable {
    /// `CLOCK_MONOTONIC` nanoseconds after which a blocking call gives up; 0: none.
    private let deadline = Atomic<Int64>(0)
    private let aborted = Atomic(false)

    package init() {}

    /// The next blocking calls give up `seconds` from now (nil: they never time out).
    package func arm(seconds: Double?) {
        deadline.store(seconds.map { Self.now() + Int64($0 * 1e9) } ?? 0, ordering: .relaxed)
    }

    /// Every blocking call gives up at once, now and from now on.
    package func abort() { aborted.store(true, ordering: .relaxed) }

    var shouldInterrupt: Bool {
        if aborted.load(ordering: .relaxed) { return true }
        let deadline = deadline.load(ordering: .relaxed)
        return deadline != 0 && Self.now() > deadline
    }

    private static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}

/// One libavformat output: a muxer (`mp4`, `flv`, …) writing to a file or URL that it opens itself
/// (RTMP, SRT: the protocols libavformat speaks), or to memory through a callback. The movie file,
/// the live fMP4 stream and the RTMP relay are all one of these.
///
/// Owns its `AVFormatContext`, the I/O context it opened or made (and that one's buffer), and frees
/// them in `deinit`. Not thread-safe: one owner calls it, one call at a time (or under its lock).
package final class FormatOutput {
    package enum Target {
        /// A file path or a URL (`rtmp://…`, `srt://…`), opened by `writeHeader`.
        case url(String)
        /// Every byte the muxer writes goes to this callback, synchronously, as it writes.
        case memory((UnsafeRawBufferPointer) -> Void)
    }

    /// Holds the memory target's callback for the C write callback (passed unretained: `self` keeps it).
    private final class MemorySink {
        let write: (UnsafeRawBufferPointer) -> Void
        init(_ write: @escaping (UnsafeRawBufferPointer) -> Void) { self.write = write }
    }

    package let context: UnsafeMutablePointer<AVFormatContext>
    private let url: String?
    private let sink: MemorySink?
    private var customIO: UnsafeMutablePointer<AVIOContext>?
    /// Asked by libavformat's network code while it blocks (kept alive here: the callback holds it unretained).
    private var interrupt: IOInterrupt?

    /// A muxer of `format` for `target`. Nothing is opened yet.
    package init(format: String, target: Target) throws(FFmpegError) {
        var context: UnsafeMutablePointer<AVFormatContext>?
        switch target {
        case .url(let url):
            try check("avformat_alloc_output_context2(\(format))", avformat_alloc_output_context2(&context, nil, format, url))
            self.url = url
            self.sink = nil
        case .memory(let write):
            try check("avformat_alloc_output_context2(\(format))", avformat_alloc_output_context2(&context, nil, format, nil))
            self.url = nil
            self.sink = MemorySink(write)
        }
        guard let context else { throw FFmpegError("avformat_alloc_output_context2(\(format))", message: "no context") }
        self.context = context
        if let sink {
            let bufferSize: Int32 = 64 << 10
            guard let buffer = av_malloc(Int(bufferSize)) else {
                avformat_free_context(context)
                throw FFmpegError("av_malloc", message: "out of memory")
            }
            let opaque = Unmanaged.passUnretained(sink).toOpaque()
            customIO = avio_alloc_context(buffer.assumingMemoryBound(to: UInt8.self), bufferSize, 1, opaque, nil, { opaque, data, size in
                guard let opaque, let data, size > 0 else { return 0 }
                Unmanaged<MemorySink>.fromOpaque(opaque).takeUnretainedValue().write(UnsafeRawBufferPointer(start: data, count: Int(size)))
                return size
            }, nil)
            guard let customIO else {
                av_free(buffer)
                avformat_free_context(context)
                throw FFmpegError("avio_alloc_context", message: "out of memory")
            }
            context.pointee.pb = customIO
            context.pointee.flags |= AVFMT_FLAG_CUSTOM_IO
        }
    }

    deinit {
        if customIO != nil {
            // Ours (custom I/O): the context must not close it; free the context, then the I/O and its buffer.
            context.pointee.pb = nil
            avformat_free_context(context)
            av_freep(&customIO!.pointee.buffer)
            avio_context_free(&customIO)
        } else {
            if context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
            avformat_free_context(context)
        }
    }

    /// Adds a stream counting time in `timeBase`; `configure` fills its codec parameters. Returns its index.
    package func addStream(timeBase: AVRational, handlerName: String? = nil,
                           configure: (UnsafeMutablePointer<AVCodecParameters>) throws(FFmpegError) -> Void) throws(FFmpegError) -> Int32 {
        guard let stream = avformat_new_stream(context, nil) else { throw FFmpegError("avformat_new_stream", message: "out of memory") }
        stream.pointee.time_base = timeBase
        if let handlerName { av_dict_set(&stream.pointee.metadata, "handler_name", handlerName, 0) }
        try configure(stream.pointee.codecpar)
        return stream.pointee.index
    }

    /// Copies `bytes` as a stream's decoder configuration (`extradata`: avcC, AudioSpecificConfig).
    package static func setExtradata(_ parameters: UnsafeMutablePointer<AVCodecParameters>, _ bytes: [UInt8]) throws(FFmpegError) {
        guard let extradata = av_mallocz(bytes.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else {
            throw FFmpegError("av_mallocz", message: "out of memory")
        }
        bytes.withUnsafeBytes { if let base = $0.baseAddress { extradata.copyMemory(from: base, byteCount: bytes.count) } }
        av_freep(&parameters.pointee.extradata)
        parameters.pointee.extradata = extradata.assumingMemoryBound(to: UInt8.self)
        parameters.pointee.extradata_size = Int32(bytes.count)
    }

    /// The time base of stream `index` (the muxer may change it in `writeHeader`).
    package func timeBase(of index: Int32) -> AVRational {
        context.pointee.streams[Int(index)]!.pointee.time_base
    }

    package var streamCount: Int { Int(context.pointee.nb_streams) }

    /// Makes the URL's blocking calls (connecting, writing) give up when `interrupt` says so.
    /// Before `writeHeader`.
    package func setInterrupt(_ interrupt: IOInterrupt) {
        self.interrupt = interrupt
        context.pointee.interrupt_callback = AVIOInterruptCB(callback: { opaque in
            guard let opaque else { return 0 }
            return Unmanaged<IOInterrupt>.fromOpaque(opaque).takeUnretainedValue().shouldInterrupt ? 1 : 0
        }, opaque: Unmanaged.passUnretained(interrupt).toOpaque())
    }

    /// Opens the file or URL (connecting, for a network URL: blocking) unless the output is in
    /// memory, then writes the header with the muxer's `options` (e.g. `movflags`). `ioOptions` go
    /// to the protocol that opens the URL (e.g. `send_buffer_size`, which RTMP hands to TCP).
    package func writeHeader(options: [(String, String)], ioOptions: [(String, String)] = []) throws(FFmpegError) {
        if let url, context.pointee.pb == nil {
            var io: OpaquePointer?
            defer { av_dict_free(&io) }
            for (key, value) in ioOptions { av_dict_set(&io, key, value, 0) }
            try check("opening \(Self.redacted(url))", avio_open2(&context.pointee.pb, url, AVIO_FLAG_WRITE,
                                                                    &context.pointee.interrupt_callback, &io))
        }
        var dictionary: OpaquePointer?
        defer { av_dict_free(&dictionary) }
        for (key, value) in options { av_dict_set(&dictionary, key, value, 0) }
        try checkIO("writing the header", avformat_write_header(context, &dictionary))
        avio_flush(context.pointee.pb)
    }

    /// Hands the muxer one packet (its times in the stream's time base), or nil: with a fragmenting
    /// muxer, cut the fragment now. A write error of the I/O layer (a full disk, a broken
    /// connection) is thrown even when the muxer itself returned success.
    package func write(_ packet: UnsafeMutablePointer<AVPacket>?) throws(FFmpegError) {
        try checkIO("writing", av_write_frame(context, packet))
    }

    /// Hands the muxer one packet to interleave with the other streams' (libavformat holds it until
    /// the others have caught up, so that the output is in decode order across streams); the
    /// packet's data is taken over (the packet comes back blank).
    package func writeInterleaved(_ packet: UnsafeMutablePointer<AVPacket>) throws(FFmpegError) {
        try checkIO("writing", av_interleaved_write_frame(context, packet))
    }

    /// Pushes what the I/O layer buffers to the file, socket or callback.
    package func flush() {
        if context.pointee.pb != nil { avio_flush(context.pointee.pb) }
    }

    /// Writes the trailer (`mfra` of a fragmented MP4, the FLV end).
    package func writeTrailer() throws(FFmpegError) {
        try checkIO("writing the trailer", av_write_trailer(context))
    }

    /// Closes the file or connection this output opened (the trailer first, if wanted). Idempotent.
    package func close() {
        if customIO == nil, context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
    }

    /// Bytes written so far.
    package var position: Int64 {
        context.pointee.pb == nil ? 0 : avio_tell(context.pointee.pb)
    }

    private func checkIO(_ operation: String, _ status: Int32) throws(FFmpegError) {
        let ioError = context.pointee.pb == nil ? 0 : context.pointee.pb.pointee.error
        if ioError < 0 { throw FFmpegError(operation, code: ioError) }
        try check(operation, status)
    }

    /// A URL without its last path component (usually a stream key), for logs and errors.
    package static func redacted(_ url: String) -> String {
        guard url.contains("://"), let slash = url.lastIndex(of: "/") else { return url }
        return url[..<slash] + "/…"
    }
}
