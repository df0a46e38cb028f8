import Testing
import Foundation
import Logging
@testable import ReplayMedia
import ReplayTesting

/// The real libavcodec/libavformat in-process: encode known pictures and a tone, write a
/// fragmented MP4, then read it back with ffprobe and decode it with ffmpeg.
@Suite(.serialized) struct MovieWriterTests {
    let logger = Logger(label: "test")

    private func temporaryPath(_ name: String) -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-media-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.appendingPathComponent(name).path
    }

    /// A BGRA picture: left half red, right half blue.
    private func picture(width: Int, height: Int) -> [UInt8] {
        var pixels = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 4
                let red = x < width / 2
                pixels[i] = red ? 0 : 255       // B
                pixels[i + 1] = 0               // G
                pixels[i + 2] = red ? 255 : 0   // R
            }
        }
        return pixels
    }

    @Test func writesAPlayableFragmentedMovie() async throws {
        let path = temporaryPath("movie.mp4")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let (width, height, fps) = (320, 240, 30)
        let video = try VideoEncoder(settings: VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23), logger: logger)
        let audio = try AudioEncoder(logger: logger)
        let writer = try MovieWriter(path: path, logger: logger)
        let videoTrack = writer.addTrack(for: video)
        let audioTrack = writer.addTrack(for: audio)
        try writer.start()

        let frame = VideoFrame(width: width, height: height)
        let pixels = picture(width: width, height: height)
        pixels.withUnsafeBufferPointer { frame.convert(fromBGRA: $0.baseAddress!, stride: width * 4, rows: 0..<height) }
        for index in 0..<(2 * fps) {
            try writer.encode(frame, pts: Int64(index), with: video, to: videoTrack)
        }
        try writer.encode(nil as VideoFrame?, pts: 0, with: video, to: videoTrack)

        var samples = [Float](repeating: 0, count: audio.frameSize * 2)
        var position: Int64 = 0
        while position < 2 * 48_000 {
            for i in 0..<audio.frameSize {
                let value = Float(0.5 * sin(2 * Double.pi * 440 * Double(position + Int64(i)) / 48_000))
                samples[2 * i] = value
                samples[2 * i + 1] = value
            }
            try samples.withUnsafeBufferPointer { try writer.encode($0, pts: position, with: audio, to: audioTrack) }
            position += Int64(audio.frameSize)
        }
        try writer.encode(nil as UnsafeBufferPointer<Float>?, pts: 0, with: audio, to: audioTrack)
        try writer.finish()

        let probe = try await MediaProbe.probe(path)
        let videoStream = try #require(probe.videoStreams.first)
        #expect(videoStream.codecName == "h264")
        #expect(videoStream.width == width && videoStream.height == height)
        #expect(videoStream.frameCount == 2 * fps)
        let audioStream = try #require(probe.audioStreams.first)
        #expect(audioStream.codecName == "aac")
        #expect(audioStream.sampleRate == 48_000)

        let decoded = try await FrameDecoder.frame(at: 1.0, in: path)
        let left = decoded.pixel(x: width / 4, y: height / 2)
        let right = decoded.pixel(x: 3 * width / 4, y: height / 2)
        #expect(left.r > 200 && left.g < 50 && left.b < 50, "left half is red, got \(left)")
        #expect(right.b > 200 && right.r < 50 && right.g < 50, "right half is blue, got \(right)")

        let tone = try await ToneAnalyzer.load(file: path, streamIndex: 0, from: 0.2, to: 1.8)
        #expect(tone.isPresent(frequency: 440))
        #expect(!tone.isPresent(frequency: 3000))
    }

    @Test func refusesAnExistingFile() throws {
        let path = temporaryPath("exists.mp4")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8)))
        #expect(throws: MediaError.self) { try MovieWriter(path: path, logger: logger) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
    }
}
