/// Where a recording's picture ends: the rule of its last frame tick.
///
/// The last tick is the one at which the stop is seen (`replay stop`, Ctrl-C, the indicator's click,
/// a write error), or the last tick of `--duration`. A picture goes out at that tick even on a still
/// screen (the last change, held until then), and the recording ends a tick later, when that picture
/// ends: the movie's video, its sound (cut at the same time) and the elapsed time `replay status`
/// reports all agree. Before, a still screen's last picture was the latest once-a-second repeat, up to
/// a second before the stop, lasting one tick.
package struct RecordingEnd: Sendable, Equatable {
    /// The ticks of `--duration` (at least one), or nil.
    package let frameLimit: Int64?

    package init(durationSeconds: Double?, framesPerSecond: Int64) {
        frameLimit = durationSeconds.map { max(1, Int64(($0 * Double(framesPerSecond)).rounded())) }
    }

    /// Whether tick `index` is the recording's last.
    package func isLast(_ index: Int64, stopping: Bool) -> Bool {
        if stopping { return true }
        guard let frameLimit else { return false }
        return index >= frameLimit - 1
    }

    /// The tick to capture after falling `missed` ticks behind at `index`: never past the last of
    /// `--duration`, whose picture must still go out.
    package func skip(from index: Int64, missed: Int64) -> Int64 {
        guard let frameLimit else { return index + missed }
        return max(index, min(index + missed, frameLimit - 1))
    }

    /// The recording's end, in ticks, when its last tick was `index`.
    package func end(lastTick index: Int64) -> Int64 { index + 1 }
}
