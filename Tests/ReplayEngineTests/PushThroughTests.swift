import Testing
@testable import ReplayEngine

/// When the capture pushes a change through libx264's look-ahead (30 fps: settle 7 ticks, spacing 20).
@Suite("Pushing a change through the encoder's look-ahead")
struct PushThroughTests {
    /// Runs ticks `range`; like libx264, the encoder gives a frame back once `delay` more frames were
    /// sent after it. Returns the ticks at which a repeat went out.
    static func run(_ push: inout PushThrough, ticks range: Range<Int64>, changes: Set<Int64>, delay: Int64 = 5) -> [Int64] {
        simulate(&push, ticks: range, changes: changes, delay: delay).repeats
    }

    /// Also returns, for each change, the tick at which the encoder gave it back (nil: never).
    static func simulate(_ push: inout PushThrough, ticks range: Range<Int64>, changes: Set<Int64>, delay: Int64 = 5)
        -> (repeats: [Int64], encodedAt: [Int64: Int64])
    {
        var lastChange: Int64 = -1
        var sent: [Int64] = []
        var repeats: [Int64] = []
        var encodedAt: [Int64: Int64] = [:]
        for index in range {
            if changes.contains(index) { lastChange = index }
            let encodedThrough = sent.count > delay ? sent[sent.count - 1 - Int(delay)] : -1
            for change in changes where change <= encodedThrough && encodedAt[change] == nil { encodedAt[change] = index }
            let repeating = push.repeatNow(at: index, lastChange: lastChange, encodedThrough: encodedThrough)
            if repeating { repeats.append(index) }
            if repeating || changes.contains(index) { sent.append(index) }
        }
        return (repeats, encodedAt)
    }

    @Test func aLastChangeIsPushedOnceTheScreenIsStill() {
        var push = PushThrough(framesPerSecond: 30)
        let repeats = Self.run(&push, ticks: 0..<120, changes: [10])
        // Still for 7 ticks after the change, then 5 repeats: the change comes back after the fifth.
        #expect(repeats.first == 17)
        #expect(repeats.last == 21)
        #expect(repeats.count == 5)
    }

    @Test func continuousMotionNeedsNoPush() {
        var push = PushThrough(framesPerSecond: 30)
        #expect(Self.run(&push, ticks: 0..<300, changes: Set(0..<300)).isEmpty)
    }

    @Test func aBlinkingCursorPaysForOnePushASecond() {
        var push = PushThrough(framesPerSecond: 30)
        let blinks = Set(stride(from: Int64(0), to: 900, by: 15))  // twice a second for 30 s
        let repeats = Self.run(&push, ticks: 0..<900, changes: blinks)
        let starts = repeats.enumerated().filter { $0.offset == 0 || repeats[$0.offset - 1] != $0.element - 1 }.map(\.element)
        #expect(starts.count <= 45, "push starts: \(starts)")
        #expect(zip(starts, starts.dropFirst()).allSatisfy { $1 - $0 >= 20 }, "\(starts)")
        #expect(repeats.count <= 45 * 5, "\(repeats.count) repeats in 900 ticks")
    }

    @Test func aChangeAfterAPushWaitsAtMostTheSpacing() {
        var push = PushThrough(framesPerSecond: 30)
        // A change at 0 is pushed at 7 (repeats 7 to 11); a second change at 12 would be due at 19,
        // but the next push may start only at 27.
        let repeats = Self.run(&push, ticks: 0..<60, changes: [0, 12])
        #expect(repeats.contains(7))
        #expect(!repeats.contains { (12...26).contains($0) })
        #expect(repeats.contains(27))
    }

    @Test("Wherever a second change falls after the first, the encoder gives it back within 0.8 s",
          arguments: [Int64](1...40))
    func everyChangeIsOutWithinTheSecond(offset: Int64) {
        var push = PushThrough(framesPerSecond: 30)
        let (_, encodedAt) = Self.simulate(&push, ticks: 0..<120, changes: [10, 10 + offset])
        let second = 10 + offset
        guard let out = encodedAt[second] else {
            Issue.record("the change at \(second) is never given back")
            return
        }
        #expect(out - second <= 24, "the change at \(second) is given back at \(out)")
    }
}
