public import Foundation

/// Finds the executables this package builds (`replay`, `replayd`, `replay-testcontent`).
///
/// `ORK_BIN_DIR` wins (the Makefile sets it); else the folder of the running test bundle
/// (`.build/<triple>/<config>/`), else `.build/debug` of the package this file is in.
public enum Binaries {
    /// The folder the built executables are in.
    public static var directory: URL {
        if let explicit = ProcessInfo.processInfo.environment["ORK_BIN_DIR"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit)
        }
        let candidates = [URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()]
            + CommandLine.arguments.filter { $0.contains(".xctest") }.map { URL(fileURLWithPath: $0) }
        for candidate in candidates {
            var url = candidate
            while url.path != "/" {
                if url.pathExtension == "xctest" { return url.deletingLastPathComponent() }
                url = url.deletingLastPathComponent()
            }
            if candidate.path.contains("/.build") { return candidate.deletingLastPathComponent() }
        }
        var package = URL(fileURLWithPath: #filePath)
        while package.path != "/" && !FileManager.default.fileExists(atPath: package.appendingPathComponent("Package.swift").path) {
            package = package.deletingLastPathComponent()
        }
        return package.appendingPathComponent(".build/debug")
    }

    /// The path of a built executable; throws with what to do when it is not built.
    public static func path(_ name: String) throws -> String {
        let url = directory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw HarnessError("\(name) is not built in \(directory.path): run `swift build` (or set ORK_BIN_DIR)")
        }
        return url.path
    }

    /// The `replay` CLI.
    public static func replay() throws -> String { try path("replay") }
    /// The `replayd` daemon.
    public static func replayd() throws -> String { try path("replayd") }
    /// The test content program.
    public static func testContent() throws -> String { try path("replay-testcontent") }
    /// The test "app" that drives the OpenReplayKit library.
    public static func testApp() throws -> String { try path("replay-testapp") }
}
