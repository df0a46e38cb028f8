import BroadcastStore
import Foundation

extension LiveDirectory {
    /// A live publisher's key is checked again every few seconds, so that a key revoked from the command
    /// line or on another node also ends its publish. A store error keeps the publish (not the attacker's doing).
    func isStillAuthorized(streamKey: String) async -> Bool {
        do { return try await store.activeStreamKey(streamKey) != nil } catch { return true }
    }
}
