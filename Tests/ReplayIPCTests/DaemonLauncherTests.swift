import Foundation
import ReplayIPC
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `DaemonLauncher` starts a daemon and waits for its word on the inherited pipe (`--ready-fd 3`),
/// here with stand-in programs that say it, die first, or say nothing.
@Suite("Starting replayd on demand")
struct DaemonLauncherTests {
    /// A folder with a 0700 `openreplaykit/` and an executable `name` holding `script`.
    private func setUp(_ script: String) throws -> (root: URL, paths: ControlPaths, program: String) {
        let root = try makeTemporaryDirectory(prefix: "ork-launch")
        let paths = ControlPaths(directory: root.path + "/openreplaykit")
        let program = root.path + "/fake-replayd"
        try Data(script.utf8).write(to: URL(fileURLWithPath: program))
        chmod(program, 0o755)
        return (root, paths, program)
    }

    @Test func itReturnsWhenTheDaemonSaysListening() async throws {
        let (root, paths, program) = try setUp("""
            #!/usr/bin/python3
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); s.settimeout(10)
            assert sys.argv[2:] == ["--ready-fd", "3"], sys.argv
            os.write(3, b"listening\\n"); os.close(3)
            try: s.accept()
            except OSError: pass
            """)
        defer { try? FileManager.default.removeItem(at: root) }
        try await DaemonLauncher.ensureRunning(paths: paths, executable: program, arguments: [paths.socket])
        #expect(DaemonLauncher.isListening(socketPath: paths.socket), "it answers as soon as it said so")
    }

    @Test func aDaemonThatDiesAtStartIsReportedWithItsLastWords() async throws {
        let (root, paths, program) = try setUp("#!/bin/sh\necho 'replayd: the configuration is broken'\nexit 1\n")
        defer { try? FileManager.default.removeItem(at: root) }
        await #expect {
            try await DaemonLauncher.ensureRunning(paths: paths, executable: program)
        } throws: { error in
            (error as? ReplayError)?.message.contains("exited at start: replayd: the configuration is broken") == true
        }
    }

    @Test func aDaemonThatNeverSaysSoTimesOut() async throws {
        let (root, paths, program) = try setUp("#!/bin/sh\nexec sleep 3\n")
        defer { try? FileManager.default.removeItem(at: root) }
        await #expect {
            try await DaemonLauncher.ensureRunning(paths: paths, executable: program, timeout: .milliseconds(300))
        } throws: { error in
            (error as? ReplayError)?.message.contains("did not open \(paths.socket) within") == true
        }
    }
}
