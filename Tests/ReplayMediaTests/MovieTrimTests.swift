import Foundation
import ReplayTesting
import Testing
@testable import ReplayMedia

/// `MovieTrim` on real movies made by ffmpeg (H.264 with B-frames, a keyframe every second, AAC),
/// as a plain MP4 and as a fragmented one like a recording; the cuts are read back with ffprobe.
@Suite struct MovieTrimTests {
    static func makeMovie(_ path: String, fragmented: Bool) async throws {
        let result = try await ProcessRunner.run("ffmpeg", arguments: [
            "-nostdin", "-v", "error", "-y",
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30",
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", "8", "-c:v", "libx264", "-preset", "ultrafast", "-bf", "2", "-g", "30", "-keyint_min", "30",
            "-sc_threshold", "0", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest",
        ] + (fragmented ? ["-movflags", "+frag_keyframe+empty_moov+default_base_moof"] : []) + [path], timeout: .seconds(60))
        guard result.succeeded else { throw HarnessError("ffmpeg could not make the movie: \(result)") }
    }

    @Test(arguments: [false, true])
    func cutsAtTheKeyframeBeforeTheStart(fragmented: Bool) async throws {
        let folder = try makeTemporaryDirectory(prefix: "ork-trim")
        defer { try? FileManager.default.removeItem(at: folder) }
        let movie = folder.appendingPathComponent("movie.mp4").path
        try await Self.makeMovie(movie, fragmented: fragmented)
        #expect(abs(try MovieTrim.duration(of: movie) - 8) < 0.1)

        // On a keyframe: exact.
        let exact = folder.appendingPathComponent("exact.mp4").path
        let cut = try MovieTrim.trim(movie, to: exact, from: 2, to: 5)
        #expect(abs(cut.start - 2) < 0.001 && abs(cut.duration - 3) < 0.05, "\(cut)")
        let info = try await MediaProbe.probe(exact)
        #expect(abs(try #require(info.format.duration) - 3) < 0.1, "\(String(describing: info.format.duration))")
        // 90 frames, less the B-frames before the end that need the frame after it (-bf 2).
        #expect((87...90).contains(try #require(info.videoStreams.first?.frameCount)))
        #expect(abs(try #require(info.audioStreams.first?.duration) - 3) < 0.1)

        // Between keyframes: from the keyframe before (3 s), never later.
        let early = folder.appendingPathComponent("early.mp4").path
        let earlyCut = try MovieTrim.trim(movie, to: early, from: 3.6, to: 6.5)
        // (In the fragmented movie, without an edit list, every picture is shown two frames after
        // it is decoded: the keyframe of 3 s is shown at 3.067 s.)
        #expect(earlyCut.start >= 2.999 && earlyCut.start < 3.1, "\(earlyCut)")
        let earlyInfo = try await MediaProbe.probe(early)
        #expect(abs(try #require(earlyInfo.format.duration) - 3.5) < 0.1)
        #expect((102...105).contains(try #require(earlyInfo.videoStreams.first?.frameCount)))

        // Every frame decodes: ffmpeg reads the cut without an error.
        let decode = try await ProcessRunner.run("ffmpeg", arguments: ["-nostdin", "-v", "error", "-i", early, "-f", "null", "-"], timeout: .seconds(60))
        #expect(decode.succeeded && decode.stderr.isEmpty, "\(decode)")
    }

    @Test func refusesAnEmptyRangeAndAMissingFile() throws {
        #expect(throws: MovieTrim.Failure.self) { try MovieTrim.trim("/nonexistent.mp4", to: "/tmp/never.mp4", from: 0, to: 1) }
        #expect(throws: MovieTrim.Failure.self) { try MovieTrim.trim("/nonexistent.mp4", to: "/tmp/never.mp4", from: 2, to: 1) }
        #expect(!FileManager.default.fileExists(atPath: "/tmp/never.mp4"))
    }
}
