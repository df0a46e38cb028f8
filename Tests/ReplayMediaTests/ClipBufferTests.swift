import Testing
import Foundation
import Logging
@testable import ReplayMedia
import ReplayTesting

/// The clip ring with the real encoders: 20 s of pictures and a tone into a 15 s buffer, then the
/// last seconds saved as an MP4 and read back with ffprobe and ffmpeg.
@Suite(.serialized) struct ClipBufferTests {
    let logger = Logger(label: "test")

    private func temporaryFolder() -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-clip-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test func keepsTheLastSecondsAndSavesThemWithoutReencoding() async throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (width, height, fps, seconds) = (320, 240, 30, 20)
        let clips = ClipBuffer(seconds: 15, logger: logger)
        let encoding = try EncodingFixture(into: clips, width: width, height: height, framesPerSecond: fps,
                                           preset: "ultrafast", crf: 30, logger: logger)

        let frame = VideoFrame(width: width, height: height)
        var position: Int64 = 0
        for index in 0..<(seconds * fps) {
            // Red, then green for the last 3 seconds.
            _ = BGRAPicture(width: width, height: height, bgr: index >= (seconds - 3) * fps ? [0, 255, 0] : [0, 0, 255]).frame(into: frame)
            frame.changedFraction = 1
            try encoding.video.encode(frame, pts: Int64(index), to: encoding.videoTrack)
            // The sound up to this picture's time.
            position = try encoding.encodeTone(440, from: position, to: Int64(index + 1) * 48_000 / Int64(fps))
        }
        try encoding.finishEncoding()

        // 15 s and at most one keyframe group (2 s) more; bounded by the encoded stream.
        #expect(clips.bufferedSeconds >= 15 && clips.bufferedSeconds <= 17.1, "buffered \(clips.bufferedSeconds) s")
        #expect(clips.bytesWritten > 0 && clips.bytesWritten < 4 << 20, "\(clips.bytesWritten) bytes held")

        let path = folder.appendingPathComponent("clip.mp4").path
        let length = try clips.export(lastSeconds: 5, to: path)
        #expect(length >= 5 && length <= 7.1, "a clip of \(length) s")
        let probe = try await MediaProbe.probe(path)
        let picture = try #require(probe.videoStreams.first)
        #expect(picture.codecName == "h264" && picture.width == width)
        let duration = try #require(picture.duration)
        #expect(duration >= 4.9 && duration <= 7.2, "the clip's picture lasts \(duration) s")
        #expect(abs(Double(picture.frameCount ?? 0) - duration * Double(fps)) <= 2, "every picture of the clip is there")
        #expect(probe.audioStreams.first?.codecName == "aac")
        // It ends with the last three seconds' green, and begins before them with red.
        let last = try await FrameDecoder.frame(at: duration - 0.1, in: path).pixel(x: width / 2, y: height / 2)
        let first = try await FrameDecoder.frame(at: 0, in: path).pixel(x: width / 2, y: height / 2)
        #expect(last.g > 200 && last.r < 60, "the last picture is green: \(last)")
        #expect(first.r > 200 && first.g < 60, "the first picture is red: \(first)")
        let tone = try await ToneAnalyzer.load(file: path, streamIndex: 0, from: 0.5, to: duration - 0.5)
        #expect(tone.isPresent(frequency: 440))

        // Buffering goes on: a second export of a longer stretch, and bad requests.
        let longer = try clips.export(lastSeconds: 60, to: folder.appendingPathComponent("all.mp4").path)
        #expect(longer >= 15 && longer <= 17.1, "a clip of all that is held: \(longer) s")
        #expect(throws: MediaError.self) { try clips.export(lastSeconds: 5, to: path) }
        #expect(throws: MediaError.self) { try ClipBuffer(seconds: 5, logger: logger).export(lastSeconds: 5, to: folder.appendingPathComponent("empty.mp4").path) }
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("empty.mp4").path))
    }
}
