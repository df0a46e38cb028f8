import Testing
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import ReplayIPC
import ReplaySystem
@testable import ReplayDaemon
#if canImport(Glibc)
import Glibc
#endif

/// The owner of replayd's background tasks: children run, are cancelled at shutdown, and none
/// outlives `run()`; a child process whose waiter is cancelled is killed.
@Suite("Task owner")
struct TaskOwnerTests {
    /// Counts what happened to children, from any task.
    final class Tally: Sendable {
        private let state = Mutex<[String]>([])
        func note(_ event: String) { state.withLock { $0.append(event) } }
        var events: [String] { state.withLock { $0 } }
    }

    @Test func childrenRunAndShutdownCancelsThoseStillRunningBeforeRunReturns() async throws {
        let owner = TaskOwner()
        let tally = Tally()
        let started = OneShotSignal()
        let runner = Task { await owner.run() }
        let quick = try #require(owner.spawn { tally.note("quick") })
        await quick.value()
        owner.spawn {
            started.fire()
            do {
                try await Task.sleep(for: .seconds(3600))
                tally.note("slept")
            } catch {
                // What a child does once cancelled is still inside run(): a cleanup that takes time.
                await Self.off(for: .milliseconds(100))
                tally.note("cancelled")
            }
        }
        await started.waitIgnoringCancellation()
        owner.shutdown()
        await runner.value
        #expect(tally.events == ["quick", "cancelled"], "the long child was cancelled and had ended when run() returned")
        #expect(owner.spawn { tally.note("late") } == nil, "work handed in after the shutdown is refused")
        try await Task.sleep(for: .milliseconds(50))
        #expect(!tally.events.contains("late"))
    }

    @Test func workHandedInBeforeRunStartsStillRunsAndEnds() async {
        let owner = TaskOwner()
        let tally = Tally()
        let early = owner.spawn { tally.note("early") }
        owner.shutdown()
        // Handed in before the shutdown: it runs (cancelled), and its end is heard.
        await owner.run()
        await early?.value()
        #expect(early?.hasEnded == true)
        #expect(tally.events == ["early"])
    }

    @Test func cancellingTheRunningTaskCancelsTheChildrenAndRefusesNewWork() async throws {
        let owner = TaskOwner()
        let started = OneShotSignal()
        let runner = Task { await owner.run() }
        let child = try #require(owner.spawn {
            started.fire()
            await OneShotSignal().wait() // only cancellation ends it
        })
        await started.waitIgnoringCancellation()
        runner.cancel()
        await runner.value
        #expect(child.hasEnded)
        #expect(owner.spawn {} == nil)
    }

    @Test func oneChildIsCancelledAloneAndTheOthersGoOn() async throws {
        let owner = TaskOwner()
        let runner = Task { await owner.run() }
        let tally = Tally()
        let release = OneShotSignal()
        let watch = try #require(owner.spawn {
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(500)) }
            tally.note("watch ended")
        })
        let other = try #require(owner.spawn {
            await release.waitIgnoringCancellation()
            tally.note("other ended")
        })
        watch.cancel()
        await watch.value()
        #expect(tally.events == ["watch ended"])
        #expect(!other.hasEnded)
        release.fire()
        await other.value()
        #expect(tally.events == ["watch ended", "other ended"])
        owner.shutdown()
        await runner.value
    }

    @Test func aSignalWakesItsWaitersOnceAndACancelledWaitReturns() async {
        let signal = OneShotSignal()
        let waiter = Task { await signal.wait() }
        let cancelled = Task { await signal.wait() }
        cancelled.cancel()
        await cancelled.value
        #expect(!signal.hasFired)
        signal.fire()
        signal.fire()
        await waiter.value
        await signal.wait()
        #expect(signal.hasFired)
    }

    @Test func aCancelledWaitForAChildProcessKillsIt() async throws {
        let pid = try Spawn.start("/bin/sleep", arguments: ["3600"], standardOutput: .file("/dev/null", append: true),
                                  standardError: .standardOutput, group: .newProcessGroup)
        let waiter = Task { await ChildProcess.waitForExit(pid, threadName: "test-reaper") }
        try await Task.sleep(for: .milliseconds(100))
        #expect(kill(pid, 0) == 0, "the child runs while it is waited for")
        waiter.cancel()
        let status = await waiter.value
        #expect(ExtensionLauncher.exit(waitStatus: status) == .killed(signal: SIGKILL, name: String(cString: strsignal(SIGKILL))))
        #expect(kill(pid, 0) == -1 && errno == ESRCH, "killed and reaped: no such process")
    }

    @Test func aChildProcessThatLeavesByItselfIsReaped() async throws {
        let pid = try Spawn.start("/bin/sh", arguments: ["-c", "exit 3"], standardOutput: .file("/dev/null", append: true),
                                  standardError: .standardOutput, group: .newProcessGroup)
        let status = await ChildProcess.waitForExit(pid, threadName: "test-reaper")
        #expect(ExtensionLauncher.exit(waitStatus: status) == .exited(status: 3))
    }

    @Test func theServersTasksAreCancelledAtGracefulShutdownAndNoneOutlivesRun() async throws {
        let paths = try ControlServerTests.temporaryPaths()
        defer { try? FileManager.default.removeItem(atPath: paths.directory) }
        let logger = Logger(label: "test")
        let server = ControlServer(configuration: .init(paths: paths, idleExit: nil, software: "replayd test"), logger: logger)
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup)], logger: logger))
        let tally = Tally()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            for _ in 0..<200 where !DaemonLauncher.isListening(socketPath: paths.socket) {
                try await Task.sleep(for: .milliseconds(10))
            }
            // A watch as the sessions start them: it sleeps until cancelled.
            let started = OneShotSignal()
            let watch = try #require(server.tasks.spawn {
                started.fire()
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(500)) }
                await Self.off(for: .milliseconds(100))
                tally.note("watch ended")
            })
            await started.waitIgnoringCancellation()
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            #expect(watch.hasEnded)
        }
        #expect(tally.events == ["watch ended"], "the watch had ended when the server's run() returned")
        #expect(server.tasks.spawn {} == nil, "and the server takes no more work")
    }

    /// Waits `duration` on a thread, ignoring cancellation (a cleanup that takes time).
    static func off(for duration: Duration) async {
        let micros = UInt32(duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000)
        await DedicatedThread.run(named: "test-wait") { _ = usleep(micros) }
    }
}
