import Foundation
import Logging

/// Where application icons are kept (in the store's icon table, under these keys). An icon uploaded with
/// a broadcast belongs to the account that uploaded it; the application's own icon, shown in the
/// directory for every account, is the one the operator verified.
enum ApplicationIcons {
    static func verifiedKey(_ applicationID: String) -> String { "verified/" + applicationID }
    static func accountKey(_ applicationID: String, userID: Int64) -> String { "user/\(userID)/" + applicationID }
}

extension ServiceAdministration {
    /// Verifies an application: `png` becomes its icon everywhere (the directory, every account's broadcasts).
    public static func verifyApplication(_ applicationID: String, png: [UInt8], database: DatabaseLocation) async throws {
        guard (1...200).contains(applicationID.count), !applicationID.contains("/") else {
            throw StoreError(message: "An application id has 1–200 characters and no '/'.")
        }
        guard png.count <= ServiceRoutes.maximumIconBytes, png.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else {
            throw StoreError(message: "The icon must be a PNG of at most 256 KB.")
        }
        try await database.withStore(logger: logger) { store in
            try await store.saveApplicationIcon(applicationID: ApplicationIcons.verifiedKey(applicationID), png: png)
        }
    }
}

extension ServiceRoutes {
    /// A short reason for a JSON decoding failure (no Swift debug text).
    static func shortReason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "not valid JSON." }
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }
            return keys.isEmpty ? "the document" : keys.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = path(context)
            return "\(parent == "the document" ? "" : parent + ".")\(key.stringValue) is required."
        case .typeMismatch(_, let context), .valueNotFound(_, let context): return "\(path(context)) has the wrong type."
        case .dataCorrupted: return "not valid JSON."
        @unknown default: return "not valid JSON."
        }
    }
}
