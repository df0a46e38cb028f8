import Foundation
import Logging
import ReplayTesting
import Testing
@testable import ReplayMedia

/// `ReconnectingStream` against a real ingest (nginx-rtmp), read back by ffmpeg and ffprobe.
@Suite("ReconnectingStream: a live stream to nginx-rtmp", .serialized)
struct ReconnectingStreamTests {
    let logger = Logger(label: "test")

    /// Grey with a green band that moves down 4 rows a picture.
    private func picture(width: Int, height: Int, index: Int) -> VideoFrame {
        var picture = BGRAPicture(width: width, height: height, bgr: [96, 96, 96])
        let band = (index * 4) % height
        picture.fill(x: 0..<width, y: band..<band + 16, [96, 220, 96])
        return picture.frame()
    }

    @Test("A new picture size mid-stream: the next packet carries a new sequence header and ffmpeg decodes pictures of both sizes",
          .timeLimit(.minutes(2)))
    func newPictureSize() async throws {
        try await NginxRTMPServer.with { nginx in
            // Published to nginx's `rec` application, which writes the stream from its first packet
            // as it arrived: a player started beside the publisher may join late on a loaded machine
            // (one did, in a loaded units phase, and saw only the second size).
            let stream = try ReconnectingStream(url: "\(nginx.recordingBase)/resize", logger: logger)
            let first = try VideoEncoder(settings: VideoEncoderSettings(width: 320, height: 240, framesPerSecond: 30, preset: "veryfast", crf: 23),
                                         logger: logger)
            let audio = try AudioEncoder(logger: logger)
            let videoTrack = try stream.addTrack(first.trackFormat(name: "video"))
            var videoOutputs = TrackOutputs()
            videoOutputs.add(stream, track: videoTrack)
            var audioOutputs = TrackOutputs()
            audioOutputs.add(stream, track: try stream.addTrack(audio.trackFormat(name: "audio")))
            try stream.start()
            #expect(stream.isLive)

            let samples = [Float](repeating: 0, count: audio.frameSize * 2)
            var audioPosition: Int64 = 48_000
            func encodeAudio(upTo tick: Int64) throws {
                while audioPosition < tick * 48_000 / 30 {
                    try samples.withUnsafeBufferPointer { try audio.encode($0, pts: audioPosition, to: audioOutputs) }
                    audioPosition += Int64(audio.frameSize)
                }
            }
            // Two seconds at 320x240, then the encoder flushed and one of 640x360 for two more,
            // paced at about twice real time.
            for index in 0..<60 {
                try first.encode(picture(width: 320, height: 240, index: index), pts: Int64(30 + index), to: videoOutputs)
                try encodeAudio(upTo: Int64(30 + index))
                try await Task.sleep(for: .milliseconds(15))
            }
            try first.encode(nil, pts: 0, to: videoOutputs)
            let second = try VideoEncoder(settings: VideoEncoderSettings(width: 640, height: 360, framesPerSecond: 30, preset: "veryfast", crf: 23),
                                          logger: logger)
            stream.replaceTrack(videoTrack, with: second.trackFormat(name: "video"))
            for index in 60..<120 {
                try second.encode(picture(width: 640, height: 360, index: index), pts: Int64(30 + index), to: videoOutputs)
                try encodeAudio(upTo: Int64(30 + index))
                try await Task.sleep(for: .milliseconds(15))
            }
            try second.encode(nil, pts: 0, to: videoOutputs)
            try audio.encode(nil, pts: 0, to: audioOutputs)
            try stream.finish()
            #expect(stream.counters.reconnections == 0)

            let file = try await nginx.finishedRecording(of: "resize")
            let sizes = try await MediaProbe.videoFrameSizes(file).map { "\($0.width)x\($0.height)" }
            let small = sizes.filter { $0 == "320x240" }.count, large = sizes.filter { $0 == "640x360" }.count
            print("new picture size: \(small) pictures decoded at 320x240, then \(large) at 640x360")
            #expect(small == 60 && large == 60, "pictures of each size decoded: \(small) at 320x240, \(large) at 640x360 of \(sizes.count)")
            #expect(sizes.firstIndex(of: "640x360").map { index in !sizes[index...].contains("320x240") } == true, "the new size follows the old")
        }
    }
}
