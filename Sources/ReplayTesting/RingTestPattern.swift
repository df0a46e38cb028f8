/// The pictures and sound `replay-ring write` puts through a frame ring, computed alike on both
/// sides so that a reader can check every byte and every sample it gets. The writer paints the
/// capture's canvas (`luma`, `cb`, `cr`: I420 as the encoder takes it, video range); the ring delivers
/// them stretched to full range (`deliveredLuma`, …), as ReplayKit's '420f' pictures carry.
public enum RingTestPattern {
    /// What the app reads for the canvas's luma at (x, y) of picture `n`: full range.
    public static func deliveredLuma(x: Int, y: Int, frame n: Int) -> UInt8 { fullRangeLuma[Int(luma(x: x, y: y, frame: n))] }
    public static func deliveredCb(x: Int, y: Int, frame n: Int) -> UInt8 { fullRangeChroma[Int(cb(x: x, y: y, frame: n))] }
    public static func deliveredCr(x: Int, y: Int, frame n: Int) -> UInt8 { fullRangeChroma[Int(cr(x: x, y: y, frame: n))] }

    /// Video-range levels to full range (Y 16…235 → 0…255, C 16…240 → 0…255 about 128), rounded and clamped.
    public static let fullRangeLuma: [UInt8] = (0..<256).map { UInt8(max(0, min(255, ((Double($0) - 16) * 255 / 219).rounded()))) }
    public static let fullRangeChroma: [UInt8] = (0..<256).map { UInt8(max(0, min(255, ((Double($0) - 128) * 255 / 224 + 128).rounded()))) }

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
