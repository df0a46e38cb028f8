import Testing
@testable import ReplayMedia

@Suite("Live stream policies: reconnect backoff, bitrate ceiling")
struct LiveStreamPoliciesTests {
    @Test("Tries again after 0.5, 1, 2 s, then every 2 s; a connection starts the count again")
    func backoff() {
        var backoff = ReconnectBackoff()
        let delays = (0..<6).map { _ in backoff.nextDelay() }
        #expect(delays == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2), .seconds(2)])
        #expect(backoff.attempts == 6)
        backoff.reset()
        #expect(backoff.nextDelay() == .milliseconds(500))
        var longer = ReconnectBackoff(first: .milliseconds(500), cap: .seconds(4))
        #expect((0..<5).map { _ in longer.nextDelay() } == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(4)])
    }

    @Test("The starting ceiling follows the picture size, within 1 to 8 Mb/s")
    func ceilingForSize() {
        #expect(BitrateController(width: 1920, height: 1080, framesPerSecond: 30).current == 6220)
        #expect(BitrateController(width: 1280, height: 720, framesPerSecond: 30).maximum == 2764)
        #expect(BitrateController(width: 640, height: 480, framesPerSecond: 30).maximum == 1000)
        #expect(BitrateController(width: 3840, height: 2160, framesPerSecond: 60).maximum == 8000)
        #expect(BitrateController(width: 640, height: 480, framesPerSecond: 30).minimum == 250)
    }

    /// Queue delays (ms, one every 250 ms) shaped like a link slower than the stream for a few
    /// seconds (the queue grows, then shrinks as the ceiling comes down), then a free link.
    static let slowThenFree: [Int] = [0, 40, 180, 420, 650, 880, 1050, 1200, 1300, 1310, 1250, 1150, 1020, 880, 720, 560,
                                      420, 300, 190, 110, 60, 20, 0, 0] + Array(repeating: 0, count: 120)

    @Test("A backing-up queue lowers the ceiling step by step, never faster than the hold-down; a calm link raises it again")
    func adaptsToTheQueue() {
        var controller = BitrateController(maximum: 1000, minimum: 250)
        var changes: [(at: Double, kbps: Int)] = []
        for (index, delay) in Self.slowThenFree.enumerated() {
            let now = Duration.milliseconds(250 * index)
            if let ceiling = controller.update(queueDelay: .milliseconds(delay), at: now) {
                changes.append((now / .seconds(1), ceiling))
            }
        }
        let lowered = changes.filter { $0.at < 6 }
        // Congested from 1 s (650 ms) to 3.75 s (560 ms): a step at 1 s, 2.5 s, then none (3.75 s < 4 s).
        #expect(lowered.map(\.kbps) == [750, 562], "\(changes)")
        #expect(zip(lowered, lowered.dropFirst()).allSatisfy { $1.at - $0.at >= 1.5 })
        // Calm (< 100 ms) from 5 s: a tenth more every 10 s, back towards the maximum.
        let raised = changes.filter { $0.at >= 6 }
        #expect(raised.map(\.kbps) == [618, 679, 746], "\(changes)")
        #expect(raised.first.map { $0.at >= 15 } == true)
        #expect(controller.current <= controller.maximum)
    }

    @Test("Congested, the ceiling drops at once to just under what the video got through, when that is lower")
    func dropsToWhatGotThrough() {
        var controller = BitrateController(maximum: 6000, minimum: 750)
        #expect(controller.update(queueDelay: .milliseconds(800), sentKbps: 2000, at: .seconds(1)) == 1800)
        #expect(controller.update(queueDelay: .milliseconds(800), sentKbps: 1900, at: .seconds(2)) == nil, "held down")
        #expect(controller.update(queueDelay: .milliseconds(800), sentKbps: 1900, at: .seconds(3)) == 1350, "a quarter less")
        #expect(controller.update(queueDelay: .milliseconds(800), sentKbps: 100, at: .seconds(5)) == 750, "not below the minimum")
    }

    @Test("Never below the minimum, never above the maximum")
    func bounds() {
        var controller = BitrateController(maximum: 1000, minimum: 250)
        for step in 0..<100 { _ = controller.update(queueDelay: .seconds(2), at: .seconds(2 * step)) }
        #expect(controller.current == 250)
        for step in 0..<1000 { _ = controller.update(queueDelay: .zero, at: .seconds(200 + step)) }
        #expect(controller.current == 1000)
        // Neither congested nor calm: nothing moves.
        var steady = BitrateController(maximum: 1000, minimum: 250)
        for step in 0..<100 { #expect(steady.update(queueDelay: .milliseconds(300), at: .seconds(step)) == nil) }
    }
}
