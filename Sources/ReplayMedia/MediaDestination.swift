import CFFmpeg
import ReplayFFmpeg

/// What one encoder makes, described for a destination that adds a track for it.
///
/// `@unchecked Sendable`: it carries the encoder's context pointer, which a destination only reads
/// (to copy the codec parameters) while adding the track, before the encoder runs.
package struct TrackFormat: @unchecked Sendable {
    package enum Kind: Sendable { case video, audio }
    package let kind: Kind
    /// The track's name, what players list ("Screen", "Microphone").
    package let name: String
    /// The encoder's context: a destination copies the codec parameters from it when it adds the
    /// track, before anything is encoded. Owned by the encoder, which outlives its destinations' start.
    let codec: UnsafeMutablePointer<AVCodecContext>
    /// The time base of the encoder's packets.
    let timeBase: AVRational
}

/// An encoder's track description copied out of it (codec parameters, time base, name): what a
/// destination that connects more than once (`ReconnectingStream`) adds at each connection, after
/// the encoder that made it may be gone. Owns its `AVCodecParameters`.
package final class TrackParameters: @unchecked Sendable {
    // `@unchecked Sendable`: never changed after `init`; read by one connection at a time.
    let parameters: UnsafeMutablePointer<AVCodecParameters>
    package let kind: TrackFormat.Kind
    package let name: String
    let timeBase: AVRational

    package init(_ format: TrackFormat) {
        guard let parameters = avcodec_parameters_alloc() else { fatalError("out of memory copying a track's parameters") }
        avcodec_parameters_from_context(parameters, format.codec)
        self.parameters = parameters
        kind = format.kind
        name = format.name
        timeBase = format.timeBase
    }

    deinit {
        var p: UnsafeMutablePointer<AVCodecParameters>? = parameters
        avcodec_parameters_free(&p)
    }

    /// The decoder configuration (avcC or Annex B SPS/PPS, AudioSpecificConfig).
    var extradata: [UInt8] {
        guard let data = parameters.pointee.extradata, parameters.pointee.extradata_size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(parameters.pointee.extradata_size)))
    }
}

/// One encoded packet as it leaves an encoder, with the time base of its times. Valid only during
/// the `write` that hands it over; the destination may change it (rescale its times, raise a
/// decode time): each destination gets its own reference (`TrackOutputs`).
package struct EncodedPacket {
    let packet: UnsafeMutablePointer<AVPacket>
    let timeBase: AVRational
    /// The duration a destination gives a packet the encoder sent without one (a video tick).
    let defaultDuration: Int64

    /// The presentation time, in the encoder's time base.
    package var presentationTime: Int64 { packet.pointee.pts }
}

/// Where encoded media goes: the fragmented MP4 file today; a live stream and a clip ring next.
/// One capture, encoded once, may feed several (`TrackOutputs` hands each its own reference).
///
/// Called from the encoder threads (video and audio at once): a destination serialises itself.
/// A failure sticks: once `write` has thrown, later writes throw the same.
package protocol MediaDestination: AnyObject, Sendable {
    /// Adds a track carrying what `format` describes; before `start()`. Returns the track's index.
    func addTrack(_ format: TrackFormat) throws(MediaError) -> Int
    /// Opens the output and writes its header.
    func start() throws(MediaError)
    /// Writes one packet of `track`.
    func write(_ packet: EncodedPacket, track: Int) throws(MediaError)
    /// Puts what was written on its way now (a fragment cut and flushed): the screen went still,
    /// and the next packet may be seconds away.
    func flush() throws(MediaError)
    /// Finishes the output (trailer, close). After a failure it still closes what it can.
    func finish() throws(MediaError)
    /// Bytes written so far.
    var bytesWritten: Int64 { get }
}

/// The tracks one encoder's packets go to: one track in each destination.
package struct TrackOutputs: Sendable {
    private var tracks: [(destination: any MediaDestination, track: Int)] = []

    package init() {}

    package mutating func add(_ destination: any MediaDestination, track: Int) {
        tracks.append((destination, track))
    }

    package var isEmpty: Bool { tracks.isEmpty }

    /// Hands `packet` to every destination: the last gets the encoder's reference, the others a
    /// reference of their own to the same data (no copy of the bytes).
    func write(_ packet: EncodedPacket) throws(MediaError) {
        for (index, entry) in tracks.enumerated() {
            if index == tracks.count - 1 {
                try entry.destination.write(packet, track: entry.track)
            } else {
                guard let clone = av_packet_clone(packet.packet) else {
                    throw MediaError(.encoderFailed, "out of memory passing a packet to a second destination")
                }
                var owned: UnsafeMutablePointer<AVPacket>? = clone
                defer { av_packet_free(&owned) }
                try entry.destination.write(EncodedPacket(packet: clone, timeBase: packet.timeBase,
                                                          defaultDuration: packet.defaultDuration), track: entry.track)
            }
        }
    }
}

extension FormatOutput {
    /// Adds a stream as `parameters` describe it.
    func addTrack(_ parameters: TrackParameters) throws(MediaError) -> Int {
        do throws(FFmpegError) {
            return Int(try addStream(timeBase: parameters.timeBase, handlerName: parameters.name) { codec in
                avcodec_parameters_copy(codec, parameters.parameters)
            })
        } catch {
            throw MediaError(.writeFailed, "cannot add the track \(parameters.name): \(error.text)")
        }
    }

    /// Adds a stream for `format`'s encoder, counting time in `timeBase`, named after the track.
    func addTrack(_ format: TrackFormat, timeBase: AVRational) throws(MediaError) -> Int {
        do throws(FFmpegError) {
            return Int(try addStream(timeBase: timeBase, handlerName: format.name) { parameters in
                avcodec_parameters_from_context(parameters, format.codec)
            })
        } catch {
            throw MediaError(.writeFailed, "cannot add the track \(format.name): \(error.text)")
        }
    }
}
