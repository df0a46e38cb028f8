package import BroadcastStore
import Foundation
import HummingbirdBcrypt
package import NIOPosix
import Synchronization

/// Passwords, sessions and the sign-in throttle (by account and client address, see `LoginThrottle`).
package struct Accounts: Sendable {
    let store: any ServiceStore
    let threadPool: NIOThreadPool
    let bcryptCost: UInt8
    let throttle = SharedLoginThrottle()
    /// bcrypt reads only the first 72 bytes of a password: longer ones are refused, not cut.
    static let maximumPasswordBytes = 72
    static let sessionLifetime: Double = 30 * 24 * 3600

    struct Failure: Error, CustomStringConvertible {
        let message: String
        /// For a throttled sign-in: the seconds until the next attempt may be made (`Retry-After`).
        var retryAfter: Int?
        var description: String { message }
        init(message: String, retryAfter: Int? = nil) {
            self.message = message
            self.retryAfter = retryAfter
        }
    }

    static func validate(name: String, password: String) throws(Failure) {
        guard (3...32).contains(name.count), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
            throw Failure(message: "A name has 3 to 32 letters, digits, '-' or '_'.")
        }
        guard password.count >= 8 else { throw Failure(message: "A password has 8 characters to \(maximumPasswordBytes) bytes.") }
        guard password.utf8.count <= maximumPasswordBytes else {
            throw Failure(message: "A password has 8 characters to \(maximumPasswordBytes) bytes (bcrypt reads no more; "
                          + "accents and emoji take 2–4 bytes each): this one has \(password.utf8.count).")
        }
    }

    /// Hashes off the cooperative pool (bcrypt is deliberately slow).
    func hash(_ password: String) async throws -> String {
        let cost = bcryptCost
        return try await threadPool.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    func verify(_ password: String, hash: String) async throws -> Bool {
        try await threadPool.runIfActive { Bcrypt.verify(password, hash: hash) }
    }

    package init(store: any ServiceStore, threadPool: NIOThreadPool, bcryptCost: UInt8) {
        self.store = store
        self.threadPool = threadPool
        self.bcryptCost = bcryptCost
    }

    package func createUser(name: String, password: String) async throws -> UserRecord {
        try Self.validate(name: name, password: password)
        if try await store.user(named: name) != nil { throw Failure(message: "That name is taken.") }
        return try await store.createUser(name: name, passwordHash: try await hash(password))
    }

    /// Checks a sign-in from `address`, the page's or an extension's (`POST /api/v1/signin`): one throttle
    /// for both. Nil for a wrong name or password; throws a `Failure` with `retryAfter` when throttled.
    func signIn(name: String, password: String, address: String) async throws -> UserRecord? {
        if case .wait(let seconds) = throttle.decide(account: name, address: address) {
            let minutes = Int((seconds / 60).rounded(.up))
            throw Failure(message: "Too many sign-in attempts; try again in \(minutes) minute\(minutes == 1 ? "" : "s").",
                          retryAfter: max(1, Int(seconds.rounded(.up))))
        }
        // Longer than bcrypt reads: never a valid password (sign-up refuses them), and not hashed.
        guard password.utf8.count <= Self.maximumPasswordBytes, let user = try await store.user(named: name) else {
            _ = try await hash("timing equaliser")
            throttle.failed(account: name, address: address)
            return nil
        }
        guard try await verify(password, hash: user.passwordHash) else {
            throttle.failed(account: name, address: address)
            return nil
        }
        throttle.succeeded(account: name, address: address)
        return user
    }

    func newSession(for user: UserRecord) async throws -> String {
        let token = Token.hex(32)
        try await store.createSession(digest: Token.digest(token), userID: user.id, expiresAt: Date().timeIntervalSince1970 + Self.sessionLifetime)
        return token
    }
}

/// Allows `limit` events per key in a sliding `window` of seconds.
final class RateLimiter: Sendable {
    let limit: Int
    let window: Double
    private let events = Mutex<[String: [Double]]>([:])

    init(limit: Int, window: Double) {
        self.limit = limit
        self.window = window
    }

    func allow(_ key: String, now: Double = Date().timeIntervalSince1970) -> Bool {
        events.withLock { all in
            if all.count > 10_000 { all = all.filter { $0.value.last.map { now - $0 < window } ?? false } }
            var recent = (all[key] ?? []).filter { now - $0 < window }
            guard recent.count < limit else { all[key] = recent; return false }
            recent.append(now)
            all[key] = recent
            return true
        }
    }
}
