import Foundation
import ReplayTesting
import Testing
@testable import ReplayIPC
#if canImport(Glibc)
import Glibc
#endif

/// `replay` and the library talk only to the person's own replayd: another user who plants a folder,
/// a socket, or a listener in our folder hears nothing (issue 29's "replay trusts a socket another
/// user planted": `broadcast` would have sent the service's password in its setup).
@Suite("A client trusts only its own replayd")
struct SocketTrustTests {
    static let nobody: UInt32 = 65534
    static var isRoot: Bool { getuid() == 0 }

    /// A planted listener as `nobody`, bound in a folder nobody may write, that prints what it
    /// receives from its first connection ("got N" bytes, 0 when the client closed without a word).
    private func plantedListener(at path: String) async throws -> BackgroundProcess {
        let script = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX)
        s.bind(sys.argv[1]); s.listen(4); s.settimeout(30)
        print("listening", flush=True)
        c, _ = s.accept(); c.settimeout(5)
        try: data = c.recv(4096)
        except OSError: data = b""
        print("got", len(data), flush=True)
        """
        let listener = try BackgroundProcess("setpriv", arguments: ["--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups",
                                                                    "/usr/bin/python3", "-c", script, path])
        let deadline = ContinuousClock.now + .seconds(10)
        while !listener.currentOutput.contains("listening") {
            guard ContinuousClock.now < deadline, listener.isRunning else {
                throw HarnessError("the planted listener did not start: \(listener.currentError)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return listener
    }

    private func connectionError(_ socket: String) async -> String {
        do {
            try await ControlConnection.withConnection(socketPath: socket, software: "trust test") { _ in }
            return "connected"
        } catch let error as ReplayError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    /// XDG_RUNTIME_DIR unset: `/tmp/openreplaykit-UID` made by someone else, with their listener in it.
    @Test(.enabled(if: isRoot, "needs root to act as a second user"))
    func aFolderAnotherUserMadeIsRefused() async throws {
        let base = try makeTemporaryDirectory(prefix: "ork-trust")
        defer { try? FileManager.default.removeItem(at: base) }
        chmod(base.path, 0o755)
        let planted = base.path + "/openreplaykit"
        #expect(mkdir(planted, 0o777) == 0 && chmod(planted, 0o777) == 0 && chown(planted, Self.nobody, Self.nobody) == 0)
        let listener = try await plantedListener(at: planted + "/replayd.sock")

        let message = await connectionError(planted + "/replayd.sock")
        await listener.terminate(grace: .milliseconds(100))
        #expect(message.contains("belongs to uid \(Self.nobody), not to you"), "\(message)")
        #expect(message.contains("set XDG_RUNTIME_DIR"), "says what to do: \(message)")
    }

    /// Our own folder, but someone moved their listening socket into it (root can; so can a
    /// program racing a folder left open): the kernel says who listens, and it is not us.
    @Test(.enabled(if: isRoot, "needs root to act as a second user"))
    func aListenerOfAnotherUserInOurFolderHearsNothing() async throws {
        let base = try makeTemporaryDirectory(prefix: "ork-trust")
        defer { try? FileManager.default.removeItem(at: base) }
        let open = base.path + "/open"
        #expect(mkdir(open, 0o777) == 0 && chmod(open, 0o777) == 0 && chmod(base.path, 0o755) == 0)
        let ours = base.path + "/openreplaykit"
        #expect(mkdir(ours, 0o700) == 0)
        let listener = try await plantedListener(at: open + "/replayd.sock")
        // Moved in and made to look like ours: only the peer's credentials still tell.
        #expect(rename(open + "/replayd.sock", ours + "/replayd.sock") == 0)
        #expect(chown(ours + "/replayd.sock", getuid(), getgid()) == 0)

        let message = await connectionError(ours + "/replayd.sock")
        #expect(message.contains("runs as uid \(Self.nobody), not as you"), "\(message)")
        let result = try await listener.waitForExit(timeout: .seconds(10))
        #expect(result.stdout.contains("got 0"), "the planted listener heard nothing, not even a hello: \(result.stdout)")
    }

    /// A folder open to others, or a link to a folder: refused with what to do.
    @Test func aFolderOpenToOthersOrALinkIsRefused() async throws {
        let base = try makeTemporaryDirectory(prefix: "ork-trust")
        defer { try? FileManager.default.removeItem(at: base) }
        let folder = base.path + "/openreplaykit"
        #expect(mkdir(folder, 0o700) == 0 && chmod(folder, 0o755) == 0)
        let open = await connectionError(folder + "/replayd.sock")
        #expect(open.contains("is open to other users (mode 755)") && open.contains("chmod 700"), "\(open)")

        let link = base.path + "/link"
        #expect(symlink(folder, link) == 0 && chmod(folder, 0o700) == 0)
        let linked = await connectionError(link + "/replayd.sock")
        #expect(linked.contains("is not a folder"), "\(linked)")
    }
}
