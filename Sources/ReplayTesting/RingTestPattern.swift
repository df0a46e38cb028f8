/// The pictures and sound `replay-ring write` puts through a frame ring, computed alike on both
/// sides so that a reader can check every byte and every sample it gets.
public enum RingTestPattern {
    /// Luma at (x, y) of picture `n`.
    public static func luma(x: Int, y: Int, frame n: Int) -> UInt8 { UInt8(truncatingIfNeeded: x + 2 * y + 3 * n) }
    /// Cb and Cr of the chroma sample (x, y) (one per 2×2 pixels) of picture `n`.
    public static func cb(x: Int, y: Int, frame n: Int) -> UInt8 { UInt8(truncatingIfNeeded: 3 * x + y + 5 * n + 17) }
    public static func cr(x: Int, y: Int, frame n: Int) -> UInt8 { UInt8(truncatingIfNeeded: x + 5 * y + 7 * n + 101) }

    /// Sample `channel` of frame `index` (counted from the start) of the app's sound (`microphone`
    /// false) or the microphone's.
    public static func sample(_ index: Int, channel: Int, microphone: Bool) -> Float {
        microphone ? Float((index * 11 + channel * 5) % 3000) / 3000 - 0.5
                   : Float((index * 7 + channel * 3) % 2000) / 2000 - 0.5
    }

    /// Nanoseconds between pictures on the test's timeline (30 fps).
    public static let frameInterval: Int64 = 33_333_333

    /// The presentation time of audio frame `index` when the sound starts at `start`.
    public static func audioTime(start: Int64, frame index: Int) -> Int64 { start + Int64(index) * 1_000_000_000 / 48_000 }
}
