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

    @Test func writesAPlayableFragmentedMovie() async throws {
        let path = temporaryPath("movie.mp4")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let (width, height, fps) = (320, 240, 30)
        let writer = try MovieWriter(path: path, logger: logger)
        let encoding = try EncodingFixture(into: writer, logger: logger)

        let frame = BGRAPicture.redAndBlue(width: width, height: height).frame()
        for index in 0..<(2 * fps) {
            try encoding.video.encode(frame, pts: Int64(index), to: encoding.videoTrack)
        }
        _ = try encoding.encodeTone(440, from: 0, to: 2 * 48_000)
        try encoding.finishEncoding()
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

    /// One encoder feeding two destinations (as one capture feeds a file and a stream): each gets
    /// every packet with its own times, and both movies hold the same pictures.
    @Test func oneEncoderFeedsTwoDestinations() async throws {
        let first = temporaryPath("first.mp4"), second = temporaryPath("second.mp4")
        defer {
            for path in [first, second] { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        }
        let (width, height, fps) = (320, 240, 30)
        let video = try VideoEncoder(settings: VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23), logger: logger)
        var outputs = TrackOutputs()
        let writers = try [first, second].map { try MovieWriter(path: $0, logger: logger) }
        for writer in writers { outputs.add(writer, track: try writer.addTrack(video.trackFormat(name: "Screen"))) }
        for writer in writers { try writer.start() }
        let frame = BGRAPicture.redAndBlue(width: width, height: height).frame()
        // Ticks with gaps, as a capture that skips a still screen makes them.
        let ticks: [Int64] = (0..<20).map { Int64($0) } + [25, 26, 40, 41, 42, 59]
        for tick in ticks { try video.encode(frame, pts: tick, to: outputs) }
        try video.encode(nil, pts: 0, to: outputs)
        for writer in writers { try writer.finish() }
        for path in [first, second] {
            let pictures = try await MediaProbe.videoPictures(path)
            #expect(pictures.map { Int64(($0.time * Double(fps)).rounded()) } == ticks, "\(path)")
            let decoded = try await FrameDecoder.frame(at: 0.5, in: path)
            let left = decoded.pixel(x: width / 4, y: height / 2)
            #expect(left.r > 200 && left.g < 50 && left.b < 50, "left half is red in \(path), got \(left)")
        }
    }

    /// libx264 may make a B-frame only of a picture that changed most of the screen; every picture
    /// keeps the time it was stamped with (the first at zero, gaps and all), decoding never comes
    /// after presentation, and a keyframe comes every 60 pictures (2 s at 30 fps).
    @Test func bFramesOnlyWhereMostOfThePictureChanged() async throws {
        let path = temporaryPath("bframes.mp4")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let (width, height, fps) = (320, 240, 30)
        var settings = VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23)
        // One set-up throughout: a recording's first (a desktop in use) would end early for the
        // full motion, a keyframe of its own (X264EncoderTests.libx264IsSetUpForWhatTheScreenDoes).
        settings.adaptsToActivity = false
        let video = try VideoEncoder(settings: settings, logger: logger)
        let writer = try MovieWriter(path: path, logger: logger)
        var track = TrackOutputs()
        track.add(writer, track: try writer.addTrack(video.trackFormat(name: "Screen")))
        try writer.start()

        // 40 pictures of full motion, one every tick, then 40 small changes every third tick.
        let ticks = (0..<40).map { Int64($0) } + (0..<40).map { Int64(40 + 3 * $0) }
        let frame = VideoFrame(width: width, height: height)
        var picture = BGRAPicture.redAndBlue(width: width, height: height)
        for (number, tick) in ticks.enumerated() {
            let column = (number * 7) % width   // a white stripe that moves
            picture.fill(x: column..<column + 6, y: 0..<height, [255, 255, 255])
            _ = picture.frame(into: frame)
            frame.changedFraction = number < 40 ? 1 : 0.05
            try video.encode(frame, pts: tick, to: track)
            try writer.flush()   // as on a still screen: a fragment may end after any packet
        }
        try video.encode(nil, pts: 0, to: track)
        try writer.finish()

        let pictures = try await MediaProbe.videoPictures(path)
        #expect(pictures.map { Int64(($0.time * Double(fps)).rounded()) } == ticks)
        let types = pictures.map(\.type)
        #expect(types[0] == "I" && types[60] == "I", "keyframes at pictures 0 and 60: \(types.joined())")
        #expect(types.filter { $0 == "I" }.count == 2, "\(types.joined())")
        #expect(types[..<40].filter { $0 == "B" }.count >= 15, "full motion: \(types[..<40].joined())")
        #expect(!types[40...].contains("B"), "small changes: \(types[40...].joined())")

        let packets = try await MediaProbe.videoPackets(path)
        #expect(packets.count == ticks.count)
        #expect(packets.first?.decoding == 0)
        for (earlier, later) in zip(packets, packets.dropFirst()) { #expect(later.decoding > earlier.decoding) }
        #expect(packets.allSatisfy { $0.decoding <= $0.presentation })
    }

    /// A still screen as replayd writes it: a picture a second, each fragment cut at once, then the
    /// last picture at the last tick (`RecordingEnd`). The header states what the packets say: the
    /// format, each stream and the last packet all end at 3 s (the sound at 3 s plus its last block).
    @Test func aStillMovieStatesItsDurationInTheHeader() async throws {
        let path = temporaryPath("still.mp4")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let (width, height, fps) = (320, 240, 30)
        let writer = try MovieWriter(path: path, logger: logger)
        let encoding = try EncodingFixture(into: writer, logger: logger)
        let frame = BGRAPicture.redAndBlue(width: width, height: height).frame()
        frame.changedFraction = 0
        for tick: Int64 in [0, 30, 60, 89] {
            try encoding.video.encode(frame, pts: tick, to: encoding.videoTrack)
            try writer.flush()
        }
        _ = try encoding.encodeTone(0, from: 0, to: 3 * 48_000)
        try encoding.finishEncoding()
        try writer.finish()

        let ends = writer.trackEnds
        #expect(abs(ends[0] - 3) < 1e-9, "the video track ends at 3 s: \(ends)")
        let (format, streams, packetEnds) = try await MediaProbe.durations(path)
        let all = "format \(format ?? -1), streams \(streams), packets end \(packetEnds)"
        #expect(abs((format ?? 0) - ends.max()!) < 0.002, "\(all)")
        #expect(abs((streams[0] ?? 0) - 3) < 0.001, "\(all)")
        #expect(abs(packetEnds[0] - 3) < 0.001, "\(all)")
        #expect(abs((streams[1] ?? 0) - ends[1]) < 0.001 && abs(packetEnds[1] - ends[1]) < 0.001, "\(all)")
        #expect(ends[1] >= 3 && ends[1] < 3 + 1.0 / Double(fps), "\(all)")
    }

    /// h264_vaapi on a render node that does not open: a clear error naming the node (replayd says
    /// it and records nothing), and the half-made encoder's C handles are freed without a crash.
    @Test func vaapiOnANodeThatDoesNotOpenIsAClearError() {
        var settings = VideoEncoderSettings(width: 64, height: 48, framesPerSecond: 30, preset: "veryfast", crf: 23)
        settings.backend = .vaapi
        let node = "/nonexistent/dri/renderD128"
        do {
            _ = try VideoEncoder(settings: settings, renderNode: node, logger: logger)
            Issue.record("h264_vaapi opened on \(node)")
        } catch {
            #expect(error.kind == .encoderUnavailable)
            #expect(error.message.contains(node), "names the node: \(error.message)")
        }
    }

    @Test func refusesAnExistingFile() throws {
        let path = temporaryPath("exists.mp4")
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8)))
        #expect(throws: MediaError.self) { try MovieWriter(path: path, logger: logger) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
    }
}
