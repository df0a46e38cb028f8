// CoreMedia's CMTime, as iOS code uses it: a rational time, `value / timescale` seconds, with flags
// for invalid, infinite and indefinite times. Sample buffers from in-app capture carry their time on
// the session clock (replayd's CLOCK_MONOTONIC) in nanoseconds: timescale 1_000_000_000.

public typealias CMTimeValue = Int64
public typealias CMTimeScale = Int32
public typealias CMTimeEpoch = Int64

public struct CMTimeFlags: OptionSet, Sendable, Hashable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let valid = CMTimeFlags(rawValue: 1 << 0)
    public static let hasBeenRounded = CMTimeFlags(rawValue: 1 << 1)
    public static let positiveInfinity = CMTimeFlags(rawValue: 1 << 2)
    public static let negativeInfinity = CMTimeFlags(rawValue: 1 << 3)
    public static let indefinite = CMTimeFlags(rawValue: 1 << 4)
    public static let implicitValueMask: CMTimeFlags = [.positiveInfinity, .negativeInfinity, .indefinite]
}

public struct CMTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var value: CMTimeValue
    public var timescale: CMTimeScale
    public var flags: CMTimeFlags
    public var epoch: CMTimeEpoch

    /// All zero: an invalid time, as CoreMedia's `CMTime()`.
    public init() {
        self.init(value: 0, timescale: 0, flags: [], epoch: 0)
    }

    public init(value: CMTimeValue, timescale: CMTimeScale, flags: CMTimeFlags, epoch: CMTimeEpoch) {
        self.value = value
        self.timescale = timescale
        self.flags = flags
        self.epoch = epoch
    }

    /// A valid time of `value / timescale` seconds (invalid when `timescale` is not positive).
    public init(value: CMTimeValue, timescale: CMTimeScale) {
        self.init(value: value, timescale: timescale, flags: timescale > 0 ? .valid : [], epoch: 0)
    }

    /// `seconds`, rounded to the nearest tick of `preferredTimescale`.
    public init(seconds: Double, preferredTimescale: CMTimeScale) {
        if seconds.isNaN || preferredTimescale <= 0 {
            self = .invalid
        } else if seconds.isInfinite {
            self = seconds > 0 ? .positiveInfinity : .negativeInfinity
        } else {
            let ticks = (seconds * Double(preferredTimescale)).rounded()
            self.init(value: CMTimeValue(exactly: ticks) ?? (ticks > 0 ? .max : .min), timescale: preferredTimescale)
            if Double(value) != seconds * Double(preferredTimescale) { flags.insert(.hasBeenRounded) }
        }
    }

    public static let zero = CMTime(value: 0, timescale: 1)
    public static let invalid = CMTime()
    public static let indefinite = CMTime(value: 0, timescale: 0, flags: [.valid, .indefinite], epoch: 0)
    public static let positiveInfinity = CMTime(value: 0, timescale: 0, flags: [.valid, .positiveInfinity], epoch: 0)
    public static let negativeInfinity = CMTime(value: 0, timescale: 0, flags: [.valid, .negativeInfinity], epoch: 0)

    public var isValid: Bool { flags.contains(.valid) }
    public var isIndefinite: Bool { isValid && flags.contains(.indefinite) }
    public var isPositiveInfinity: Bool { isValid && flags.contains(.positiveInfinity) }
    public var isNegativeInfinity: Bool { isValid && flags.contains(.negativeInfinity) }
    /// Valid and neither infinite nor indefinite.
    public var isNumeric: Bool { isValid && flags.isDisjoint(with: .implicitValueMask) }
    public var hasBeenRounded: Bool { flags.contains(.hasBeenRounded) }

    /// The time in seconds: NaN for an invalid or indefinite time, ±infinity for the infinities.
    public var seconds: Double {
        if isPositiveInfinity { return .infinity }
        if isNegativeInfinity { return -.infinity }
        guard isNumeric, timescale > 0 else { return .nan }
        return Double(value) / Double(timescale)
    }

    /// The same time in `timescale`, rounded to the nearest tick.
    public func convertScale(_ newTimescale: CMTimeScale) -> CMTime {
        guard isNumeric, newTimescale > 0 else { return self }
        let product = value.multipliedFullWidth(by: Int64(newTimescale))
        let (quotient, remainder) = Int64(timescale).dividingFullWidth(product)
        var result = CMTime(value: quotient, timescale: newTimescale)
        if remainder != 0 {
            if remainder.magnitude * 2 >= UInt64(timescale) { result.value += value >= 0 ? 1 : -1 }
            result.flags.insert(.hasBeenRounded)
        }
        return result
    }

    public static func < (lhs: CMTime, rhs: CMTime) -> Bool { CMTimeCompare(lhs, rhs) < 0 }
    public static func == (lhs: CMTime, rhs: CMTime) -> Bool { CMTimeCompare(lhs, rhs) == 0 }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(rankForComparison)
        guard rankForComparison == 1 else { return }
        // Equal times in different timescales hash alike: value/timescale in lowest terms.
        var (a, b) = (value.magnitude, UInt64(timescale))
        while b != 0 { (a, b) = (b, a % b) }
        let divisor = Int64(max(a, 1))
        hasher.combine(value / divisor)
        hasher.combine(Int64(timescale) / divisor)
    }

    public static func + (lhs: CMTime, rhs: CMTime) -> CMTime { CMTimeAdd(lhs, rhs) }
    public static func - (lhs: CMTime, rhs: CMTime) -> CMTime { CMTimeSubtract(lhs, rhs) }

    public var description: String {
        if !isValid { return "CMTime(invalid)" }
        if isIndefinite { return "CMTime(indefinite)" }
        if isPositiveInfinity { return "CMTime(+infinity)" }
        if isNegativeInfinity { return "CMTime(-infinity)" }
        return "CMTime(\(value)/\(timescale) = \(seconds) s)"
    }
}

