import CSecret
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// App groups' secrets in the Secret Service (GNOME Keyring, KWallet) through libsecret: one item
/// per group and key, in the default collection, with the attributes `openreplaykit-group` and
/// `key` of the schema `org.openreplaykit.AppGroup` (`secret-tool lookup openreplaykit-group GROUP key KEY`
/// reads one). Used when the session has a bus whose Secret Service answers; else `RPAppGroup`
/// keeps its file.
///
/// `@unchecked Sendable`: the schema is made once, never changed nor freed; libsecret's `…_sync`
/// calls run on the calling thread with a main context of their own and may come from any thread.
final class SecretServiceStore: @unchecked Sendable {
    private let schema: UnsafeMutablePointer<SecretSchema>

    private init?() {
        let types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil)
        defer { g_hash_table_unref(types) }
        for name in ["openreplaykit-group", "key"] {
            // The value is SECRET_SCHEMA_ATTRIBUTE_STRING (0), GINT_TO_POINTER's null pointer.
            g_hash_table_insert(types, UnsafeMutableRawPointer(g_strdup(name)), nil)
        }
        guard let schema = secret_schema_newv("org.openreplaykit.AppGroup", SECRET_SCHEMA_NONE, types) else { return nil }
        self.schema = schema
    }

    /// The process's store, decided once: nil without a session bus (`DBUS_SESSION_BUS_ADDRESS`, or
    /// `$XDG_RUNTIME_DIR/bus`), with `ORK_APP_GROUP_STORE=file`, or when no Secret Service answers a lookup.
    static let shared: SecretServiceStore? = {
        let environment = ProcessInfo.processInfo.environment
        guard environment["ORK_APP_GROUP_STORE"] != "file" else { return nil }
        let bus: Bool
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"] {
            bus = !address.isEmpty
        } else if let runtime = environment["XDG_RUNTIME_DIR"] {
            bus = access(runtime + "/bus", F_OK) == 0
        } else {
            bus = false
        }
        guard bus, let store = SecretServiceStore() else { return nil }
        do {
            _ = try store.lookup(group: "org.openreplaykit.probe", key: "probe")
            return store
        } catch {
            return nil
        }
    }()

    func lookup(group: String, key: String) throws(RPAppGroupError) -> String? {
        let attributes = Self.attributes(group: group, key: key)
        defer { g_hash_table_unref(attributes) }
        var error: UnsafeMutablePointer<GError>?
        let found = secret_password_lookupv_sync(schema, attributes, nil, &error)
        try Self.check(error, "read \(key) of the app group \(group) from the Secret Service")
        guard let found else { return nil }
        defer { secret_password_free(found) }
        return String(cString: found)
    }

    func store(_ value: String, group: String, key: String) throws(RPAppGroupError) {
        let attributes = Self.attributes(group: group, key: key)
        defer { g_hash_table_unref(attributes) }
        var error: UnsafeMutablePointer<GError>?
        _ = secret_password_storev_sync(schema, attributes, nil, "OpenReplayKit app group \(group): \(key)", value, nil, &error)
        try Self.check(error, "keep \(key) of the app group \(group) in the Secret Service")
    }

    func clear(group: String, key: String) throws(RPAppGroupError) {
        let attributes = Self.attributes(group: group, key: key)
        defer { g_hash_table_unref(attributes) }
        var error: UnsafeMutablePointer<GError>?
        _ = secret_password_clearv_sync(schema, attributes, nil, &error)
        try Self.check(error, "remove \(key) of the app group \(group) from the Secret Service")
    }

    /// A new table of the item's attributes (the caller unrefs it).
    private static func attributes(group: String, key: String) -> OpaquePointer {
        let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        for (name, value) in [("openreplaykit-group", group), ("key", key)] {
            g_hash_table_insert(table, UnsafeMutableRawPointer(g_strdup(name)), UnsafeMutableRawPointer(g_strdup(value)))
        }
        return table
    }

    private static func check(_ error: UnsafeMutablePointer<GError>?, _ what: String) throws(RPAppGroupError) {
        guard let error else { return }
        let message = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
        g_error_free(error)
        throw RPAppGroupError("cannot \(what): \(message)")
    }
}
