import Foundation
import Logging
@testable import ReplayMedia

/// A 320x240 H.264 encoder and an AAC encoder, each with its track in `destination`, started: what
/// the writer and clip tests share.
struct EncodingFixture {
    let video: VideoEncoder
    let audio: AudioEncoder
    var videoTrack = TrackOutputs()
    var audioTrack = TrackOutputs()

    init(into destination: any MediaDestination, width: Int = 320, height: Int = 240, framesPerSecond: Int = 30,
         preset: String = "veryfast", crf: Int = 23, logger: Logger) throws {
        video = try VideoEncoder(settings: VideoEncoderSettings(width: width, height: height, framesPerSecond: framesPerSecond,
                                                                 preset: preset, crf: crf), logger: logger)
        audio = try AudioEncoder(logger: logger)
        videoTrack.add(destination, track: try destination.addTrack(video.trackFormat(name: "Screen")))
        audioTrack.add(destination, track: try destination.addTrack(audio.trackFormat(name: "System sound")))
        try destination.start()
    }

    /// Encodes a tone of `frequency` Hz (0: silence) from sample `position` up to `end`; returns where it stopped.
    func encodeTone(_ frequency: Double, from position: Int64, to end: Int64) throws -> Int64 {
        var samples = [Float](repeating: 0, count: audio.frameSize * 2)
        var position = position
        while position < end {
            for i in 0..<audio.frameSize where frequency > 0 {
                let value = Float(0.5 * sin(2 * Double.pi * frequency * Double(position + Int64(i)) / 48_000))
                samples[2 * i] = value
                samples[2 * i + 1] = value
            }
            try samples.withUnsafeBufferPointer { try audio.encode($0, pts: position, to: audioTrack) }
            position += Int64(audio.frameSize)
        }
        return position
    }

    /// Flushes both encoders.
    func finishEncoding() throws {
        try video.encode(nil, pts: 0, to: videoTrack)
        try audio.encode(nil, pts: 0, to: audioTrack)
    }
}
