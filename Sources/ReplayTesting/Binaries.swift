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

extension Binaries {
    /// Copies the executable at `source` to `destination` (mode 0755) through a descriptor no child
    /// process inherits (`O_CLOEXEC`). `FileManager.copyItem`'s descriptor is inherited by any
    /// process another thread forks meanwhile, and while such a child lives the copy cannot be
    /// started: `ETXTBSY`, "Text file busy" (an installed test extension failed so once).
    public static func copyExecutable(from source: String, to destination: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: source))
        let descriptor = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
        guard descriptor >= 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: destination, NSLocalizedDescriptionKey: "cannot create \(destination): \(String(cString: strerror(errno)))"])
        }
        defer { close(descriptor) }
        var written = 0
        try data.withUnsafeBytes { bytes in
            while written < bytes.count {
                let n = write(descriptor, bytes.baseAddress! + written, bytes.count - written)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else {
                    throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: destination, NSLocalizedDescriptionKey: "cannot write \(destination): \(String(cString: strerror(errno)))"])
                }
                written += n
            }
        }
    }
}
