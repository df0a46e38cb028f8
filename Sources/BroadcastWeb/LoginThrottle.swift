import Foundation
import Synchronization

/// Sign-in attempts, limited by account *and* client address: wrong passwords from one address lock that
/// address out of that account (the owner elsewhere still gets in), and an address that keeps failing,
/// on any account, waits exponentially longer between attempts. Pure: time comes in as `now` (seconds).
struct LoginThrottle: Sendable {
    struct Policy: Sendable {
        /// Wrong passwords per account and address within `window` before that pair is refused.
        var failuresPerAccountAndAddress = 5
        var window: Double = 300
        /// Wrong passwords an address may make (any accounts) before the back-off starts.
        var freeFailuresPerAddress = 10
        /// The longest wait the back-off reaches.
        var maximumBackOff: Double = 3600
        /// An address's failure count is forgotten after this long without a failure.
        var addressMemory: Double = 3600
    }

    enum Decision: Equatable {
        case allow
        /// Refused; try again after this many seconds.
        case wait(Double)
    }

    let policy: Policy
    private var pairFailures: [String: [Double]] = [:]
    private var addressFailures: [String: (count: Int, last: Double)] = [:]

    init(policy: Policy = Policy()) { self.policy = policy }

    private static func pair(_ account: String, _ address: String) -> String { account.lowercased() + "\n" + address }

    func decide(account: String, address: String, now: Double) -> Decision {
        if let failures = addressFailures[address], now - failures.last < policy.addressMemory,
           failures.count >= policy.freeFailuresPerAddress {
            let wait = min(policy.maximumBackOff, pow(2, Double(failures.count - policy.freeFailuresPerAddress)))
            if now < failures.last + wait { return .wait(failures.last + wait - now) }
        }
        let recent = (pairFailures[Self.pair(account, address)] ?? []).filter { now - $0 < policy.window }
        if recent.count >= policy.failuresPerAccountAndAddress, let oldest = recent.first {
            return .wait(oldest + policy.window - now)
        }
        return .allow
    }

    mutating func failed(account: String, address: String, now: Double) {
        prune(now: now)
        pairFailures[Self.pair(account, address), default: []].append(now)
        var failures = addressFailures[address] ?? (0, now)
        if now - failures.last >= policy.addressMemory { failures.count = 0 }
        failures = (failures.count + 1, now)
        addressFailures[address] = failures
    }

    /// A right password clears that account's failures from that address (not the address's back-off:
    /// signing in to one's own account must not reset a guessing run on others).
    mutating func succeeded(account: String, address: String) {
        pairFailures[Self.pair(account, address)] = nil
    }

    /// Bounded memory: old entries go once there are many.
    private mutating func prune(now: Double) {
        if pairFailures.count > 10_000 { pairFailures = pairFailures.filter { ($0.value.last ?? 0) > now - policy.window } }
        if addressFailures.count > 10_000 { addressFailures = addressFailures.filter { now - $0.value.last < policy.addressMemory } }
    }
}

/// The service's sign-in throttle, shared by requests.
final class SharedLoginThrottle: Sendable {
    private let state: Mutex<LoginThrottle>
    init(policy: LoginThrottle.Policy = .init()) { state = Mutex(LoginThrottle(policy: policy)) }

    func decide(account: String, address: String, now: Double = Date().timeIntervalSince1970) -> LoginThrottle.Decision {
        state.withLock { $0.decide(account: account, address: address, now: now) }
    }
    func failed(account: String, address: String, now: Double = Date().timeIntervalSince1970) {
        state.withLock { $0.failed(account: account, address: address, now: now) }
    }
    func succeeded(account: String, address: String) {
        state.withLock { $0.succeeded(account: account, address: address) }
    }
}
