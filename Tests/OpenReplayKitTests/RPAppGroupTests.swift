import Foundation
@testable import OpenReplayKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The app groups' file store: secrets only their owner reads (0600 in 0700 folders), one folder per
/// group, and an extension kept to the group its manifest names.
@Suite("RPAppGroup: the shared secrets' file store")
struct RPAppGroupTests {
    /// A fresh XDG_DATA_HOME for one test.
    private func withDataHome(_ body: (String) throws -> Void) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ork-appgroup-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try body(root + "/data")
    }

    private func mode(_ path: String) -> mode_t {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
    }

    @Test("Strings set are read back, by another instance too; the file is 0600 and its folders 0700")
    func roundTripAndPermissions() throws {
        try withDataHome { dataHome in
            let environment = ["XDG_DATA_HOME": dataHome]
            let group = try RPAppGroup(identifier: "org.example.stream", environment: environment)
            #expect(try group.string(forKey: "streamKey") == nil, "nothing before the first write")
            #expect(access(group.folder, F_OK) != 0, "reading makes no folder")
            // Even with a permissive umask the store is private.
            let old = umask(0)
            defer { umask(old) }
            try group.set("live_1234", forKey: "streamKey")
            try group.set("rtmp://ingest.example.com/app", forKey: "url")

            #expect(group.file == dataHome + "/openreplaykit/app-groups/org.example.stream/secrets.json")
            #expect(mode(group.file) == 0o600)
            #expect(mode(group.folder) == 0o700)
            #expect(mode(dataHome + "/openreplaykit/app-groups") == 0o700)

            let again = try RPAppGroup(identifier: "org.example.stream", environment: environment)
            #expect(try again.string(forKey: "streamKey") == "live_1234")
            #expect(try again.string(forKey: "url") == "rtmp://ingest.example.com/app")
            #expect(again.store == .file(group.file))
            try again.removeValue(forKey: "streamKey")
            #expect(try group.string(forKey: "streamKey") == nil)
            #expect(try group.string(forKey: "url") == "rtmp://ingest.example.com/app")
            #expect(mode(group.file) == 0o600, "a rewrite keeps the file private")
        }
    }

    @Test("Another group sees none of a group's secrets")
    func groupsAreApart() throws {
        try withDataHome { dataHome in
            let environment = ["XDG_DATA_HOME": dataHome]
            try RPAppGroup(identifier: "org.example.one", environment: environment).set("secret-one", forKey: "password")
            let other = try RPAppGroup(identifier: "org.example.two", environment: environment)
            #expect(try other.string(forKey: "password") == nil)
            #expect(access(other.folder, F_OK) != 0, "no folder for a group never written")
        }
    }

    @Test("An extension opens only the group its manifest names; an app opens any of its groups")
    func extensionMembership() throws {
        try withDataHome { dataHome in
            let app = ["XDG_DATA_HOME": dataHome]
            try RPAppGroup(identifier: "org.example.stream", environment: app).set("k", forKey: "streamKey")
            #expect(throws: Never.self) { try RPAppGroup(identifier: "org.example.other", environment: app) }

            let member = app.merging(["ORK_EXTENSION_IDENTIFIER": "org.example.stream.upload", "ORK_APP_GROUP": "org.example.stream"]) { $1 }
            #expect(try RPAppGroup(identifier: "org.example.stream", environment: member).string(forKey: "streamKey") == "k")
            let refused = #expect(throws: RPAppGroupError.self) { try RPAppGroup(identifier: "org.example.other", environment: member) }
            #expect(refused?.message.contains("belongs to the app group org.example.stream") == true, "\(String(describing: refused))")

            let none = app.merging(["ORK_EXTENSION_IDENTIFIER": "org.example.lonely"]) { $1 }
            let noGroup = #expect(throws: RPAppGroupError.self) { try RPAppGroup(identifier: "org.example.stream", environment: none) }
            #expect(noGroup?.message.contains("belongs to no app group") == true, "\(String(describing: noGroup))")
        }
    }

    @Test("Identifiers that are not reverse-DNS are refused (no path can escape the store)",
          arguments: ["..", "../etc", "org/example", "single", "org..example", ""])
    func badIdentifiers(_ identifier: String) throws {
        #expect(throws: RPAppGroupError.self) { try RPAppGroup(identifier: identifier, environment: ["XDG_DATA_HOME": "/tmp/ork-unused"]) }
    }

    @Test("Writers at the same time lose nothing (each rewrite is under the group's lock)")
    func concurrentWriters() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ork-appgroup-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let environment = ["XDG_DATA_HOME": root]
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for writer in 0..<4 {
                tasks.addTask {
                    let group = try RPAppGroup(identifier: "org.example.busy", environment: environment)
                    for index in 0..<15 { try group.set("\(writer)-\(index)", forKey: "w\(writer)k\(index)") }
                }
            }
            try await tasks.waitForAll()
        }
        let group = try RPAppGroup(identifier: "org.example.busy", environment: environment)
        for writer in 0..<4 {
            for index in 0..<15 { #expect(try group.string(forKey: "w\(writer)k\(index)") == "\(writer)-\(index)") }
        }
    }
}
