import Foundation

/// A small tmpfs mounted on a fresh temporary folder: a disk that fills up, or a read-only folder
/// that even root cannot write. Needs root with `CAP_SYS_ADMIN` (see ``isSupported``).
public final class TmpfsMount: Sendable {
    /// Where it is mounted.
    public let path: String
    private let parent: URL

    private init(path: String, parent: URL) {
        self.path = path
        self.parent = parent
    }

    /// Whether `mount -t tmpfs` works here (tried once, on a throwaway folder).
    public static let isSupported: Bool = {
        guard let parent = try? makeTemporaryDirectory(prefix: "ork-mount-probe") else { return false }
        defer { try? FileManager.default.removeItem(at: parent) }
        guard let mounted = try? ProcessRunner.run("mount", arguments: ["-t", "tmpfs", "-o", "size=64k", "tmpfs", parent.path],
                                                   timeout: .seconds(10)), mounted.succeeded else { return false }
        _ = try? ProcessRunner.run("umount", arguments: [parent.path], timeout: .seconds(10))
        return true
    }()

    /// Mounts a tmpfs of `sizeKiB` KiB, read-only when `readOnly`.
    public static func mount(sizeKiB: Int, readOnly: Bool = false) async throws -> TmpfsMount {
        let parent = try makeTemporaryDirectory(prefix: "ork-tmpfs")
        let path = parent.appendingPathComponent("disk").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let options = "size=\(sizeKiB)k,mode=0777" + (readOnly ? ",ro" : "")
        let result = try await ProcessRunner.run("mount", arguments: ["-t", "tmpfs", "-o", options, "tmpfs", path], timeout: .seconds(10))
        guard result.succeeded else {
            try? FileManager.default.removeItem(at: parent)
            throw HarnessError("cannot mount a tmpfs on \(path): \(result.stderr)")
        }
        return TmpfsMount(path: path, parent: parent)
    }

    /// Bytes still free.
    public var freeBytes: Int {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return 0 }
        return Int(stats.f_bavail) * Int(stats.f_frsize)
    }

    /// Writes a file of zeros that leaves about `bytes` free.
    public func fill(leavingFree bytes: Int) throws {
        let size = max(0, freeBytes - bytes)
        let url = URL(fileURLWithPath: path).appendingPathComponent("filler")
        guard FileManager.default.createFile(atPath: url.path, contents: Data(count: size)) else {
            throw HarnessError("cannot write \(size) bytes of filler in \(path)")
        }
    }

    /// Unmounts (lazily if busy) and removes the folder.
    public func unmount() async {
        let result = try? await ProcessRunner.run("umount", arguments: [path], timeout: .seconds(10))
        if result?.succeeded != true {
            _ = try? await ProcessRunner.run("umount", arguments: ["-l", path], timeout: .seconds(10))
        }
        try? FileManager.default.removeItem(at: parent)
    }
}
