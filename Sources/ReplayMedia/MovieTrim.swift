import CFFmpeg
import ReplayFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// Cuts a movie to a time range without re-encoding: a remux, every packet copied as it is.
///
/// A compressed video can only start at a keyframe, so the cut starts at **the keyframe at or
/// before `start`** (at most one keyframe interval early: 2 s in `replay`'s recordings), never
/// later: nothing the person kept is lost. The sound starts at that same instant. At the end,
/// video stops at the first frame (in decode order) shown at or after `end`: with B-frames, the
/// few frames just before `end` that refer to it go too (at most `max_b_frames`: one in
/// `replay`'s recordings), so that every kept frame decodes; sound goes up to `end`. The output is
/// an MP4 whose times start at 0; its length is `end - start` plus however much earlier the
/// keyframe was.
package enum MovieTrim {
    package struct Failure: Error, Sendable, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// What was written: where the cut really starts (the keyframe's time) and how long it is, in seconds.
    package struct Cut: Sendable, Equatable {
        package var start: Double
        package var duration: Double
    }

    /// The movie's length in seconds.
    package static func duration(of path: String) throws(Failure) -> Double {
        try MovieInput(path).duration
    }

    /// Writes `[start, end)` of `input` to the MP4 `output` (replaced if it exists; removed again
    /// when the cut fails).
    package static func trim(_ input: String, to output: String, from start: Double, to end: Double) throws(Failure) -> Cut {
        guard end > start, start >= 0 else { throw Failure("cannot cut \(start)–\(end) s: the end must come after the start") }
        do {
            return try cut(input, to: output, from: start, to: end)
        } catch {
            unlink(output)
            throw error
        }
    }

    private static func cut(_ path: String, to output: String, from start: Double, to end: Double) throws(Failure) -> Cut {
        let input = try MovieInput(path)
        let context = input.context
        let video = av_find_best_stream(context, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)

        // The cut's origin: the keyframe at or before `start`; seeking there a second time puts
        // every other stream at or before it too.
        var origin = start
        if start > 0 {
            try input.seek(to: start)
            if video >= 0, let keyframe = try input.firstTime(ofStream: video) { origin = min(keyframe, start) }
            try input.seek(to: origin)
        }

        let muxer: FormatOutput
        var outputIndex = [Int32](repeating: -1, count: Int(context.pointee.nb_streams))
        do throws(FFmpegError) {
            muxer = try FormatOutput(format: "mp4", target: .url(output))
            for index in 0..<Int(context.pointee.nb_streams) {
                let stream = context.pointee.streams[index]!
                let type = stream.pointee.codecpar.pointee.codec_type
                guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO else { continue }
                outputIndex[index] = try muxer.addStream(timeBase: stream.pointee.time_base) { parameters throws(FFmpegError) in
                    _ = try check("avcodec_parameters_copy", avcodec_parameters_copy(parameters, stream.pointee.codecpar))
                    parameters.pointee.codec_tag = 0
                }
                // The recording's handler names ("Screen", "Microphone") stay.
                av_dict_copy(&muxer.context.pointee.streams[Int(outputIndex[index])]!.pointee.metadata, stream.pointee.metadata, 0)
            }
            try muxer.writeHeader(options: [])
        } catch {
            throw Failure("cannot write \(output): \(error.text)")
        }

        guard let packet = av_packet_alloc() else { throw Failure("out of memory") }
        var packetPointer: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&packetPointer) }
        var ended = [Bool](repeating: false, count: outputIndex.count)
        var last = origin
        while ended.enumerated().contains(where: { !$0.element && outputIndex[$0.offset] >= 0 }) {
            let status = av_read_frame(context, packet)
            if status == AVErrorCode.endOfFile.rawValue { break }
            guard status >= 0 else { throw Failure("cannot read \(path): \(AVErrorCode(rawValue: status))") }
            defer { av_packet_unref(packet) }
            let index = Int(packet.pointee.stream_index)
            guard outputIndex[index] >= 0, !ended[index] else { continue }
            let inputTimeBase = context.pointee.streams[index]!.pointee.time_base
            let timestamp = packet.pointee.pts != noTimestamp ? packet.pointee.pts : packet.pointee.dts
            guard timestamp != noTimestamp else { continue }
            let time = Double(timestamp) * av_q2d(inputTimeBase)
            if time >= end {
                // Video: no later packet either (it would be a frame referring to this one).
                if index == Int(video) || time >= end + 1 { ended[index] = true }
                continue
            }
            if time < origin - 0.000_5 { continue }
            last = max(last, time + Double(packet.pointee.duration) * av_q2d(inputTimeBase))
            let shift = av_rescale_q(Int64((origin * 1_000_000).rounded()), AVRational(num: 1, den: 1_000_000), inputTimeBase)
            if packet.pointee.pts != noTimestamp { packet.pointee.pts -= shift }
            if packet.pointee.dts != noTimestamp { packet.pointee.dts -= shift }
            packet.pointee.stream_index = outputIndex[index]
            packet.pointee.pos = -1
            av_packet_rescale_ts(packet, inputTimeBase, muxer.timeBase(of: outputIndex[index]))
            do throws(FFmpegError) {
                try muxer.writeInterleaved(packet)
            } catch {
                throw Failure("cannot write \(output): \(error.text)")
            }
        }
        do throws(FFmpegError) {
            try muxer.writeTrailer()
            muxer.close()
        } catch {
            throw Failure("cannot finish \(output): \(error.text)")
        }
        return Cut(start: origin, duration: min(last, end) - origin)
    }
}

