import Foundation
import ReplayTesting
import Testing

/// iOS ReplayKit code with only its imports changed to `import OpenReplayKit` compiles: each file of
/// Fixtures/IOSSources (Xcode's two templates, a handler set up in `override init()` with a stats
/// timer and an app-group path, sample inspection, app-side delegates) is type-checked against the
/// built module, alone, in Swift 5 and Swift 6 language modes, and must give no error and no warning.
@Suite("iOS sources compile with only import OpenReplayKit")
struct IOSSourceCompileTests {
    static let package: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" && !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
            url = url.deletingLastPathComponent()
        }
        return url
    }()

    static let fixtures = package.appendingPathComponent("Tests/OpenReplayKitTests/Fixtures/IOSSources")

    static let fixtureNames: [String] = ((try? FileManager.default.contentsOfDirectory(atPath: fixtures.path)) ?? [])
        .filter { $0.hasSuffix(".swift") }.sorted()

    /// What a client of the built OpenReplayKit module passes: its module folder, and the module maps
    /// and include folders of the C modules it imports (internally, but the compiler still loads them).
    static func compilerFlags() throws -> [String] {
        let build = Binaries.directory
        var flags = ["-I", build.appendingPathComponent("Modules").path]
        let fileManager = FileManager.default
        var mapped: Set<String> = []
        let sourceRoots = [package.appendingPathComponent("Sources")]
            + ((try? fileManager.contentsOfDirectory(atPath: package.appendingPathComponent(".build/checkouts").path)) ?? [])
                .map { package.appendingPathComponent(".build/checkouts/\($0)/Sources") }
        for root in sourceRoots {
            for target in (try? fileManager.contentsOfDirectory(atPath: root.path)) ?? [] {
                let folder = root.appendingPathComponent(target)
                let include = folder.appendingPathComponent("include")
                if fileManager.fileExists(atPath: include.path) { flags += ["-Xcc", "-I", "-Xcc", include.path] }
                // A target's own module map (system libraries keep it beside their shim, C targets in include/).
                for map in [folder.appendingPathComponent("module.modulemap"), include.appendingPathComponent("module.modulemap")]
                where fileManager.fileExists(atPath: map.path) {
                    flags += ["-Xcc", "-fmodule-map-file=\(map.path)"]
                    mapped.insert(target)
                }
            }
        }
        // The maps SwiftPM wrote for C targets without one of their own.
        for entry in (try? fileManager.contentsOfDirectory(atPath: build.path)) ?? [] where entry.hasSuffix(".build") {
            let target = String(entry.dropLast(".build".count))
            let map = build.appendingPathComponent(entry).appendingPathComponent("module.modulemap")
            if !mapped.contains(target), fileManager.fileExists(atPath: map.path) { flags += ["-Xcc", "-fmodule-map-file=\(map.path)"] }
        }
        // The system libraries' headers, where pkg-config says (CSecret's, CXCB's).
        let pkgConfig = try ProcessRunner.run("pkg-config", arguments: ["--cflags-only-I", "libsecret-1", "xcb-shm"])
        guard pkgConfig.succeeded else { throw HarnessError("pkg-config failed: \(pkgConfig)") }
        flags += pkgConfig.stdout.split(whereSeparator: \.isWhitespace).flatMap { ["-Xcc", String($0)] }
        return flags
    }

    static func typecheck(_ file: URL, swiftVersion: Int) async throws -> ProcessResult {
        try await ProcessRunner.run("swiftc", arguments: ["-typecheck", "-swift-version", "\(swiftVersion)"] + compilerFlags() + [file.path],
                                    timeout: .seconds(240))
    }

    @Test func everyPatternHasAFixture() {
        // Dropping a fixture would silently drop its pattern from the test below.
        #expect(Self.fixtureNames == ["AppRecorder.swift", "ExtensionMain.swift", "OverrideInitHandler.swift", "SampleInspection.swift", "SetupViewController.swift",
                                      "VideoToolboxEncoder.swift", "XcodeSetupTemplate.swift", "XcodeUploadTemplate.swift"])
    }

    @Test(arguments: fixtureNames, [5, 6])
    func compilesWithoutWarnings(fixture: String, swiftVersion: Int) async throws {
        let result = try await Self.typecheck(Self.fixtures.appendingPathComponent(fixture), swiftVersion: swiftVersion)
        // Only the compiler's words in a failure (the command line is hundreds of flags long).
        let (compiled, warned, diagnostics) = (result.succeeded, result.stderr.contains("warning:"), result.stderr)
        #expect(compiled, "\(fixture), Swift \(swiftVersion):\n\(diagnostics)")
        #expect(!warned, "\(fixture), Swift \(swiftVersion):\n\(diagnostics)")
    }

    /// The harness sees errors: a UIKit-only spelling (not offered, docs/PORTING.md) is refused.
    @Test func aUIKitOnlySpellingIsRefused() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-ios-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("Captured.swift")
        try Data("import OpenReplayKit\nlet captured = UIScreen.main.isCaptured\n".utf8).write(to: source)
        let result = try await Self.typecheck(source, swiftVersion: 6)
        let (compiled, diagnostics) = (result.succeeded, result.stderr)
        #expect(!compiled)
        #expect(diagnostics.contains("cannot find 'UIScreen' in scope"), "\(diagnostics)")
    }
}
