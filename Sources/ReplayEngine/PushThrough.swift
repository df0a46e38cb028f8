/// When to push the latest change through libx264's look-ahead with repeats at the full rate.
///
/// x264 gives a picture back only some frames later (its look-ahead and frame threads: about five).
/// While the screen changes every tick that is a sixth of a second; on a still screen no frames
/// follow, and the last change would wait in the encoder (lost to a crash) until more changes came.
/// So once the screen has been still for `settle` (a quarter of a second) after a change, repeats go
/// out until the encoder has given that change back. A repeat costs libx264 several milliseconds at
/// 1080p, so a push starts at most once per `spacing` (two thirds of a second): a cursor that blinks
/// twice a second pays for three pushes in two seconds. At worst a change comes just after a push
/// began and waits for the next: `spacing` plus the encoder's delay, 0.8 s at 30 fps, so it is on
/// disk within the second that `kill -9` may cost.
struct PushThrough {
    let settle: Int64
    let spacing: Int64
    private var target: Int64 = -1     // the change being pushed through, or -1
    private var lastStart = Int64.min / 2

    init(framesPerSecond fps: Int64) {
        settle = max(1, fps / 4)
        spacing = max(settle, fps * 2 / 3)
    }

    /// At tick `index`: whether to send a repeat, given the tick of the latest change and the latest
    /// tick the encoder gave back.
    mutating func repeatNow(at index: Int64, lastChange: Int64, encodedThrough: Int64) -> Bool {
        if target >= 0 {
            if encodedThrough < target { return true }
            target = -1
        }
        guard lastChange > encodedThrough, index - lastChange >= settle, index - lastStart >= spacing else { return false }
        target = lastChange
        lastStart = index
        return true
    }
}