/// FFmpeg's "no time" (`AV_NOPTS_VALUE`, INT64_MIN: a cast macro Swift does not import).
private let noTimestamp = Int64.min

/// One demuxer on a movie file; closes it when it goes.
private final class MovieInput {
    let context: UnsafeMutablePointer<AVFormatContext>
    let path: String

    init(_ path: String) throws(MovieTrim.Failure) {
        var context: UnsafeMutablePointer<AVFormatContext>?
        let status = avformat_open_input(&context, path, nil, nil)
        guard status >= 0, let opened = context else {
            throw MovieTrim.Failure("cannot open \(path): \(AVErrorCode(rawValue: status))")
        }
        let info = avformat_find_stream_info(opened, nil)
        guard info >= 0 else {
            avformat_close_input(&context)
            throw MovieTrim.Failure("cannot read the streams of \(path): \(AVErrorCode(rawValue: info))")
        }
        self.context = opened
        self.path = path
    }

    deinit {
        var context: UnsafeMutablePointer<AVFormatContext>? = context
        avformat_close_input(&context)
    }

    /// Seconds, from the container (0 when it does not say).
    var duration: Double {
        context.pointee.duration > 0 ? Double(context.pointee.duration) / Double(AV_TIME_BASE) : 0
    }

    /// Puts every stream at the keyframe at or before `seconds`.
    func seek(to seconds: Double) throws(MovieTrim.Failure) {
        let status = av_seek_frame(context, -1, Int64((seconds * Double(AV_TIME_BASE)).rounded(.down)), AVSEEK_FLAG_BACKWARD)
        guard status >= 0 else { throw MovieTrim.Failure("cannot seek in \(path): \(AVErrorCode(rawValue: status))") }
    }

    /// The presentation time of the next packet of `stream`, in seconds; nil at the end.
    func firstTime(ofStream stream: Int32) throws(MovieTrim.Failure) -> Double? {
        guard let packet = av_packet_alloc() else { throw MovieTrim.Failure("out of memory") }
        var packetPointer: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&packetPointer) }
        while true {
            let status = av_read_frame(context, packet)
            if status == AVErrorCode.endOfFile.rawValue { return nil }
            guard status >= 0 else { throw MovieTrim.Failure("cannot read \(path): \(AVErrorCode(rawValue: status))") }
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == stream else { continue }
            let timestamp = packet.pointee.pts != noTimestamp ? packet.pointee.pts : packet.pointee.dts
            guard timestamp != noTimestamp else { continue }
            return Double(timestamp) * av_q2d(context.pointee.streams[Int(stream)]!.pointee.time_base)
        }
    }
}
