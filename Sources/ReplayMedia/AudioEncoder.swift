import CFFmpeg
import ReplayFFmpeg
package import Logging

/// AAC-LC through libavcodec's native encoder: 48 kHz stereo, blocks of `frameSize` samples.
/// Used from one thread (the audio loop).
package final class AudioEncoder: @unchecked Sendable {
    package static let sampleRate = 48_000
    package static let channels = 2
    let context: UnsafeMutablePointer<AVCodecContext>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    /// Samples per channel the encoder takes per call (1024 for AAC).
    package let frameSize: Int

    package init(bitRate: Int = 160_000, logger: Logger) throws(MediaError) {
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_AAC) else {
            throw MediaError(.encoderUnavailable, "this FFmpeg has no AAC encoder")
        }
        guard let context = avcodec_alloc_context3(codec), let frame = av_frame_alloc(), let packet = av_packet_alloc() else {
            fatalError("out of memory allocating the AAC encoder")
        }
        self.context = context
        self.frame = frame
        self.packet = packet
        context.pointee.sample_rate = Int32(Self.sampleRate)
        context.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
        context.pointee.bit_rate = Int64(bitRate)
        context.pointee.time_base = AVRational(num: 1, den: Int32(Self.sampleRate))
        context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER
        av_channel_layout_default(&context.pointee.ch_layout, Int32(Self.channels))
        let status = avcodec_open2(context, codec, nil)
        guard status >= 0 else {
            throw MediaError(.encoderUnavailable, "could not open the AAC encoder: \(AVErrorCode(rawValue: status))")
        }
        frameSize = Int(context.pointee.frame_size)
        frame.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
        frame.pointee.nb_samples = Int32(frameSize)
        frame.pointee.sample_rate = Int32(Self.sampleRate)
        av_channel_layout_copy(&frame.pointee.ch_layout, &context.pointee.ch_layout)
        guard av_frame_get_buffer(frame, 0) >= 0 else { fatalError("out of memory allocating audio frames") }
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
    }

    /// The track this encoder's packets make, for a destination to add.
    package func trackFormat(name: String) -> TrackFormat {
        TrackFormat(kind: .audio, name: name, codec: context, timeBase: context.pointee.time_base)
    }

    /// Encodes one block of `frameSize` interleaved stereo samples starting at sample `pts`, or
    /// flushes when `interleaved` is nil, and hands the packets (times in samples) to `outputs`.
    ///
    /// The priming packet (before the first sample) has nothing of ours and a negative time: it is
    /// left out, so that every track of a recording starts at the same zero without edit lists.
    package func encode(_ interleaved: UnsafeBufferPointer<Float>?, pts: Int64, to outputs: TrackOutputs) throws(MediaError) {
        let timeBase = context.pointee.time_base
        try encode(interleaved, pts: pts) { packet throws(MediaError) in
            guard packet.pointee.pts >= 0 else { return }
            try outputs.write(EncodedPacket(packet: packet, timeBase: timeBase, defaultDuration: 0))
        }
    }

    private func encode(_ interleaved: UnsafeBufferPointer<Float>?, pts: Int64,
                        deliver: (UnsafeMutablePointer<AVPacket>) throws(MediaError) -> Void) throws(MediaError) {
        var status: Int32
        if let interleaved {
            precondition(interleaved.count == frameSize * Self.channels, "an AAC block is \(frameSize) stereo samples")
            av_frame_make_writable(frame)
            let left = UnsafeMutableRawPointer(frame.pointee.data.0!).assumingMemoryBound(to: Float.self)
            let right = UnsafeMutableRawPointer(frame.pointee.data.1!).assumingMemoryBound(to: Float.self)
            for i in 0..<frameSize {
                left[i] = interleaved[2 * i]
                right[i] = interleaved[2 * i + 1]
            }
            frame.pointee.pts = pts
            status = avcodec_send_frame(context, frame)
        } else {
            status = avcodec_send_frame(context, nil)
        }
        guard status >= 0 || status == AVErrorCode.endOfFile.rawValue else {
            throw MediaError(.encoderFailed, "the AAC encoder refused samples: \(AVErrorCode(rawValue: status))")
        }
        while true {
            status = avcodec_receive_packet(context, packet)
            if status == AVErrorCode.again.rawValue || status == AVErrorCode.endOfFile.rawValue { return }
            guard status >= 0 else {
                throw MediaError(.encoderFailed, "the AAC encoder failed: \(AVErrorCode(rawValue: status))")
            }
            defer { av_packet_unref(packet) }
            try deliver(packet)
        }
    }
}
