import Testing
import Foundation
import Logging
@testable import ReplayEngine
import ReplayMedia
import ReplayTesting

/// The pictures handed to the encoder take from the capture only the macroblocks they lack
/// (`ChangeHistory`): every recorded picture must still be the screen as it was, not a pooled
/// picture's older content. The desktop content's spinner moves one square among eight places,
/// a little at a time; a picture that missed a change shows two squares, or none.
@Suite("Engine: pooled pictures", .serialized, .timeLimit(.minutes(2)))
struct PooledPictureTests {
    static let background = RGB(30, 80, 110)
    static let square = RGB(250, 200, 40)

    @Test func everyPictureShowsTheSpinnersOneSquare() async throws {
        let logger = Logger(label: "test.pooled")
        let (width, height) = (640, 360)
        let content = TestContent.Options(mode: .desktop, audio: false)
        try await TestEnvironment.with(TestEnvironment.Configuration(width: width, height: height, audio: .deadServer, content: content)) { environment in
            let file = environment.outputPath("pooled.mp4")
            let engine = try await RecordingEngine.prepare(
                configuration: EngineConfiguration(video: .screen(display: environment.xvfb.display), audio: [], durationSeconds: 6),
                logger: logger)
            try engine.attach(try MovieWriter(path: file, logger: logger))
            try await engine.run()
            let statistics = engine.statistics()
            // The spinner's area as the content lays it out (DesktopScene: a 3x3 grid of squares).
            let side = max(24, height / 8), cell = side / 3
            // Cropped to even sides: ffmpeg crops I420 pictures to even sizes.
            let area = ReplayTesting.PixelRect(x: width * 3 / 4, y: height * 3 / 4, width: (side + 1) & ~1, height: (side + 1) & ~1)
            let frames = try await FrameDecoder.allFrames(in: file, crop: area)
            #expect(frames.count >= 60 && frames.count == statistics.framesWritten, "\(frames.count) pictures decoded, \(statistics)")
            var places = Set<Int>()
            for (index, frame) in frames.enumerated() {
                let colours = (0..<9).map { frame.pixel(x: ($0 % 3) * cell + cell / 2, y: ($0 / 3) * cell + cell / 2) }
                let lit = colours.indices.filter { colours[$0].isClose(to: Self.square, tolerance: 50) }
                let dark = colours.indices.filter { colours[$0].isClose(to: Self.background, tolerance: 50) }
                #expect(lit.count == 1 && dark.count == 8, "picture \(index): squares \(lit), background \(dark.count) of 9: \(colours)")
                places.formUnion(lit)
            }
            #expect(places.count == 8, "the square went round all eight places: \(places.sorted())")
        }
    }
}
