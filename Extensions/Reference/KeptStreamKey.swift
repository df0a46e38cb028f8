import Crypto
import Foundation
import OpenReplayKit

/// The stream key a sign-in gave, kept in the extension's app group (the shared keychain's role in
/// the seeds) for one account on one service: the next broadcast to that account starts without
/// signing in again (the service checks a password with bcrypt, a quarter of a second), given the
/// same password or none at all. A different password is never taken on trust: it signs in, and
/// the service says whether it is right. What is kept: the key, and a salted SHA-256 of the
/// password it was signed in with (never the password).
struct KeptStreamKey: Codable, Sendable, Equatable {
    var key: String
    var salt: String
    var passwordCheck: String

    init(key: String, password: String) {
        self.key = key
        salt = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        passwordCheck = Self.check(password, salt: salt)
    }

    func matches(password: String) -> Bool { Self.check(password, salt: salt) == passwordCheck }

    private static func check(_ password: String, salt: String) -> String {
        SHA256.hash(data: Data((salt + "/" + password).utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

/// The kept keys, in the app group replayd names (`ORK_APP_GROUP`, the manifest's `appGroup`).
/// Without a usable group (no folder, no Secret Service) nothing is kept: every broadcast signs in.
struct KeptStreamKeys: Sendable {
    private let group: RPAppGroup?

    init(group: RPAppGroup? = try? RPAppGroup(identifier: ProcessInfo.processInfo.environment["ORK_APP_GROUP"] ?? "org.openreplaykit.reference")) {
        self.group = group
    }

    private static func slot(server: ReferenceServer, user: String) -> String { "streamKey \(server) \(user)" }

    func key(server: ReferenceServer, user: String) -> KeptStreamKey? {
        guard let text = try? group?.string(forKey: Self.slot(server: server, user: user)) else { return nil }
        return try? JSONDecoder().decode(KeptStreamKey.self, from: Data(text.utf8))
    }

    /// Keeps `kept` (nil: forgets the account's key). Returns why it could not, if it could not.
    @discardableResult
    func keep(_ kept: KeptStreamKey?, server: ReferenceServer, user: String) -> String? {
        guard let group else { return "no app group to keep it in" }
        var text: String?
        if let kept {
            guard let data = try? JSONEncoder().encode(kept) else { return "it cannot be encoded" }
            text = String(decoding: data, as: UTF8.self)
        }
        do throws(RPAppGroupError) {
            try group.set(text, forKey: Self.slot(server: server, user: user))
            return nil
        } catch {
            return error.message
        }
    }
}
