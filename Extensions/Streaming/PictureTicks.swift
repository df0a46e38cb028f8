/// The stream's picture times, in ticks of its frame rate (the encoder's time base is 1/fps).
///
/// A broadcast's pictures do not come on a frame clock: replayd's capture takes a picture when the
/// screen is drawn, and at most `fps` a second, so its times fall anywhere within a tick, or exactly
/// on one (a screen that changes before every tick is taken at the tick). Each picture goes on the
/// *nearest* tick; one that lands on the tick of the picture before it goes on the next tick, at most
/// one tick later than its own time, so that pictures a little under a frame apart both go out
/// (rounded down, as before, two pictures a frame apart fell on one tick whenever their times
/// were whole ticks: every third picture of a moving screen was dropped, silently, and the service,
/// seeing uneven steps, held each picture for its successor: 22 pictures a second, ~60 ms later).
/// Only a picture that would be more than a tick early is not encoded (`replaced`): the held
/// picture is overwritten by the next one, which shows what it showed and more.
///
/// "Nearest" rounds at the half tick *opposite the pictures' phase*: a screen drawn at its own
/// 30 fps is taken at a phase of its own within the tick, a little earlier or later each time. At
/// a phase near the half tick, plain rounding sent one picture up and the next down onto the same
/// tick (`PictureTicksTests`: 126 of 300 pictures a tick late with ±4 ms). So the phase is followed (an
/// average of where in the tick the pictures fall) and the rounding's edge kept half a tick away
/// from it; for pictures at a steady phase that is the nearest tick, with half a tick of jitter
/// allowed either way. A phase that drifts (a screen drawn at 29.97 fps) moves the pictures from the
/// tick after them to the one before once, where the phase passes 0.4 of a tick.
///
/// A picture taken more than half a tick late (a busy machine) still takes its successor's tick,
/// and while the screen is drawn at the stream's rate every later picture then goes one tick late
/// (`moved` counts them), until a drawing is missed: the video a frame behind its sound, rather than
/// a picture thrown away.
package struct PictureTicks: Sendable {
    package let framesPerSecond: Int64
    /// The tick of the last picture that went out.
    package private(set) var last: Int64?
    /// Pictures that went out one tick later than their own time.
    package private(set) var moved = 0
    /// Pictures not encoded: a third picture within a tick.
    package private(set) var replaced = 0

    /// Where in the tick the pictures fall, in nanoseconds of `elapsed × fps` (0 ..< 1e9): an
    /// average, each picture moving it a sixteenth of the way to its own.
    private var phase: Int64?
    /// Whether pictures at the phase go on the tick after them (else the one before).
    private var after = false

    package init(framesPerSecond: Int64) {
        self.framesPerSecond = framesPerSecond
    }

    /// The tick of a picture taken `elapsed` nanoseconds after the stream's first, or nil when it is
    /// not to be encoded (earlier than the first, or more than a tick early).
    package mutating func tick(elapsed: Int64) -> Int64? {
        guard elapsed >= 0 else { return nil }
        let scaled = elapsed * framesPerSecond   // in ticks × 1e9
        let own = scaled % 1_000_000_000
        let phase: Int64
        if let average = self.phase {
            // The way round the tick (a circle) that is shorter.
            var step = own - average
            if step >= 500_000_000 { step -= 1_000_000_000 } else if step < -500_000_000 { step += 1_000_000_000 }
            phase = (average + step / 16 + 1_000_000_000) % 1_000_000_000
        } else {
            phase = own
            after = own >= 500_000_000
        }
        self.phase = phase
        // Rounded at half a tick from the phase; then the tick before or after a picture at the phase,
        // whichever is nearer, with some hysteresis around the half tick (where both are as near).
        if phase > 600_000_000 { after = true } else if phase < 400_000_000 { after = false }
        // Never below -0.5e9 (`scaled` ≥ 0, `phase` < 1e9): rounded down, that is tick -1.
        let shifted = scaled - phase + 500_000_000
        let nearest = (shifted < 0 ? -1 : shifted / 1_000_000_000) + (after ? 1 : 0)
        let tick: Int64
        switch last {
        case nil:
            tick = nearest
        case let previous? where nearest > previous:
            tick = nearest
        case let previous? where nearest == previous:
            // Its own tick is taken: the next, one tick late.
            moved += 1
            tick = nearest + 1
        default:
            // The next free tick would be two or more late.
            replaced += 1
            return nil
        }
        last = tick
        return tick
    }
}
