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
package struct PictureTicks: Sendable {
    package let framesPerSecond: Int64
    /// The tick of the last picture that went out.
    package private(set) var last: Int64?
    /// Pictures that went out one tick later than their own time.
    package private(set) var moved = 0
    /// Pictures not encoded: a third picture within a tick.
    package private(set) var replaced = 0

    package init(framesPerSecond: Int64) {
        self.framesPerSecond = framesPerSecond
    }

    /// The tick of a picture taken `elapsed` nanoseconds after the stream's first, or nil when it is
    /// not to be encoded (earlier than the first, or more than a tick early).
    package mutating func tick(elapsed: Int64) -> Int64? {
        guard elapsed >= 0 else { return nil }
        let nearest = (elapsed * framesPerSecond + 500_000_000) / 1_000_000_000
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
