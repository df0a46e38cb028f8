/// How soon the capture may take a picture when nothing encodes on a frame clock (an app's own
/// samples, a system broadcast's frame ring): as soon as the screen is drawn, at most `fps` pictures
/// a second on average.
///
/// A cell-rate limit: each picture sent makes the next one `due` a frame after the later of its own
/// time and its due time, and a picture may go up to half a frame before it is due. Spacing each
/// picture a whole frame after the last one sent instead made the capture trail a client that draws
/// at the same rate by the latest it had ever drawn: one drawing 20 ms late held every later picture
/// back 20 ms for the rest of the run. With the slack a late drawing delays later ones only by what
/// it was later than half a frame. A look that found nothing changed (a repaint of the same pixels) is
/// followed by the next half a frame later at the earliest.
struct PictureSpacing {
    let interval: Int64
    private var due: Int64?

    init(framesPerSecond fps: Int64) {
        interval = 1_000_000_000 / fps
    }

    /// The earliest time of the next look, after one at `previous` (nanoseconds).
    func earliest(after previous: Int64) -> Int64 {
        max(previous + interval / 2, (due ?? previous + interval) - interval / 2)
    }

    /// A picture went out at `time`.
    mutating func sent(at time: Int64) {
        due = max(due ?? time, time) + interval
    }
}
