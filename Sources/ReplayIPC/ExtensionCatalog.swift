import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One installed extension, read from its folder's `manifest.json`.
///
/// ```json
/// {"identifier": "org.example.stream", "displayName": "Example Stream", "icon": "icon.png",
///  "kind": "broadcast-upload", "executable": "stream-upload",
///  "setupExtension": "org.example.stream.setup", "appGroup": "org.example",
///  "containingApplication": "org.example.Stream"}
/// ```
public struct ExtensionManifest: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case broadcastUpload = "broadcast-upload", broadcastSetup = "broadcast-setup" }

    /// Reverse-DNS, also the folder's name before `.orkextension`.
    public var identifier: String
    public var displayName: String
    /// The icon (a PNG in the folder), as an absolute path once read; nil when there is none.
    public var icon: String?
    public var kind: Kind
    /// The program replayd starts, as an absolute path once read.
    public var executable: String
    /// The identifier of the setup extension that asks the person before a broadcast, if any.
    public var setupExtension: String?
    /// The group whose secrets the extension shares with its app.
    public var appGroup: String?
    /// The service's own application (its desktop entry's id, `org.example.Stream` for
    /// `org.example.Stream.desktop`): offered to the person when the extension ends a broadcast with an
    /// error (to sign in again, say), as iOS offers the extension's containing app.
    public var containingApplication: String?
    /// The folder it was found in (absent from the file itself).
    public var folder: String?

    public init(identifier: String, displayName: String, icon: String? = nil, kind: Kind, executable: String,
                setupExtension: String? = nil, appGroup: String? = nil, containingApplication: String? = nil, folder: String? = nil) {
        self.identifier = identifier
        self.displayName = displayName
        self.icon = icon
        self.kind = kind
        self.executable = executable
        self.setupExtension = setupExtension
        self.appGroup = appGroup
        self.containingApplication = containingApplication
        self.folder = folder
    }

    /// `a.b` or longer: letters, digits, `-` and `_` between dots.
    public static func isReverseDNS(_ identifier: String) -> Bool {
        let parts = identifier.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count >= 2 && parts.allSatisfy { part in
            !part.isEmpty && part.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" }
        }
    }
}

/// A manifest that was skipped, and why: the file and the field at fault.
public struct ExtensionProblem: Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var field: String
    public var reason: String
    public var description: String { "skipped \(file): field \"\(field)\": \(reason)" }
}

/// Where extensions are found, and what is there.
///
/// Folders:
/// 1. `$XDG_DATA_HOME/openreplaykit/extensions/` (default `~/.local/share/…`): the user's own;
/// 2. `PREFIX/share/openreplaykit/extensions/` for the PREFIX the running program is installed in
///    (`PREFIX/bin/replayd`), then each `$XDG_DATA_DIRS` entry's (default `/usr/local/share:/usr/share`);
/// 3. the extensions that ship with the project, found beside the running program as product
///    executables (`.build/debug/replay-extension-rtmp` beside `.build/debug/replay`), so that a
///    build works before `make install`; their manifest is `shipped` below.
///
/// An identifier belongs to the first installed (2) or shipped (3) extension that has it; one in the
/// user's folder (which any program of the user can write) with an identifier installed or shipped
/// elsewhere is refused: it would receive that one's secrets. An app group belongs to one extension
/// (`claimingAppGroups`) and to the setup extension its manifest names; any other claim is refused.
///
/// Each extension is a folder `ID.orkextension/` holding `manifest.json`, its executable and its icon.
public struct ExtensionCatalog: Sendable {
    public var extensions: [ExtensionManifest]
    public var problems: [ExtensionProblem]

    /// The extensions that ship with the project: their manifests, with the product executable's name.
    public static let shipped: [(manifest: ExtensionManifest, product: String)] = [
        (ExtensionManifest(identifier: "org.openreplaykit.rtmp", displayName: "RTMP", icon: nil, kind: .broadcastUpload,
                           executable: "replay-extension-rtmp", setupExtension: "org.openreplaykit.rtmp.setup",
                           appGroup: "org.openreplaykit.rtmp"), "replay-extension-rtmp"),
        (ExtensionManifest(identifier: "org.openreplaykit.rtmp.setup", displayName: "RTMP", icon: nil, kind: .broadcastSetup,
                           executable: "replay-extension-rtmp-setup", appGroup: "org.openreplaykit.rtmp"), "replay-extension-rtmp-setup"),
        (ExtensionManifest(identifier: "org.openreplaykit.reference", displayName: "OpenReplayKit Live", icon: nil, kind: .broadcastUpload,
                           executable: "replay-extension-reference", appGroup: "org.openreplaykit.reference"), "replay-extension-reference"),
    ]

