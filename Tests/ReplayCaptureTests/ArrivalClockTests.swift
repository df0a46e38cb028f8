import Testing
import ReplayCapture

/// `ArrivalClock` places a sound source on the media clock from when its chunks arrive; these feed
/// it the read timings real sources produce (times in nanoseconds, 10 ms chunks at 48 kHz).
@Suite struct ArrivalClockTests {
    let chunk: Int64 = 480
    let chunkNanoseconds: Int64 = 10_000_000

    @Test func aSteadySourceIsAnchoredWhereItsFirstChunkBegan() {
        var clock = ArrivalClock(sampleRate: 48_000)
        let t0: Int64 = 5_000_000_000
        // Each read waits about 9.5 ms for the next chunk, which arrives as it ends.
        for k in Int64(0)..<100 {
            let end = t0 + (k + 1) * chunkNanoseconds
            #expect(clock.chunkArrived(frames: chunk, readStarted: end - 9_500_000, readEnded: end) == nil)
        }
        #expect(clock.anchor == t0)
    }

    @Test func aBurstySourceIsAnchoredOnTheFreshestChunkNotTheStaleHead() throws {
        // PulseAudio's sine source: every 2 s, 2 s of samples at once. The first read waits for the
        // burst and returns its oldest chunk; the rest come at once; then the next read waits again.
        var clock = ArrivalClock(sampleRate: 48_000)
        let burstArrives: Int64 = 10_000_000_000   // the burst holds the 2 s before this moment
        #expect(clock.chunkArrived(frames: chunk, readStarted: burstArrives - 2_000_000_000, readEnded: burstArrives) == nil)
        #expect(clock.anchor == nil, "the head of a burst anchors nothing")
        var time = burstArrives
        for _ in 1..<200 {
            time += 5_000   // a backlog drains in microseconds
            _ = clock.chunkArrived(frames: chunk, readStarted: time - 5_000, readEnded: time)
        }
        #expect(clock.anchor == nil, "draining a backlog tells nothing either")
        _ = clock.chunkArrived(frames: chunk, readStarted: time, readEnded: burstArrives + 2_000_000_000)
        let anchor = try #require(clock.anchor)
        // True start: 2 s before the burst arrived. Within the backlog's drain time.
        #expect(abs(anchor - (burstArrives - 2_000_000_000)) < 2_000_000, "anchor off by \((anchor - (burstArrives - 2_000_000_000)) / 1_000) µs")
    }

    @Test func aFastCrystalIsFollowedOnceTheDriftPassesTwentyMilliseconds() throws {
        // The card delivers 48 kHz by its own crystal, 0.2 % fast: 480 samples every 9.98 ms.
        var clock = ArrivalClock(sampleRate: 48_000)
        let t0: Int64 = 1_000_000_000
        let period: Int64 = 9_980_000
        var corrections: [Int64] = []
        for k in Int64(0)..<3_000 {   // 30 s of sound
            let end = t0 + (k + 1) * period
            if let shift = clock.chunkArrived(frames: chunk, readStarted: end - 9_000_000, readEnded: end) {
                corrections.append(shift)
            }
        }
        #expect(!corrections.isEmpty, "30 s at 0.2 % is 60 ms of drift: it must be corrected")
        #expect(corrections.allSatisfy { $0 < 0 }, "a fast crystal moves the anchor earlier: \(corrections)")
        // After the corrections, the last chunk's counted end is within the tolerance of when it arrived.
        let anchor = try #require(clock.anchor)
        let countedEnd = anchor + 3_000 * chunk * 1_000_000_000 / 48_000
        let arrived = t0 + 3_000 * period
        #expect(abs(countedEnd - arrived) <= ArrivalClock.driftTolerance + 3 * 1_000_000 * 2,
                "counted end \(countedEnd) vs arrival \(arrived)")
    }
}
