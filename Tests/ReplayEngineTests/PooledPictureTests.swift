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

    static let (width, height) = (640, 360)

    /// The desktop content at 640x360, and an engine ready to record it for `seconds` into `file`.
    private static func withDesktop(_ seconds: Double, into name: String, label: String,
                                    _ body: (TestEnvironment, RecordingEngine, String) async throws -> Void) async throws {
        let logger = Logger(label: label)
        let content = TestContent.Options(mode: .desktop, audio: false)
        try await TestEnvironment.with(TestEnvironment.Configuration(width: width, height: height, audio: .deadServer, content: content)) { environment in
            let file = environment.outputPath(name)
            let engine = try await RecordingEngine.prepare(
                configuration: EngineConfiguration(video: .screen(display: environment.xvfb.display), audio: [], durationSeconds: seconds),
                logger: logger)
            try engine.attach(try MovieWriter(path: file, logger: logger))
            try await body(environment, engine, file)
        }
    }

    @Test func everyPictureShowsTheSpinnersOneSquare() async throws {
        let (width, height) = (Self.width, Self.height)
        try await Self.withDesktop(6, into: "pooled.mp4", label: "test.pooled") { environment, engine, file in
            try await engine.run()
            let statistics = engine.statistics()
            // libx264's buffers in ordinary pages (RecordingEngine.openVideoEncoder): the kernel says so.
            let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
            #expect(status.contains("THP_enabled:\t0"), "transparent huge pages are off in the process that encodes")
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

    /// A scroll and a turn of the spinner damage two pieces far apart, which the capture reads as
    /// one box (half the screen) and counts as the pieces only: only they are converted and given
    /// to libx264 as changed. Nothing that changed may be left out: with the content stopped, the
    /// last recorded picture is the screen, every 16x16 block of the terminal and of the spinner
    /// (a block that missed a scroll shows other text; libx264's own loss stays under 10 on average).
    @Test func theLastPictureOfAScrollingTerminalIsTheScreen() async throws {
        let (width, height) = (Self.width, Self.height)
        try await Self.withDesktop(5, into: "pieces.mp4", label: "test.pieces") { environment, engine, file in
            let pid = try #require(environment.content?.pid)
            let recording = Task { try await engine.run() }
            try await Task.sleep(for: .seconds(3))
            kill(pid, SIGSTOP)
            defer { kill(pid, SIGCONT) }
            try await Task.sleep(for: .milliseconds(500))
            let screen = try await environment.xvfb.screenshot()
            try await recording.value
            let last = try #require(try await FrameDecoder.allFrames(in: file, crop: ReplayTesting.PixelRect(x: 0, y: 0, width: width, height: height)).last)
            // The terminal and the spinner as the content lays them out (DesktopScene), in whole blocks.
            let lineHeight = max(8, height / 45), lines = (height * 6 / 10) / lineHeight, side = max(24, height / 8)
            let areas = [ReplayTesting.PixelRect(x: width / 10, y: height / 8, width: width / 2, height: lines * lineHeight),
                         ReplayTesting.PixelRect(x: width * 3 / 4, y: height * 3 / 4, width: side, height: side)]
            var worst = (difference: 0.0, x: 0, y: 0)
            for area in areas {
                for top in stride(from: area.y / 16 * 16, to: area.y + area.height, by: 16) where top + 16 <= height {
                    for left in stride(from: area.x / 16 * 16, to: area.x + area.width, by: 16) where left + 16 <= width {
                        var sum = 0
                        for y in top..<top + 16 {
                            for x in left..<left + 16 {
                                let a = last.pixel(x: x, y: y), b = screen.pixel(x: x, y: y)
                                sum += abs(Int(a.r) - Int(b.r)) + abs(Int(a.g) - Int(b.g)) + abs(Int(a.b) - Int(b.b))
                            }
                        }
                        let difference = Double(sum) / (16 * 16 * 3)
                        if difference > worst.difference { worst = (difference, left, top) }
                    }
                }
            }
            #expect(worst.difference < 20, "the block at (\(worst.x), \(worst.y)) differs from the screen by \(worst.difference) on average")
        }
    }
}

