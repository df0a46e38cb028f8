import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The monotonic clock both the frames and the tones are timed on.
enum MonotonicClock {
    static func nowNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Sleeps until an absolute time; returns early when a signal arrives.
    static func sleep(untilNanoseconds deadline: UInt64) {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        _ = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil)
    }
}

/// Set by SIGTERM and SIGINT; every loop checks it.
let stopRequestedFlag = Atomic<Bool>(false)

enum StopSignal {
    static var requested: Bool { stopRequestedFlag.load(ordering: .relaxed) }

    static func install() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in stopRequestedFlag.store(true, ordering: .relaxed) }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0  // no SA_RESTART: a sleeping clock_nanosleep returns at once
        sigaction(SIGTERM, &action, nil)
        sigaction(SIGINT, &action, nil)
    }
}
