import Foundation
import ReplayIPC
import ReplayTesting
import Testing

/// The extension catalog over real folders: what a manifest must hold, which folder wins, and that
/// a broken manifest is skipped with its file and field named.
@Suite("Extension catalog")
struct ExtensionCatalogTests {
    /// Writes `ID.orkextension/` with `manifest` (and an executable and icon) under `root`.
    static func write(_ id: String, _ manifest: String, in root: URL, executable: Bool = true, icon: Bool = true) throws {
        let folder = root.appendingPathComponent("openreplaykit/extensions/\(id).orkextension")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(manifest.utf8).write(to: folder.appendingPathComponent("manifest.json"))
        if executable {
            let program = folder.appendingPathComponent("upload")
            try Data("#!/bin/sh\n".utf8).write(to: program)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: program.path)
        }
        if icon { try Data([0x89, 0x50, 0x4E, 0x47]).write(to: folder.appendingPathComponent("icon.png")) }
    }

    static func manifest(_ id: String, kind: String = "broadcast-upload", extra: String = "") -> String {
        #"{"identifier": "\#(id)", "displayName": "Name of \#(id)", "icon": "icon.png", "kind": "\#(kind)", "executable": "upload"\#(extra)}"#
    }

    @Test("A good manifest is read, with absolute paths, from the user's folder and the system's")
    func readsBothFolders() throws {
        let root = try makeTemporaryDirectory(prefix: "ork-catalog")
        defer { try? FileManager.default.removeItem(at: root) }
        let user = root.appendingPathComponent("user"), system = root.appendingPathComponent("system")
        try Self.write("org.example.a", Self.manifest("org.example.a", extra: #", "setupExtension": "org.example.a.setup", "appGroup": "org.example", "containingApplication": "org.example.A""#), in: user)
        try Self.write("org.example.b", Self.manifest("org.example.b", kind: "broadcast-setup"), in: system)
        let catalog = ExtensionCatalog.load(environment: ["XDG_DATA_HOME": user.path, "XDG_DATA_DIRS": system.path], executablePath: nil)
        #expect(catalog.problems.isEmpty, "\(catalog.problems)")
        #expect(Set(catalog.extensions.map(\.identifier)) == ["org.example.a", "org.example.b"])
        let a = try #require(catalog.service("org.example.a"))
        #expect(a.displayName == "Name of org.example.a")
        #expect(a.setupExtension == "org.example.a.setup" && a.appGroup == "org.example" && a.containingApplication == "org.example.A")
        #expect(a.executable.hasPrefix(user.path) && a.executable.hasSuffix("org.example.a.orkextension/upload"))
        #expect(a.icon?.hasSuffix("/icon.png") == true)
        // A setup extension is not a service.
        #expect(catalog.services.map(\.identifier) == ["org.example.a"])
    }

    /// Issue 29: any program of the user can write the user's folder. One planted there with an
    /// installed extension's identifier would receive that one's secrets: it is refused, and says why.
    @Test("A planted duplicate of an installed or shipped identifier in the user's folder is refused")
    func plantedDuplicateRefused() throws {
        let root = try makeTemporaryDirectory(prefix: "ork-catalog")
        defer { try? FileManager.default.removeItem(at: root) }
        let user = root.appendingPathComponent("user"), system = root.appendingPathComponent("system")
        try Self.write("org.example.a", Self.manifest("org.example.a").replacingOccurrences(of: "Name of", with: "Planted"), in: user)
        try Self.write("org.example.a", Self.manifest("org.example.a").replacingOccurrences(of: "Name of", with: "System"), in: system)
        // And one of the shipped identifiers, the RTMP extension found beside the program.
        let bin = root.appendingPathComponent("build")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try Data("#!/bin/sh\n".utf8).write(to: bin.appendingPathComponent("replay-extension-rtmp"))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: bin.appendingPathComponent("replay-extension-rtmp").path)
        try Self.write("org.openreplaykit.rtmp", Self.manifest("org.openreplaykit.rtmp"), in: user)
        let catalog = ExtensionCatalog.load(environment: ["XDG_DATA_HOME": user.path, "XDG_DATA_DIRS": system.path],
                                            executablePath: bin.appendingPathComponent("replay").path)
        #expect(catalog.service("org.example.a")?.displayName == "System org.example.a")
        #expect(catalog.service("org.openreplaykit.rtmp")?.executable == bin.appendingPathComponent("replay-extension-rtmp").path)
        #expect(catalog.problems.count == 2, "\(catalog.problems)")
        for problem in catalog.problems {
            #expect(problem.field == "identifier" && problem.file.hasPrefix(user.path) && problem.reason.contains("cannot take its place"), "\(problem)")
        }
    }

    /// An app group's secrets belong to the extension that claims it first and the setup extension
    /// its manifest names: another manifest naming the group is refused.
    @Test("An app group belongs to its owner and the setup extension it names")
    func appGroupsBelongToTheirOwner() throws {
        let root = try makeTemporaryDirectory(prefix: "ork-catalog")
        defer { try? FileManager.default.removeItem(at: root) }
        try Self.write("org.example.a", Self.manifest("org.example.a", extra: #", "setupExtension": "org.example.a.setup", "appGroup": "org.example""#), in: root)
        try Self.write("org.example.a.setup", Self.manifest("org.example.a.setup", kind: "broadcast-setup", extra: #", "appGroup": "org.example""#), in: root)
        try Self.write("org.evil.b", Self.manifest("org.evil.b", extra: #", "appGroup": "org.example""#), in: root)
        let catalog = ExtensionCatalog.load(environment: ["XDG_DATA_HOME": root.path, "XDG_DATA_DIRS": "/nonexistent"], executablePath: nil)
        #expect(catalog.extensions.map(\.identifier).sorted() == ["org.example.a", "org.example.a.setup"])
        let problem = try #require(catalog.problems.first)
        #expect(catalog.problems.count == 1 && problem.field == "appGroup" && problem.file.contains("org.evil.b.orkextension"), "\(catalog.problems)")
        #expect(problem.reason.contains("belongs to org.example.a"), "\(problem)")
    }

    @Test("A broken manifest is skipped, naming its file and the field", arguments: [
        ("not json", "manifest.json"),
        (#"{"displayName": "x", "kind": "broadcast-upload", "executable": "upload"}"#, "identifier"),
        (#"{"identifier": "nodots", "displayName": "x", "kind": "broadcast-upload", "executable": "upload"}"#, "identifier"),
        (#"{"identifier": "org.example.c", "displayName": "", "kind": "broadcast-upload", "executable": "upload"}"#, "displayName"),
        (#"{"identifier": "org.example.c", "displayName": "x", "kind": "broadcast-download", "executable": "upload"}"#, "kind"),
        (#"{"identifier": "org.example.c", "displayName": "x", "kind": "broadcast-upload", "executable": "missing"}"#, "executable"),
        (#"{"identifier": "org.example.c", "displayName": "x", "kind": "broadcast-upload", "executable": "/bin/sh"}"#, "executable"),
        (#"{"identifier": "org.example.c", "displayName": "x", "kind": "broadcast-upload", "executable": "upload", "icon": "none.png"}"#, "icon"),
        (#"{"identifier": "org.example.other", "displayName": "x", "kind": "broadcast-upload", "executable": "upload"}"#, "identifier"),
        (#"{"identifier": "org.example.c", "displayName": "x", "kind": "broadcast-upload", "executable": "upload", "containingApplication": "stream.desktop x"}"#, "containingApplication"),
    ])
    func skipsBroken(_ manifest: String, _ field: String) throws {
        let root = try makeTemporaryDirectory(prefix: "ork-catalog")
        defer { try? FileManager.default.removeItem(at: root) }
        try Self.write("org.example.c", manifest, in: root)
        try Self.write("org.example.good", Self.manifest("org.example.good"), in: root)
        let catalog = ExtensionCatalog.load(environment: ["XDG_DATA_HOME": root.path, "XDG_DATA_DIRS": "/nonexistent"], executablePath: nil)
        #expect(catalog.services.map(\.identifier) == ["org.example.good"])
        let problem = try #require(catalog.problems.first)
        #expect(problem.file.hasSuffix("org.example.c.orkextension/manifest.json"))
        #expect(problem.field == field, "\(problem)")
        #expect(problem.description.contains(problem.file) && problem.description.contains(field))
    }

    @Test("The shipped extensions are found beside the running program, after the installed ones")
    func shippedBesideExecutable() throws {
        let root = try makeTemporaryDirectory(prefix: "ork-catalog")
        defer { try? FileManager.default.removeItem(at: root) }
        let bin = root.appendingPathComponent("build")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let product = bin.appendingPathComponent("replay-extension-rtmp")
        try Data("#!/bin/sh\n".utf8).write(to: product)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: product.path)
        let environment = ["XDG_DATA_HOME": root.appendingPathComponent("none").path, "XDG_DATA_DIRS": "/nonexistent"]
        let built = ExtensionCatalog.load(environment: environment, executablePath: bin.appendingPathComponent("replay").path)
        #expect(built.service("org.openreplaykit.rtmp")?.executable == product.path)
        // Installed under PREFIX/share (PREFIX being the program's folder's parent): that one wins.
        let prefixShare = root
        try Self.write("org.openreplaykit.rtmp", Self.manifest("org.openreplaykit.rtmp"), in: prefixShare.appendingPathComponent("share"))
        let installed = ExtensionCatalog.load(environment: environment, executablePath: bin.appendingPathComponent("replay").path)
        #expect(installed.service("org.openreplaykit.rtmp")?.executable.hasSuffix("org.openreplaykit.rtmp.orkextension/upload") == true)
        #expect(installed.services.count == 1)
    }

    @Test("A setup extension is found by its identifier, is no service, and the shipped RTMP one names its own")
    func setupExtensions() throws {
        let root = try makeTemporaryDirectory(prefix: "ork-catalog")
        defer { try? FileManager.default.removeItem(at: root) }
        let bin = root.appendingPathComponent("build")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for product in ["replay-extension-rtmp", "replay-extension-rtmp-setup"] {
            let file = bin.appendingPathComponent(product)
            try Data("#!/bin/sh\n".utf8).write(to: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: file.path)
        }
        let environment = ["XDG_DATA_HOME": root.appendingPathComponent("none").path, "XDG_DATA_DIRS": "/nonexistent"]
        let catalog = ExtensionCatalog.load(environment: environment, executablePath: bin.appendingPathComponent("replay").path)
        #expect(catalog.services.map(\.identifier) == ["org.openreplaykit.rtmp"])
        let service = try #require(catalog.service("org.openreplaykit.rtmp"))
        #expect(service.setupExtension == "org.openreplaykit.rtmp.setup")
        let setup = try #require(catalog.setupExtension("org.openreplaykit.rtmp.setup"))
        #expect(setup.kind == .broadcastSetup && setup.appGroup == service.appGroup)
        #expect(setup.executable == bin.appendingPathComponent("replay-extension-rtmp-setup").path)
        #expect(catalog.setupExtension("org.openreplaykit.rtmp") == nil, "an upload extension is no setup extension")
    }
}
