public import BroadcastStore
import BroadcastWeb
import Foundation
import Logging
import NIOPosix

/// The command line's administration tasks, on the same store the server uses.
public enum ServiceAdministration {
    /// Creates an account. The name has 3–32 letters, digits, `-` or `_`; the password 8 characters to 72 bytes.
    public static func createUser(name: String, password: String, database: DatabaseLocation, bcryptCost: UInt8 = 12) async throws {
        try await database.withStore(logger: logger) { store in
            _ = try await Accounts(store: store, threadPool: .singleton, bcryptCost: bcryptCost).createUser(name: name, password: password)
        }
    }

    static let logger = Logger(label: "openreplaykit.service.admin")

    /// Creates a stream key for an existing account and returns it.
    public static func createStreamKey(userName: String, label: String, database: DatabaseLocation) async throws -> String {
        try await database.withStore(logger: logger) { store in
            guard let user = try await store.user(named: userName) else {
                throw StoreError(message: "No account named \(userName); create it first with `broadcast-service user create \(userName)`.")
            }
            let key = Token.streamKey()
            _ = try await store.createStreamKey(userID: user.id, key: key, label: label)
            return key
        }
    }

    /// Revokes a stream key; false when it was unknown or already revoked.
    public static func revokeStreamKey(_ key: String, database: DatabaseLocation) async throws -> Bool {
        try await database.withStore(logger: logger) { store in
            guard let record = try await store.activeStreamKey(key) else { return false }
            return try await store.revokeStreamKey(id: record.id, userID: record.userID, at: Date().timeIntervalSince1970)
        }
    }
}

extension ServiceAdministration {
    /// Verifies an application: `png` becomes its icon everywhere (the directory, every account's broadcasts).
    public static func verifyApplication(_ applicationID: String, png: [UInt8], database: DatabaseLocation) async throws {
        guard (1...200).contains(applicationID.count), !applicationID.contains("/") else {
            throw StoreError(message: "An application id has 1–200 characters and no '/'.")
        }
        guard png.count <= ApplicationIcons.maximumBytes, png.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else {
            throw StoreError(message: "The icon must be a PNG of at most 256 KB.")
        }
        try await database.withStore(logger: logger) { store in
            try await store.saveApplicationIcon(applicationID: ApplicationIcons.verifiedKey(applicationID), png: png)
        }
    }
}