public let kCMTimeZero = CMTime.zero
public let kCMTimeInvalid = CMTime.invalid
public let kCMTimeIndefinite = CMTime.indefinite
public let kCMTimePositiveInfinity = CMTime.positiveInfinity
public let kCMTimeNegativeInfinity = CMTime.negativeInfinity

public func CMTimeMake(value: Int64, timescale: Int32) -> CMTime {
    CMTime(value: value, timescale: timescale)
}

public func CMTimeMakeWithSeconds(_ seconds: Float64, preferredTimescale: Int32) -> CMTime {
    CMTime(seconds: seconds, preferredTimescale: preferredTimescale)
}

public func CMTimeGetSeconds(_ time: CMTime) -> Float64 {
    time.seconds
}

public func CMTimeConvertScale(_ time: CMTime, timescale newTimescale: Int32) -> CMTime {
    time.convertScale(newTimescale)
}

/// -1, 0 or 1, as CoreMedia orders times (numeric times exactly, whatever their timescales).
public func CMTimeCompare(_ time1: CMTime, _ time2: CMTime) -> Int32 {
    let (rank1, rank2) = (time1.rankForComparison, time2.rankForComparison)
    if rank1 != rank2 { return rank1 < rank2 ? -1 : 1 }
    guard rank1 == 1 else { return 0 }
    let left = time1.value.multipliedFullWidth(by: Int64(time2.timescale))
    let right = time2.value.multipliedFullWidth(by: Int64(time1.timescale))
    return left < right ? -1 : left > right ? 1 : 0
}

/// The sum, in the larger timescale when the two differ (rounded, and flagged so, when inexact).
public func CMTimeAdd(_ lhs: CMTime, _ rhs: CMTime) -> CMTime {
    combine(lhs, rhs, negatingRight: false)
}

public func CMTimeSubtract(_ lhs: CMTime, _ rhs: CMTime) -> CMTime {
    combine(lhs, rhs, negatingRight: true)
}

private func combine(_ lhs: CMTime, _ rhs: CMTime, negatingRight: Bool) -> CMTime {
    guard lhs.isValid, rhs.isValid else { return .invalid }
    guard lhs.isNumeric, rhs.isNumeric else {
        if lhs.isIndefinite || rhs.isIndefinite { return .indefinite }
        let right = negatingRight ? CMTime(value: 0, timescale: 0, flags: rhs.isPositiveInfinity ? [.valid, .negativeInfinity]
                                            : rhs.isNegativeInfinity ? [.valid, .positiveInfinity] : rhs.flags, epoch: 0) : rhs
        let infinities = [lhs, right].filter { !$0.isNumeric }
        if infinities.count == 2, infinities[0].flags != infinities[1].flags { return .invalid }
        return infinities[0]
    }
    let timescale = max(lhs.timescale, rhs.timescale)
    let (a, b) = (lhs.convertScale(timescale), rhs.convertScale(timescale))
    let (sum, overflow) = negatingRight ? a.value.subtractingReportingOverflow(b.value) : a.value.addingReportingOverflow(b.value)
    guard !overflow else { return sum < 0 ? .positiveInfinity : .negativeInfinity }
    var result = CMTime(value: sum, timescale: timescale)
    if a.hasBeenRounded || b.hasBeenRounded { result.flags.insert(.hasBeenRounded) }
    return result
}

extension CMTime {
    /// The order CoreMedia gives: −∞ < numeric times < +∞ < indefinite < invalid.
    fileprivate var rankForComparison: Int {
        if !isValid { return 4 }
        if isIndefinite { return 3 }
        if isPositiveInfinity { return 2 }
        if isNegativeInfinity { return 0 }
        return 1
    }
}
