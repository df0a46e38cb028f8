public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The secrets an app and its extensions share (a login, a stream key): the role of iOS's shared
/// keychain (`SecItemAdd`/`SecItemCopyMatching` with `kSecAttrAccessGroup: "TEAMID.group.example"`)
/// and of `UserDefaults(suiteName: "group.example")` for small strings.
///
/// ```swift
/// let group = try RPAppGroup(identifier: "org.example.stream")
/// try group.set(streamKey, forKey: "streamKey")           // SecItemAdd / SecItemUpdate
/// let key = try group.string(forKey: "streamKey")         // SecItemCopyMatching
/// try group.removeValue(forKey: "streamKey")              // SecItemDelete
/// ```
///
/// Where the secrets are (`store`): in the **Secret Service** (GNOME Keyring, KWallet; through
/// libsecret, one item per group and key) when the session has a bus on which one answers; else in a
/// JSON file only its owner reads, `$XDG_DATA_HOME/openreplaykit/app-groups/GROUP/secrets.json`
/// (default `~/.local/share/…`), the file 0600 in folders 0700, written whole (a new file renamed
/// over the old one) under a lock, so that the app and an extension may write at the same time.
/// `ORK_APP_GROUP_STORE=file` chooses the file. The choice is made once per process; replayd gives
/// its extensions the session bus, so that the app and its extensions use the same store.
///
/// Membership: an extension (a program replayd started, `ORK_EXTENSION_IDENTIFIER` set) may open
/// only the group its manifest names (`"appGroup"`, given to it as `ORK_APP_GROUP`); any other
/// group, or any group when its manifest names none, is refused with an error. An app opens the
/// groups it shares with its extensions. Every program of the same user could read the file
/// itself, as on any desktop: the store keeps other users out, and well-behaved extensions in
/// their own group.
public struct RPAppGroup: Sendable {
    /// Where a group's secrets are kept.
    public enum Store: Sendable, Equatable {
        /// The Secret Service of the session (items with the attributes `openreplaykit-group` and `key`).
        case secretService
        /// The JSON file at this path (0600).
        case file(String)
    }

    /// The group's identifier, reverse-DNS (`org.example.stream`; iOS's `group.org.example.stream` works too).
    public let identifier: String
    /// The folder of the group's file store (used when `store` is `.file`).
    public let folder: String
    private let secretService: SecretServiceStore?

    /// Where this group's secrets are kept.
    public var store: Store { secretService == nil ? .file(file) : .secretService }

    /// Opens the group (its folder is made on the first write). Throws when `identifier` is not
    /// reverse-DNS, or this is an extension whose manifest names another group, or none.
    public init(identifier: String) throws(RPAppGroupError) {
        try self.init(identifier: identifier, environment: ProcessInfo.processInfo.environment, secretService: SecretServiceStore.shared)
    }

    /// `secretService` nil: the file store.
    init(identifier: String, environment: [String: String], secretService: SecretServiceStore? = nil) throws(RPAppGroupError) {
        let parts = identifier.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts.allSatisfy({ part in
            !part.isEmpty && part.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" }
        }) else {
            throw RPAppGroupError("\"\(identifier)\" is not an app group identifier: use reverse-DNS, such as org.example.stream.")
        }
        if let extensionID = environment["ORK_EXTENSION_IDENTIFIER"] {
            guard let member = environment["ORK_APP_GROUP"] else {
                throw RPAppGroupError("the extension \(extensionID) belongs to no app group: add \"appGroup\": \"\(identifier)\" to its manifest.json to share secrets with its app.")
            }
            guard member == identifier else {
                throw RPAppGroupError("the extension \(extensionID) belongs to the app group \(member) (its manifest's \"appGroup\"), not to \(identifier): it may not read that group's secrets.")
            }
        }
        guard let dataHome = environment["XDG_DATA_HOME"].flatMap({ $0.hasPrefix("/") ? $0 : nil })
                ?? environment["HOME"].map({ $0 + "/.local/share" }) else {
            throw RPAppGroupError("neither XDG_DATA_HOME nor HOME is set: there is nowhere to keep the app group \(identifier)'s secrets.")
        }
        self.identifier = identifier
        self.folder = dataHome + "/openreplaykit/app-groups/" + identifier
        self.secretService = secretService
    }

