// CoreMedia's host time clock: CLOCK_MONOTONIC in nanoseconds, the clock the samples' presentation
// times are on, so `CMClockGetTime(CMClockGetHostTimeClock()) - pts` is a sample's age, as on iOS.
#if canImport(Glibc)
import Glibc
#endif

/// A clock; here only the host time clock.
public final class CMClock: Sendable {
    private init() {}

    /// The iOS overlay's `CMClock.hostTimeClock`.
    public static let hostTimeClock = CMClock()

    /// Now on this clock (nanoseconds, timescale 1 000 000 000).
    public var time: CMTime {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return CMTime(value: Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec), timescale: 1_000_000_000)
    }
}

public func CMClockGetHostTimeClock() -> CMClock { .hostTimeClock }
public func CMClockGetTime(_ clock: CMClock) -> CMTime { clock.time }
