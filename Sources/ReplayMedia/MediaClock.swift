#if canImport(Glibc)
import Glibc
#endif

/// The one media clock: nanoseconds on `CLOCK_MONOTONIC`. Video frames and audio samples are
/// stamped against it, so the offset between the tracks is what the sources had, not what the
/// encoders took.
package enum MonotonicClock {
    package static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Sleeps the calling (dedicated) thread until `deadline` on the same clock.
    package static func sleep(until deadline: Int64) {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }
}

/// A rational media time, CMTime's role: `value / timescale` seconds.
public struct MediaTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var value: Int64
    public var timescale: Int32

    public init(value: Int64, timescale: Int32) {
        precondition(timescale > 0, "a media time needs a positive timescale")
        self.value = value
        self.timescale = timescale
    }

    public init(nanoseconds: Int64, timescale: Int32) {
        self.init(value: Self.rescale(nanoseconds, from: 1_000_000_000, to: Int64(timescale)), timescale: timescale)
    }

    public static let zero = MediaTime(value: 0, timescale: 1)

    public var seconds: Double { Double(value) / Double(timescale) }

    /// The same instant in another timescale, rounded to the nearest tick.
    public func converted(to timescale: Int32) -> MediaTime {
        MediaTime(value: Self.rescale(value, from: Int64(self.timescale), to: Int64(timescale)), timescale: timescale)
    }

    public static func < (lhs: MediaTime, rhs: MediaTime) -> Bool {
        lhs.value.multipliedFullWidth(by: Int64(rhs.timescale)) < rhs.value.multipliedFullWidth(by: Int64(lhs.timescale))
    }

    public static func == (lhs: MediaTime, rhs: MediaTime) -> Bool {
        lhs.value.multipliedFullWidth(by: Int64(rhs.timescale)) == rhs.value.multipliedFullWidth(by: Int64(lhs.timescale))
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(seconds)
    }

    public var description: String { "\(value)/\(timescale)" }

    /// `value * to / from`, rounded to nearest, without overflow for media ranges.
    static func rescale(_ value: Int64, from: Int64, to: Int64) -> Int64 {
        let product = value.multipliedFullWidth(by: to)
        let (q, r) = from.dividingFullWidth(product)
        if r.magnitude * 2 >= from.magnitude { return value >= 0 ? q + 1 : q - 1 }
        return q
    }
}