    /// The folders searched, in order, for `environment` and a program at `executablePath`.
    public static func folders(environment: [String: String], executablePath: String?) -> [String] {
        var folders: [String] = []
        if let user = userFolder(environment: environment) { folders.append(user) }
        if let executablePath {
            let prefix = ((executablePath as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
            folders.append(prefix + "/share/openreplaykit/extensions")
        }
        let system = (environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share")
            .split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        for directory in system { folders.append(directory + "/openreplaykit/extensions") }
        var seen = Set<String>()
        return folders.map { ($0 as NSString).standardizingPath }.filter { seen.insert($0).inserted }
    }

    /// Reads every folder; a malformed manifest, a taken identifier or a taken app group is a
    /// problem, never an error.
    public static func load(environment: [String: String]? = nil,
                            executablePath: String? = currentExecutable()) -> ExtensionCatalog {
        let environment = environment ?? ProcessInfo.processInfo.environment
        var found: [ExtensionManifest] = []
        var problems: [ExtensionProblem] = []
        var identifiers = Set<String>()
        let all = folders(environment: environment, executablePath: executablePath)
        let user = userFolder(environment: environment)
        func read(_ folder: String) -> [(file: String, result: Result<ExtensionManifest, ExtensionProblem>)] {
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
            return entries.sorted().filter { $0.hasSuffix(".orkextension") }
                .map { (folder + "/" + $0 + "/manifest.json", Self.read(folder + "/" + $0)) }
        }
        for folder in all where folder != user {
            for (_, result) in read(folder) {
                switch result {
                case .success(let manifest):
                    if identifiers.insert(manifest.identifier).inserted { found.append(manifest) }
                case .failure(let problem):
                    problems.append(problem)
                }
            }
        }
        if let executablePath {
            let beside = (executablePath as NSString).deletingLastPathComponent
            for (manifest, product) in shipped where !identifiers.contains(manifest.identifier) {
                let path = beside + "/" + product
                guard access(path, X_OK) == 0 else { continue }
                var built = manifest
                built.executable = path
                built.folder = beside
                identifiers.insert(manifest.identifier)
                found.append(built)
            }
        }
        if let user {
            for (file, result) in read(user) {
                switch result {
                case .success(let manifest) where identifiers.contains(manifest.identifier):
                    let owner = found.first { $0.identifier == manifest.identifier }?.folder ?? "another folder"
                    problems.append(ExtensionProblem(file: file, field: "identifier",
                        reason: "\(manifest.identifier) is installed in \(owner): one in your folder cannot take its place (it would receive its secrets). Give yours an identifier of its own."))
                case .success(let manifest):
                    identifiers.insert(manifest.identifier)
                    found.append(manifest)
                case .failure(let problem):
                    problems.append(problem)
                }
            }
        }
        return ExtensionCatalog(extensions: claimingAppGroups(found, problems: &problems), problems: problems)
    }

    /// `found` less the extensions that claim an app group belonging to another. The group's owner
    /// is, in `found`'s order (installed and shipped first), the first claimant named in the group's
    /// reverse-DNS space (`org.example.a` for `org.example`), else the first claimant; upload
    /// extensions before setup ones. The setup extension the owner's manifest names may share it.
    static func claimingAppGroups(_ found: [ExtensionManifest], problems: inout [ExtensionProblem]) -> [ExtensionManifest] {
        var owners: [String: ExtensionManifest] = [:]
        let uploadsFirst = found.filter { $0.kind == .broadcastUpload } + found.filter { $0.kind != .broadcastUpload }
        for manifest in uploadsFirst {
            guard let group = manifest.appGroup, manifest.identifier == group || manifest.identifier.hasPrefix(group + ".") else { continue }
            if owners[group] == nil { owners[group] = manifest }
        }
        for manifest in uploadsFirst {
            if let group = manifest.appGroup, owners[group] == nil { owners[group] = manifest }
        }
        return found.filter { manifest in
            guard let group = manifest.appGroup, let owner = owners[group], owner.identifier != manifest.identifier,
                  owner.setupExtension != manifest.identifier else { return true }
            problems.append(ExtensionProblem(file: (manifest.folder ?? "?") + "/manifest.json", field: "appGroup",
                reason: "the app group \(group) belongs to \(owner.identifier), whose manifest does not name \(manifest.identifier)"))
            return false
        }
    }

    /// The user's own folder (the first of `folders`), which any program of the user can write.
    static func userFolder(environment: [String: String]) -> String? {
        let dataHome = environment["XDG_DATA_HOME"].flatMap({ $0.hasPrefix("/") ? $0 : nil }) ?? environment["HOME"].map({ $0 + "/.local/share" })
        return dataHome.map { ($0 + "/openreplaykit/extensions" as NSString).standardizingPath }
    }

    /// The upload extensions: what `replay services` lists and a broadcast can use.
    public var services: [ExtensionManifest] { extensions.filter { $0.kind == .broadcastUpload } }

    public func service(_ identifier: String) -> ExtensionManifest? {
        services.first { $0.identifier == identifier }
    }

    /// The setup extension (kind `broadcast-setup`) called `identifier`, as an upload extension's
    /// `setupExtension` names it.
    public func setupExtension(_ identifier: String) -> ExtensionManifest? {
        extensions.first { $0.identifier == identifier && $0.kind == .broadcastSetup }
    }

    /// Reads `folder`/manifest.json, checking each field.
    public static func read(_ folder: String) -> Result<ExtensionManifest, ExtensionProblem> {
        let file = folder + "/manifest.json"
        func problem(_ field: String, _ reason: String) -> Result<ExtensionManifest, ExtensionProblem> {
            .failure(ExtensionProblem(file: file, field: field, reason: reason))
        }
        guard let data = FileManager.default.contents(atPath: file) else { return problem("manifest.json", "the file is missing or unreadable") }
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            return problem("manifest.json", "not a JSON object")
        }
        func string(_ key: String, required: Bool) -> Result<String?, ExtensionProblem> {
            guard let value = object[key] else {
                return required ? .failure(ExtensionProblem(file: file, field: key, reason: "missing")) : .success(nil)
            }
            guard let text = value as? String, !text.isEmpty else {
                return .failure(ExtensionProblem(file: file, field: key, reason: "must be a non-empty string"))
            }
            return .success(text)
        }
        do throws(ExtensionProblem) {
            let identifier = try string("identifier", required: true).get()!
            guard ExtensionManifest.isReverseDNS(identifier) else { return problem("identifier", "\"\(identifier)\" is not reverse-DNS (such as org.example.stream)") }
            guard (folder as NSString).lastPathComponent == identifier + ".orkextension" else {
                return problem("identifier", "\"\(identifier)\" does not match the folder's name (it must be \(identifier).orkextension)")
            }
            let displayName = try string("displayName", required: true).get()!
            let kindName = try string("kind", required: true).get()!
            guard let kind = ExtensionManifest.Kind(rawValue: kindName) else {
                return problem("kind", "\"\(kindName)\" is neither broadcast-upload nor broadcast-setup")
            }
            let executableName = try string("executable", required: true).get()!
            guard !executableName.hasPrefix("/"), !executableName.contains("..") else {
                return problem("executable", "\"\(executableName)\" must be a path inside the extension's folder")
            }
            let executable = folder + "/" + executableName
            guard access(executable, X_OK) == 0 else { return problem("executable", "\(executable) is missing or not executable") }
            var icon: String?
            if let iconName = try string("icon", required: false).get() {
                guard !iconName.hasPrefix("/"), !iconName.contains("..") else { return problem("icon", "\"\(iconName)\" must be a file inside the extension's folder") }
                guard access(folder + "/" + iconName, R_OK) == 0 else { return problem("icon", "\(folder)/\(iconName) is missing") }
                icon = folder + "/" + iconName
            }
            let setup = try string("setupExtension", required: false).get()
            if let setup, !ExtensionManifest.isReverseDNS(setup) { return problem("setupExtension", "\"\(setup)\" is not reverse-DNS") }
            let appGroup = try string("appGroup", required: false).get()
            let application = try string("containingApplication", required: false).get()
            if let application, !ExtensionManifest.isReverseDNS(application) {
                return problem("containingApplication", "\"\(application)\" is not a desktop entry id (reverse-DNS, without .desktop)")
            }
            return .success(ExtensionManifest(identifier: identifier, displayName: displayName, icon: icon, kind: kind,
                                              executable: executable, setupExtension: setup, appGroup: appGroup,
                                              containingApplication: application, folder: folder))
        } catch {
            return .failure(error)
        }
    }

    /// The running program's path (`/proc/self/exe`).
    public static func currentExecutable() -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }
}

extension ExtensionProblem: Error {}