    /// The file the secrets are in.
    public var file: String { folder + "/secrets.json" }

    /// The string stored under `key`, nil when there is none.
    public func string(forKey key: String) throws(RPAppGroupError) -> String? {
        if let secretService { return try secretService.lookup(group: identifier, key: key) }
        return try withLock(create: false) { () throws(RPAppGroupError) in try read()[key] } ?? nil
    }

    /// Stores `value` under `key` (nil removes it).
    public func set(_ value: String?, forKey key: String) throws(RPAppGroupError) {
        if let secretService {
            if let value {
                try secretService.store(value, group: identifier, key: key)
            } else {
                try secretService.clear(group: identifier, key: key)
            }
            return
        }
        _ = try withLock(create: true) { () throws(RPAppGroupError) in
            var secrets = try read()
            secrets[key] = value
            try write(secrets)
        }
    }

    public func removeValue(forKey key: String) throws(RPAppGroupError) {
        try set(nil, forKey: key)
    }

    // MARK: the file

    /// Runs `body` holding the group's lock (`flock` on `.lock` in its folder); nil without running
    /// it when the folder does not exist and `create` is false (nothing stored yet).
    private func withLock<T>(create: Bool, _ body: () throws(RPAppGroupError) -> T) throws(RPAppGroupError) -> T? {
        if create {
            let groups = (folder as NSString).deletingLastPathComponent
            try? FileManager.default.createDirectory(atPath: (groups as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try makeFolder(groups)
            try makeFolder(folder)
        } else if access(folder, F_OK) != 0 {
            return nil
        }
        let lock = open(folder + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw RPAppGroupError("cannot open the app group \(identifier)'s lock in \(folder): \(String(cString: strerror(errno)))") }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw RPAppGroupError("cannot lock the app group \(identifier): \(String(cString: strerror(errno)))") }
        }
        return try body()
    }

    /// Makes `path` a folder only its owner enters (0700), whatever the umask.
    private func makeFolder(_ path: String) throws(RPAppGroupError) {
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            throw RPAppGroupError("cannot create \(path) for the app group \(identifier): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == getuid() else {
            throw RPAppGroupError("\(path) is not a folder of this user: the app group \(identifier)'s secrets are not kept there.")
        }
        if info.st_mode & 0o777 != 0o700 { chmod(path, 0o700) }
    }

    private func read() throws(RPAppGroupError) -> [String: String] {
        guard let data = FileManager.default.contents(atPath: file) else { return [:] }
        do {
            return try JSONDecoder().decode([String: String].self, from: data)
        } catch {
            throw RPAppGroupError("the app group \(identifier)'s secrets (\(file)) are not a JSON object of strings: \(error)")
        }
    }

    private func write(_ secrets: [String: String]) throws(RPAppGroupError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data: Data
        do { data = try encoder.encode(secrets) } catch { throw RPAppGroupError("cannot encode the app group \(identifier)'s secrets: \(error)") }
        let temporary = folder + "/.secrets-\(getpid()).json"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw RPAppGroupError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let written = data.withUnsafeBytes { bytes in Glibc.write(descriptor, bytes.baseAddress, bytes.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == data.count, synced, rename(temporary, file) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw RPAppGroupError("cannot write the app group \(identifier)'s secrets to \(file): \(reason)")
        }
    }
}

/// Why an app group's secrets could not be read or written.
public struct RPAppGroupError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
    public var errorDescription: String? { message }
}

extension RPAppGroup {
    /// The group's folder, made (0700) when missing: what an extension's
    /// `FileManager.default.containerURL(forSecurityApplicationGroupIdentifier:)` gives, for the
    /// files (a socket, a log, settings) the app and its extensions share.
    public func containerURL() throws(RPAppGroupError) -> URL {
        _ = try withLock(create: true) { () throws(RPAppGroupError) in () }
        return URL(fileURLWithPath: folder, isDirectory: true)
    }
}

extension FileManager {
    /// iOS's shared container of an app group: `RPAppGroup(identifier:)`'s folder, made when missing.
    /// Nil where iOS gives nil: an identifier the process may not use (an extension whose manifest
    /// names another group), or one that is not reverse-DNS.
    public func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
        try? RPAppGroup(identifier: groupIdentifier).containerURL()
    }
}
