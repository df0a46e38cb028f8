import ReplayIPC
import ReplayMedia
import Foundation
import ReplaySystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Starts an extension's program, an upload extension (Broadcasts.swift) or a setup extension
/// (BroadcastSetup.swift): one process, as this user, in a process group of its own, with a clean
/// environment (the user's folders and replayd's socket, none of replayd's other variables; a setup
/// extension also the display it shows its window on), its output appended to `extension-ID.log`
/// in replayd's folder; reaped on a thread of its own, by a child of `tasks` (killed if those are
/// cancelled before it has left).
struct ExtensionLauncher {
    var paths: ControlPaths
    var tasks: TaskOwner

    /// Where `manifest`'s output goes.
    func logPath(of manifest: ExtensionManifest) -> String {
        paths.directory + "/extension-\(manifest.identifier).log"
    }

    /// Who `manifest` is, for its process machine.
    func identity(of manifest: ExtensionManifest) -> ExtensionProcess.Identity {
        .init(kind: manifest.kind, displayName: manifest.displayName, identifier: manifest.identifier, logPath: logPath(of: manifest))
    }

    /// The environment `manifest`'s program starts with, from `ours` (replayd's): `display` (and
    /// `XAUTHORITY`) for a setup extension's window. The session bus too: an extension's app group is
    /// in the Secret Service when the desktop has one (RPAppGroup).
    func environment(for manifest: ExtensionManifest, display: String?, ours: [String: String]) -> [String: String] {
        var environment = ["PATH": "/usr/local/bin:/usr/bin:/bin", "ORK_REPLAYD_SOCKET": paths.socket,
                           "ORK_EXTENSION_IDENTIFIER": manifest.identifier]
        var inherited = ["HOME", "USER", "LOGNAME", "LANG", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
                         "DBUS_SESSION_BUS_ADDRESS", "ORK_APP_GROUP_STORE"]
        if let display {
            environment["DISPLAY"] = display
            inherited.append("XAUTHORITY")
        }
        for key in inherited {
            if let value = ours[key] { environment[key] = value }
        }
        if let folder = manifest.folder { environment["ORK_EXTENSION_FOLDER"] = folder }
        if let group = manifest.appGroup { environment["ORK_APP_GROUP"] = group }
        return environment
    }

    /// Starts `manifest`'s program (`display`: a setup extension's) and returns its pid; `exited`
    /// hears how it left (its pid and its exit).
    func launch(_ manifest: ExtensionManifest, display: String? = nil,
                exited: @escaping @Sendable (Int32, ExtensionExit) async -> Void) throws(ReplayError) -> Int32 {
        let environment = environment(for: manifest, display: display, ours: ProcessInfo.processInfo.environment)
        let what = manifest.kind == .broadcastSetup ? "setup extension" : "extension"
        let reaperName = manifest.kind == .broadcastSetup ? "setup-extension-reaper" : "extension-reaper"
        try paths.prepareDirectory()
        // The reaper is handed to `tasks` before the process starts: once they have shut down, no
        // process starts that nothing would reap.
        let (started, handOver) = AsyncStream.makeStream(of: Int32.self)
        defer { handOver.finish() }
        let reaper = tasks.spawn {
            for await pid in started {
                let status = await ChildProcess.waitForExit(pid, threadName: reaperName)
                await exited(pid, Self.exit(waitStatus: status))
            }
        }
        guard reaper != nil else {
            throw ReplayError(.shuttingDown, "replayd is shutting down: the \(what) \(manifest.identifier) was not started.")
        }
        let pid: Int32
        do throws(ReplayError) {
            pid = try Spawn.start(manifest.executable, environment: environment, standardOutput: .file(logPath(of: manifest), append: true),
                                  standardError: .standardOutput, group: .newProcessGroup)
        } catch {
            throw ReplayError(.extensionFailed, "cannot start the \(what) \(manifest.identifier): \(error.message)")
        }
        handOver.yield(pid)
        return pid
    }

    /// waitpid's `status` in words.
    static func exit(waitStatus status: Int32) -> ExtensionExit {
        let signal = status & 0x7f
        guard signal != 0 else { return .exited(status: (status >> 8) & 0xff) }
        return .killed(signal: signal, name: String(cString: strsignal(signal)))
    }
}

extension RecordingSessions {
    var extensionLauncher: ExtensionLauncher { ExtensionLauncher(paths: paths, tasks: tasks) }
}

/// Waiting for a child process replayd started (an extension, a system window) to leave.
enum ChildProcess {
    /// Waits on a thread of its own until `pid` has left, and reaps it: its wait status. Cancelled
    /// before that, it kills the process (SIGKILL) and still waits, so that none outlives its waiter.
    static func waitForExit(_ pid: Int32, threadName: String) async -> Int32 {
        // Set once the process has left but before it is reaped: until then its pid cannot be another's.
        let left = Mutex(false)
        return await withTaskCancellationHandler {
            await DedicatedThread.run(named: threadName) {
                var info = siginfo_t()
                while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
                left.withLock { $0 = true }
                return Spawn.waitForExit(pid)
            }
        } onCancel: {
            left.withLock { left in
                if !left { kill(pid, SIGKILL) }
            }
        }
    }
}
