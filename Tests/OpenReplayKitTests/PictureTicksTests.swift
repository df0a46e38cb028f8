import ExtensionStreaming
import Testing

/// The upload extensions' picture times: every picture replayd's capture sends goes out, on the
/// nearest tick of the stream's frame rate or one tick later, never silently dropped.
@Suite("PictureTicks: a broadcast's pictures on the stream's frame clock")
struct PictureTicksTests {
    /// replayd's frame clock: picture n at n/fps exactly, in whole nanoseconds (`start + n * 1e9 / fps`).
    private func captureTime(_ n: Int64, fps: Int64 = 30) -> Int64 { n * 1_000_000_000 / fps }

    @Test("a screen that changes before every tick: every picture on its own tick")
    func picturesOnTheCaptureClock() {
        var ticks = PictureTicks(framesPerSecond: 30)
        // Rounded down, pictures 1, 4, 7 … fell on the tick before theirs (33,333,333 ns × 30 is
        // just under a second) and were dropped: a third of a moving screen.
        let got = (0..<300).map { ticks.tick(elapsed: captureTime($0)) }
        #expect(got == (0..<300).map { Optional($0) })
        #expect(ticks.moved == 0 && ticks.replaced == 0)
    }

    @Test("pictures taken when the screen is drawn, anywhere within a tick")
    func picturesBetweenTicks() {
        var ticks = PictureTicks(framesPerSecond: 30)
        // A drawing at a steady phase of 29 ms into each tick, taken 0–3 ms after it.
        var got: [Int64?] = []
        for n in Int64(0)..<90 {
            got.append(ticks.tick(elapsed: captureTime(n) + 29_000_000 + (n % 4) * 1_000_000))
        }
        let sent = got.compactMap { $0 }
        #expect(sent.count == 90)
        #expect(Set(sent).count == 90, "no two pictures on one tick")
        #expect(zip(sent, sent.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test("pictures at the half tick, a little earlier or later each time: each on its own tick, none late")
    func picturesAtTheHalfTick() {
        var ticks = PictureTicks(framesPerSecond: 30)
        // A screen drawn at 30 fps half a tick after the stream's ticks, taken up to 4 ms early or
        // late. Rounded plainly, one picture went up and the next down onto the same tick, and from
        // there every picture was one tick late.
        let jitter: [Int64] = [3, -4, 1, -2, 4, 0, -3, 2]
        let got = (Int64(0)..<300).map { n in
            ticks.tick(elapsed: captureTime(n) + 16_666_667 + jitter[Int(n) % jitter.count] * 1_000_000)
        }
        let sent = got.compactMap { $0 }
        #expect(sent.count == 300)
        #expect(ticks.moved == 0 && ticks.replaced == 0, "moved \(ticks.moved), replaced \(ticks.replaced)")
        #expect(zip(sent, sent.dropFirst()).allSatisfy { $1 == $0 + 1 }, "one picture a tick")
        // All on the same side of the half tick (here the tick after: the first picture fell after
        // the half tick), none more than 21 ms from its time.
        for (n, tick) in sent.enumerated() {
            let late = tick * 1_000_000_000 / 30 - (captureTime(Int64(n)) + 16_666_667 + jitter[n % jitter.count] * 1_000_000)
            #expect(late >= 12_000_000 && late <= 21_000_000, "picture \(n): \(late) ns")
        }
    }

    @Test("a phase that drifts round the tick: the pictures follow it, none replaced")
    func driftingPhase() {
        var ticks = PictureTicks(framesPerSecond: 30)
        // A screen drawn at 29.9 fps: its phase goes once round the tick in 10 s.
        let got = (Int64(0)..<600).map { ticks.tick(elapsed: $0 * 1_000_000_000 * 10 / 299 + 5_000_000) }
        let sent = got.compactMap { $0 }
        #expect(sent.count == 600 && ticks.replaced == 0)
        #expect(zip(sent, sent.dropFirst()).allSatisfy { $0 < $1 })
        for (n, tick) in sent.enumerated() {
            let off = tick * 1_000_000_000 / 30 - (Int64(n) * 1_000_000_000 * 10 / 299 + 5_000_000)
            #expect(abs(off) <= 1_000_000_000 / 30, "picture \(n) \(off) ns from its tick")
        }
    }

    @Test("two pictures within a tick both go out; a third is replaced by the next picture")
    func crowdedTick() {
        var ticks = PictureTicks(framesPerSecond: 30)
        #expect(ticks.tick(elapsed: 0) == 0)
        #expect(ticks.tick(elapsed: 40_000_000) == 1)   // nearest 1
        #expect(ticks.tick(elapsed: 45_000_000) == 2)   // nearest 1, taken: one tick later
        #expect(ticks.tick(elapsed: 47_000_000) == nil) // nearest 1, and 3 would be two ticks late
        #expect(ticks.tick(elapsed: 100_000_000) == 3)
        #expect(ticks.moved == 1 && ticks.replaced == 1)
        #expect(ticks.tick(elapsed: -1) == nil, "a picture from before the stream's first")
    }
}
