import Testing
@testable import ReplayEngine

/// How soon the capture for a frame ring takes a picture after the screen is drawn (30 fps: a frame
/// is 33.3 ms, the slack half of it).
@Suite("Spacing the pictures of a capture without an encoder")
struct PictureSpacingTests {
    static let ms: Int64 = 1_000_000

    /// The capture loop's part: each look waits for the earliest time the spacing allows, or for the
    /// next drawing; a picture shows the newest drawing by then (drawings in between are not seen).
    /// Returns each picture's (drawing, time taken).
    static func capture(_ drawings: [Int64], fps: Int64 = 30) -> [(drawn: Int64, taken: Int64)] {
        var spacing = PictureSpacing(framesPerSecond: fps)
        var pictures: [(drawn: Int64, taken: Int64)] = []
        var previous: Int64?
        var next = 0
        while next < drawings.count {
            let look = max(previous.map { spacing.earliest(after: $0) } ?? drawings[next], drawings[next])
            var shown = next
            while shown + 1 < drawings.count, drawings[shown + 1] <= look { shown += 1 }
            pictures.append((drawings[shown], look))
            spacing.sent(at: look)
            previous = look
            next = shown + 1
        }
        return pictures
    }

    /// A client drawing at 30 fps, at `phase`, with some drawings late.
    static func drawings(count: Int, phase: Int64 = 5 * ms, late: [Int: Int64]) -> [Int64] {
        (0..<count).map { $0 == 0 ? phase : phase + Int64($0) * 1_000_000_000 / 30 + (late[$0] ?? 0) }
    }

    @Test func aLateDrawingDoesNotDelayTheOnesAfterIt() {
        let pictures = Self.capture(Self.drawings(count: 300, late: [10: 12 * Self.ms, 100: 16 * Self.ms]))
        #expect(pictures.count == 300, "every drawing is a picture")
        // Each picture is taken when its drawing is done, the late ones included.
        for (index, picture) in pictures.enumerated() {
            #expect(picture.taken == picture.drawn, "picture \(index) taken \(picture.taken - picture.drawn) ns after it was drawn")
        }
    }

    @Test func aDrawingLaterThanHalfAFrameDelaysTheNextOnlyByTheRest() {
        let pictures = Self.capture(Self.drawings(count: 60, late: [10: 25 * Self.ms]))
        #expect(pictures.count == 60)
        // 25 ms late, the slack is 16.7 ms: the pictures after it trail their drawing by 8.3 ms at most.
        let trails = pictures.map { $0.taken - $0.drawn }
        #expect(trails[..<10].allSatisfy { $0 == 0 })
        #expect(trails[10] == 0)
        #expect(trails[11...].allSatisfy { $0 <= 8_400_000 }, "\(trails[11...].max() ?? 0) ns")
        #expect(trails[11] > 0, "the slack is half a frame, not more")
    }

    @Test func aClientDrawingFasterGetsAtMostTheRate() {
        // 120 drawings a second for 3 s: at most 30 pictures a second, one more for the slack.
        let drawings = (0..<360).map { Int64($0) * 1_000_000_000 / 120 }
        let pictures = Self.capture(drawings)
        for start in stride(from: Int64(0), to: 2_000_000_000, by: 100_000_000) {
            let inSecond = pictures.filter { $0.taken >= start && $0.taken < start + 1_000_000_000 }.count
            #expect(inSecond <= 31, "\(inSecond) pictures in the second from \(start / Self.ms) ms")
        }
        #expect(pictures.count >= 89, "\(pictures.count) pictures in 3 s")
        // No two pictures closer than half a frame.
        for (a, b) in zip(pictures, pictures.dropFirst()) { #expect(b.taken - a.taken >= 1_000_000_000 / 60) }
    }
}
