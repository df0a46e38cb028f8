/// How long a live stream waits before each new try after its connection broke: 0.5, 1, 2 s, then
/// 2 s for every further try, until one connects (`reset`). The cap is short because a viewer
/// should see the stream again within 3 s of the network coming back: with a cap of 4 s, a 5-s
/// cut is retried at 7.5 s, 2.5 s after the network returned. Pure value type.
public struct ReconnectBackoff: Sendable, Equatable {
    public let first: Duration
    public let cap: Duration
    /// Tries since the connection was last up.
    public private(set) var attempts = 0

    public init(first: Duration = .milliseconds(500), cap: Duration = .seconds(2)) {
        self.first = first
        self.cap = cap
    }

    /// The wait before the next try (and counts it).
    public mutating func nextDelay() -> Duration {
        var delay = first
        for _ in 0..<min(attempts, 30) where delay < cap { delay *= 2 }
        attempts += 1
        return min(delay, cap)
    }

    /// The connection is up again: the next break starts from `first`.
    public mutating func reset() { attempts = 0 }
}

/// The encoder's bitrate ceiling for a live stream, from how long packets wait in the send queue
/// (`ReconnectingStream.queueDelay`): packets that wait mean the link carries less than the
/// encoder makes. Pure value type: the caller samples the queue and applies what it returns.
///
/// - The queue delay above `congested` (0.5 s): the ceiling drops by a quarter, and at least to
///   nine tenths of what the video got through when the caller knows it (`sentKbps`: a ceiling
///   far above what the encoder makes changes nothing), at most once per `holdDown` (1.5 s, the
///   time a lower rate takes to show in the queue), never below `minimum`.
/// - The queue delay under `calm` (0.1 s) for `probeAfter` (10 s) without a break: the ceiling
///   rises by a tenth, again after each further `probeAfter` of calm, up to `maximum`.
public struct BitrateController: Sendable, Equatable {
    /// Kilobits a second.
    public let maximum: Int
    public let minimum: Int
    public private(set) var current: Int
    public var congested: Duration = .milliseconds(500)
    public var calm: Duration = .milliseconds(100)
    public var holdDown: Duration = .milliseconds(1500)
    public var probeAfter: Duration = .seconds(10)
    private var lastChange: Duration?
    private var calmSince: Duration?

    public init(maximum: Int, minimum: Int) {
        precondition(minimum > 0 && minimum <= maximum)
        self.maximum = maximum
        self.minimum = minimum
        current = maximum
    }

    /// A stream's starting ceiling for a picture size: 0.1 bit a pixel at the frame rate
    /// (1080p30: 6.2 Mb/s, 720p30: 2.8 Mb/s), between 1 and 8 Mb/s; the floor an eighth of it,
    /// at least 250 kb/s.
    public init(width: Int, height: Int, framesPerSecond: Int) {
        let maximum = min(8_000, max(1_000, width * height * framesPerSecond / 10_000))
        self.init(maximum: maximum, minimum: max(250, maximum / 8))
    }

    /// Takes the queue delay seen at `now` (any monotonic origin) and, if known, the video's share
    /// of what the link carried lately (kilobits a second); returns the new ceiling when it changes.
    public mutating func update(queueDelay: Duration, sentKbps: Int? = nil, at now: Duration) -> Int? {
        if queueDelay > congested {
            calmSince = nil
            guard current > minimum, lastChange.map({ now - $0 >= holdDown }) ?? true else { return nil }
            current = max(minimum, min(current * 3 / 4, sentKbps.map { $0 * 9 / 10 } ?? .max))
            lastChange = now
            return current
        }
        guard queueDelay < calm else {
            calmSince = nil
            return nil
        }
        guard let since = calmSince else {
            calmSince = now
            return nil
        }
        guard current < maximum, now - since >= probeAfter else { return nil }
        current = min(maximum, current + max(1, current / 10))
        lastChange = now
        calmSince = now
        return current
    }
}
