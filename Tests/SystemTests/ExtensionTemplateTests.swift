import Foundation
import ReplayTesting
import Testing

extension SystemTests {
    /// `replay extension new`: the package it writes (against this checkout), and that once its
    /// extension is installed `replay services` lists it. (Building the written package compiles
    /// OpenReplayKit and NIO once more, minutes on a loaded machine: it is done by hand, see
    /// docs/WRITING-AN-EXTENSION.md; here its shape is checked and the built test extension stands
    /// in for its executable.)
    @Suite("replay extension new: the extension template")
    struct ExtensionTemplateTests {
        @Test("The package is written against this checkout, and its installed extension is listed", .timeLimit(.minutes(1)))
        func newExtensionPackage() async throws {
            let root = try makeTemporaryDirectory(prefix: "ork-template")
            defer { try? FileManager.default.removeItem(at: root) }
            let environment = ["HOME": root.path, "XDG_DATA_HOME": root.appendingPathComponent("data").path, "PATH": "/usr/bin:/bin"]
            let made = try await ProcessRunner.run(try Binaries.replay(), arguments: ["extension", "new", "MyStream", "--identifier", "org.example.mystream",
                                                                                    "--directory", root.path], environment: environment, timeout: .seconds(20))
            #expect(made.succeeded, "\(made)")
            let package = root.appendingPathComponent("MyStream")
            #expect(made.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == package.path)
            for file in ["Package.swift", "Sources/mystream-upload/main.swift", "Sources/mystream-upload/SampleHandler.swift",
                         "Extension/manifest.json", "install.sh", "README.md"] {
                #expect(FileManager.default.fileExists(atPath: package.appendingPathComponent(file).path), "\(file) is written")
            }
            // Against this checkout (the one the built replay lives in).
            var checkout = URL(fileURLWithPath: try Binaries.replay()).resolvingSymlinksInPath().deletingLastPathComponent()
            while checkout.path.count > 1, !FileManager.default.fileExists(atPath: checkout.appendingPathComponent("Package.swift").path) {
                checkout = checkout.deletingLastPathComponent()
            }
            let manifestSource = try String(contentsOf: package.appendingPathComponent("Package.swift"), encoding: .utf8)
            #expect(manifestSource.contains(".package(path: \"\(checkout.standardizedFileURL.path)\")"), "\(manifestSource)")
            #expect(manifestSource.contains(".executableTarget(name: \"mystream-upload\""))
            let main = try String(contentsOf: package.appendingPathComponent("Sources/mystream-upload/main.swift"), encoding: .utf8)
            #expect(main.contains("RPBroadcastExtensionMain(SampleHandler.self)"))
            let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: package.appendingPathComponent("Extension/manifest.json"))) as? [String: String])
            #expect(manifest == ["identifier": "org.example.mystream", "displayName": "MyStream", "kind": "broadcast-upload",
                                 "executable": "mystream-upload", "appGroup": "org.example.mystream"])
            let attributes = try FileManager.default.attributesOfItem(atPath: package.appendingPathComponent("install.sh").path)
            #expect((attributes[.posixPermissions] as? Int ?? 0) & 0o111 != 0, "install.sh is executable")

            // Installed as install.sh does (with the built test extension as its executable): listed.
            let installed = root.appendingPathComponent("data/openreplaykit/extensions/org.example.mystream.orkextension")
            try FileManager.default.createDirectory(at: installed, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: package.appendingPathComponent("Extension/manifest.json"), to: installed.appendingPathComponent("manifest.json"))
            try Binaries.copyExecutable(from: try Binaries.path("replay-testextension"), to: installed.appendingPathComponent("mystream-upload").path)
            let services = try await ProcessRunner.run(try Binaries.replay(), arguments: ["services"], environment: environment, timeout: .seconds(20))
            #expect(services.succeeded && services.stdout.contains("org.example.mystream\tMyStream\tno setup"), "\(services)")
            #expect(services.stderr.isEmpty, "the written manifest reads without a problem: \(services.stderr)")

            // The same name again, or a bad one: refused in words.
            let again = try await ProcessRunner.run(try Binaries.replay(), arguments: ["extension", "new", "MyStream", "--directory", root.path],
                                                    environment: environment, timeout: .seconds(20))
            #expect(!again.succeeded && again.stderr.contains("already exists"), "\(again)")
            let bad = try await ProcessRunner.run(try Binaries.replay(), arguments: ["extension", "new", "my stream", "--directory", root.path],
                                                  environment: environment, timeout: .seconds(20))
            #expect(!bad.succeeded && bad.stderr.contains("cannot name a package"), "\(bad)")
        }
    }
}
