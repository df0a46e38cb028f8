import Foundation
import HummingbirdBcrypt
import NIOPosix
import Synchronization

/// Passwords, sessions and the sign-in rate limit.
struct Accounts: Sendable {
    let store: any ServiceStore
    let threadPool: NIOThreadPool
    let bcryptCost: UInt8
    let limiter = RateLimiter(limit: 5, window: 300)
    static let sessionLifetime: Double = 30 * 24 * 3600

    struct Failure: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    static func validate(name: String, password: String) throws(Failure) {
        guard (3...32).contains(name.count), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
            throw Failure(message: "A name has 3 to 32 letters, digits, '-' or '_'.")
        }
        guard (8...128).contains(password.count) else { throw Failure(message: "A password has 8 to 128 characters.") }
    }

    /// Hashes off the cooperative pool (bcrypt is deliberately slow).
    func hash(_ password: String) async throws -> String {
        let cost = bcryptCost
        return try await threadPool.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    func verify(_ password: String, hash: String) async throws -> Bool {
        try await threadPool.runIfActive { Bcrypt.verify(password, hash: hash) }
    }

    func createUser(name: String, password: String) async throws -> UserRecord {
        try Self.validate(name: name, password: password)
        if try await store.user(named: name) != nil { throw Failure(message: "That name is taken.") }
        return try await store.createUser(name: name, passwordHash: try await hash(password))
    }

    /// Checks a sign-in; nil for a wrong name or password. Throws when rate-limited.
    func signIn(name: String, password: String) async throws -> UserRecord? {
        let key = name.lowercased()
        guard limiter.allow(key) else { throw Failure(message: "Too many sign-in attempts; wait a few minutes.") }
        guard let user = try await store.user(named: name) else {
            _ = try await hash("timing equaliser")
            return nil
        }
        guard try await verify(password, hash: user.passwordHash) else { return nil }
        return user
    }

    func newSession(for user: UserRecord) async throws -> String {
        let token = Token.hex(32)
        try await store.createSession(token: token, userID: user.id, expiresAt: Date().timeIntervalSince1970 + Self.sessionLifetime)
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
