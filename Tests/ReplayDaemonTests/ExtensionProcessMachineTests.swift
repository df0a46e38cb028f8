import Testing
import ReplayIPC
@testable import ReplayDaemon

/// The life of an extension's process, without a process: every event is fed to the machine with
/// its instant (a test clock), and what it asks its owner to do is checked.
@Suite("Extension process machine: launched → attached → finishing → leaving → exited")
struct ExtensionProcessMachineTests {
    typealias Machine = ExtensionProcessMachine<Int>

    /// A test clock: an instant, moved by hand.
    struct TestClock {
        let start = ContinuousClock.now
        var now: ContinuousClock.Instant
        init() { now = start }
        mutating func advance(by duration: Duration) { now += duration }
    }

    static let upload = ExtensionProcess.Identity(kind: .broadcastUpload, displayName: "Seed Service", identifier: "org.example.seed",
                                                  logPath: "/run/user/1000/openreplaykit/extension-org.example.seed.log")
    static let setup = ExtensionProcess.Identity(kind: .broadcastSetup, displayName: "Seed Service", identifier: "org.example.seed.setup",
                                                 logPath: "/run/user/1000/openreplaykit/extension-org.example.seed.setup.log")

    static func uploadMachine(_ clock: TestClock, memory: Int = 50) -> Machine {
        Machine(pid: 4242, identity: upload, limits: .upload(memoryMegabytes: memory), launchedAt: clock.now)
    }

    /// Launched, attached with one waiter resumed.
    static func attached(_ clock: inout TestClock) -> Machine {
        var machine = uploadMachine(clock)
        #expect(waits(machine.waitForAttach(1)))
        clock.advance(by: .milliseconds(300))
        guard case .accept(let resumed) = machine.attachRequested(at: clock.now) else {
            Issue.record("the attach was refused")
            return machine
        }
        #expect(resumed == [1])
        return machine
    }

    static func waits(_ action: Machine.WaitAction) -> Bool {
        if case .wait = action { return true }
        return false
    }

    static func failure(_ action: Machine.TickAction) -> Machine.Failed? {
        if case .fail(let failed) = action { return failed }
        return nil
    }

    static func none(_ action: Machine.TickAction) -> Bool {
        if case .none = action { return true }
        return false
    }

    @Test func aWholeLifeAsAsked() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        #expect(machine.isAtWork && machine.isAttached)
        #expect(Self.waits(machine.waitForExit(7)))
        // Heartbeats every second for a minute: no hang.
        for _ in 0..<60 {
            clock.advance(by: .seconds(1))
            machine.heartbeat(at: clock.now)
            #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 30)))
        }
        let told = machine.finish()
        #expect(told?.sendFinish == true && told?.resume == [])
        #expect(machine.finish() == nil, "broadcastFinished is sent once")
        #expect(!machine.isAtWork && machine.isAttached)
        guard case .awaitExit(let again) = machine.release(at: clock.now) else { Issue.record("not released"); return }
        #expect(!again.sendFinish)
        let left = machine.exited(.exited(status: 0))
        #expect(left?.failed == nil, "leaving after broadcastFinished is no failure")
        #expect(left?.resume == [7] && left?.forget == true)
        #expect(machine.isDone && machine.failure == nil)
        #expect(machine.exited(.exited(status: 0)) == nil, "an exit is reported once")
        if case .stopWatching = machine.tick(at: clock.now, residentMegabytes: nil) {} else { Issue.record("still watched") }
    }

    @Test func aCrashEndsTheBroadcastNamingTheSignal() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        #expect(Self.waits(machine.waitForExit(7)))
        let left = machine.exited(.killed(signal: 6, name: "Aborted"))
        #expect(left?.failed?.error.code == .extensionFailed)
        #expect(left?.failed?.error.message == "Seed Service (org.example.seed) crashed: it was killed by signal 6 (Aborted) during the broadcast. Its output is in /run/user/1000/openreplaykit/extension-org.example.seed.log.")
        #expect(left?.failed?.kill == false, "it is gone already")
        #expect(left?.resume == [7] && left?.forget == false, "its session still has to end")
        #expect(machine.failure == left?.failed?.error)
        // The session ends then: the host is forgotten.
        guard case .forget = machine.release(at: clock.now) else { Issue.record("not forgotten"); return }
        #expect(machine.isDone)
    }

    @Test func aHangIsNoHeartbeatForTheHangTimeout() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        machine.heartbeat(at: clock.now)
        clock.advance(by: BroadcastHostLimits.hangTimeout)
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 10)), "the timeout itself is still patience")
        clock.advance(by: .milliseconds(500))
        let failed = Self.failure(machine.tick(at: clock.now, residentMegabytes: 10))
        #expect(failed?.error.message == "Seed Service stopped answering (no heartbeat for 6.0 seconds): it hangs, and was stopped.")
        #expect(failed?.kill == true)
        clock.advance(by: .seconds(1))
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 10)), "a failure is carried out once")
        // Killed, it leaves: no second reason.
        #expect(machine.exited(.killed(signal: 9, name: "Killed"))?.failed == nil)
        #expect(machine.failure?.message.contains("hangs") == true)
    }

    @Test func noHeartbeatIsAskedOnceToldToFinish() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        _ = machine.finish()
        clock.advance(by: .seconds(30))
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 10)))
    }

    @Test func theMemoryLimit() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        #expect(machine.wantsMemoryReading)
        clock.advance(by: .milliseconds(500))
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 50)), "at the limit is within it")
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: nil)), "no reading, no verdict")
        let failed = Self.failure(machine.tick(at: clock.now, residentMegabytes: 61.27))
        #expect(failed?.error.code == .extensionFailed)
        #expect(failed?.error.message == "Seed Service used 61.3 MB of memory, over its limit of 50 MB (replayd --extension-memory-mb): it was stopped.")
        #expect(failed?.kill == true)
        #expect(!machine.wantsMemoryReading, "measured no more once failed")
    }

    @Test func theMemoryLimitHoldsWhileFinishingToo() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        _ = machine.release(at: clock.now)
        let failed = Self.failure(machine.tick(at: clock.now, residentMegabytes: 200))
        #expect(failed?.kill == true)
    }

    @Test func aSetupExtensionHasNoMemoryLimitNorHeartbeat() {
        var clock = TestClock()
        var machine = Machine(pid: 77, identity: Self.setup, limits: .setup, launchedAt: clock.now)
        _ = machine.attachRequested(at: clock.now)
        #expect(!machine.wantsMemoryReading)
        clock.advance(by: .seconds(60))
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 500)))
    }

    @Test func noAttachWithinTheTimeoutFailsAndResumesItsWaiters() {
        var clock = TestClock()
        var machine = Self.uploadMachine(clock)
        #expect(Self.waits(machine.waitForAttach(1)))
        #expect(Self.waits(machine.waitForAttach(2)))
        clock.advance(by: BroadcastHostLimits.attachTimeout - .milliseconds(1))
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 5)))
        clock.advance(by: .milliseconds(1))
        let failed = Self.failure(machine.tick(at: clock.now, residentMegabytes: 5))
        #expect(failed?.resume == [1, 2] && failed?.kill == true)
        #expect(failed?.error.message == "Seed Service did not connect to replayd within 10.0 seconds: is it an OpenReplayKit extension (RPBroadcastExtensionMain)? Its output is in /run/user/1000/openreplaykit/extension-org.example.seed.log.")
        // Late, it is refused; a new waiter hears the failure at once.
        if case .refuse = machine.attachRequested(at: clock.now) {} else { Issue.record("a failed extension attached") }
        guard case .resume(let error) = machine.waitForAttach(3) else { Issue.record("kept a waiter"); return }
        #expect(error == failed?.error)
    }

    @Test func aSetupThatDoesNotAttachIsNamedAsASetup() {
        var clock = TestClock()
        var machine = Machine(pid: 77, identity: Self.setup, limits: .setup, launchedAt: clock.now)
        clock.advance(by: .seconds(11))
        let failed = Self.failure(machine.tick(at: clock.now, residentMegabytes: nil))
        #expect(failed?.error.code == .extensionFailed)
        #expect(failed?.error.message == "Seed Service's setup (org.example.seed.setup) did not connect to replayd within 10.0 seconds: is it an OpenReplayKit setup extension (RPBroadcastSetupExtensionMain)? Its output is in /run/user/1000/openreplaykit/extension-org.example.seed.setup.log.")
    }

    @Test func anExitWithoutAnAnswerIsTheFailure() {
        // An upload extension that leaves on its own before broadcastFinished.
        var clock = TestClock()
        var upload = Self.attached(&clock)
        let uploadLeft = upload.exited(.exited(status: 3))
        #expect(uploadLeft?.failed?.error.message == "Seed Service (org.example.seed) left with status 3 during the broadcast. Its output is in /run/user/1000/openreplaykit/extension-org.example.seed.log.")
        // A setup extension that leaves without completing or cancelling.
        var setup = Machine(pid: 77, identity: Self.setup, limits: .setup, launchedAt: clock.now)
        _ = setup.attachRequested(at: clock.now)
        #expect(Self.waits(setup.waitForExit(9)))
        let setupLeft = setup.exited(.exited(status: 3))
        #expect(setupLeft?.failed?.error.code == .setupCancelled)
        #expect(setupLeft?.failed?.error.message == "Seed Service's setup (org.example.seed.setup) left with status 3 without completing or cancelling the setup: the broadcast does not start. Its output is in /run/user/1000/openreplaykit/extension-org.example.seed.setup.log.")
        #expect(setupLeft?.resume == [9])
        // One that never attached: its attach waiters hear it too.
        var early = Self.uploadMachine(clock)
        _ = early.waitForAttach(4)
        #expect(early.exited(.killed(signal: 11, name: "Segmentation fault"))?.failed?.resume == [4])
    }

    @Test func anExitAfterItsAnswerIsNone() {
        let clock = TestClock()
        var setup = Machine(pid: 77, identity: Self.setup, limits: .setup, launchedAt: clock.now)
        _ = setup.attachRequested(at: clock.now)
        // It completed: its answer is the release.
        guard case .awaitExit = setup.release(at: clock.now) else { Issue.record("not released"); return }
        let left = setup.exited(.exited(status: 0))
        #expect(left?.failed == nil && left?.forget == true && setup.failure == nil)
    }

    @Test func theGracePeriodAfterTheFinishThenTheKill() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        _ = machine.finish()
        clock.advance(by: .seconds(20))
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 10)), "the grace period starts when the session is over")
        _ = machine.release(at: clock.now)
        clock.advance(by: BroadcastHostLimits.finishGrace - .milliseconds(500))
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 10)))
        clock.advance(by: .milliseconds(500))
        if case .killAfterGrace = machine.tick(at: clock.now, residentMegabytes: 10) {} else { Issue.record("not killed at the end of the grace period") }
        clock.advance(by: .milliseconds(500))
        #expect(Self.none(machine.tick(at: clock.now, residentMegabytes: 10)), "killed once")
        let left = machine.exited(.killed(signal: 9, name: "Killed"))
        #expect(left?.failed == nil, "killed after its time is no failure")
        #expect(left?.forget == true)
    }

    @Test func theGracePeriodOutlivesAFailure() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        _ = machine.fail(ReplayError(.extensionFailed, "Seed Service ended the broadcast: no."), kill: false)
        _ = machine.release(at: clock.now)
        clock.advance(by: BroadcastHostLimits.finishGrace)
        if case .killAfterGrace = machine.tick(at: clock.now, residentMegabytes: nil) {} else { Issue.record("a failed extension stays") }
    }

    @Test func aFinishBeforeTheAttachFreesItsWaiters() {
        let clock = TestClock()
        var machine = Self.uploadMachine(clock)
        _ = machine.waitForAttach(1)
        let told = machine.finish()
        #expect(told?.sendFinish == false, "it has no connection to hear it")
        #expect(told?.resume == [1])
        if case .refuse = machine.attachRequested(at: clock.now) {} else { Issue.record("attached after its finish") }
    }

    @Test func theFirstFailureWins() {
        var clock = TestClock()
        var machine = Self.attached(&clock)
        let first = ReplayError(.extensionFailed, "Seed Service ended the broadcast: the test service refused the stream.")
        #expect(machine.fail(first, kill: false)?.kill == false)
        #expect(machine.fail(ReplayError(.extensionFailed, "later"), kill: true) == nil)
        #expect(machine.failure == first)
        #expect(machine.exited(.exited(status: 0))?.failed == nil)
    }

    @Test func aShutdownFinishesTheOneAtWorkAndKillsTheOneThatNeverAttached() {
        var clock = TestClock()
        var atWork = Self.attached(&clock)
        let shutdown = atWork.shutdown(at: clock.now)
        #expect(shutdown.failed?.error.code == .shuttingDown)
        #expect(shutdown.failed?.kill == false)
        guard case .awaitExit(let told) = shutdown.release else { Issue.record("not released"); return }
        #expect(told.sendFinish)
        clock.advance(by: BroadcastHostLimits.finishGrace)
        if case .killAfterGrace = atWork.tick(at: clock.now, residentMegabytes: nil) {} else { Issue.record("it stays after the shutdown") }

        var launched = Self.uploadMachine(clock)
        _ = launched.waitForAttach(1)
        let early = launched.shutdown(at: clock.now)
        #expect(early.failed?.kill == true && early.failed?.resume == [1])

        // One that had finished already is no failure, and one that has left needs nothing.
        var finishing = Self.attached(&clock)
        _ = finishing.finish()
        #expect(finishing.shutdown(at: clock.now).failed == nil)
        _ = finishing.exited(.exited(status: 0))
        guard case .none = finishing.shutdown(at: clock.now).release else { Issue.record("released after leaving"); return }
    }

    @Test func exitStatusesInWords() {
        #expect(ExtensionLauncher.exit(waitStatus: 3 << 8) == .exited(status: 3))
        #expect(ExtensionLauncher.exit(waitStatus: 6).description.hasPrefix("was killed by signal 6 ("))
        #expect(ExtensionExit.exited(status: 0).description == "left with status 0")
    }

    @Test func theEnvironmentIsCleanAndASetupGetsItsDisplay() {
        let launcher = ExtensionLauncher(paths: ControlPaths(directory: "/run/user/1000/openreplaykit"), tasks: TaskOwner())
        let manifest = ExtensionManifest(identifier: "org.example.seed", displayName: "Seed Service", kind: .broadcastUpload, executable: "/bin/true",
                                         appGroup: "org.example", folder: "/ext/seed")
        let ours = ["HOME": "/home/u", "SECRET": "x", "XAUTHORITY": "/home/u/.Xauthority", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/b"]
        let upload = launcher.environment(for: manifest, display: nil, ours: ours)
        #expect(upload["HOME"] == "/home/u" && upload["SECRET"] == nil && upload["XAUTHORITY"] == nil && upload["DISPLAY"] == nil)
        #expect(upload["ORK_EXTENSION_IDENTIFIER"] == "org.example.seed" && upload["ORK_APP_GROUP"] == "org.example")
        #expect(upload["ORK_EXTENSION_FOLDER"] == "/ext/seed" && upload["DBUS_SESSION_BUS_ADDRESS"] == "unix:path=/b")
        let setup = launcher.environment(for: manifest, display: ":5", ours: ours)
        #expect(setup["DISPLAY"] == ":5" && setup["XAUTHORITY"] == "/home/u/.Xauthority")
        #expect(launcher.logPath(of: manifest) == "/run/user/1000/openreplaykit/extension-org.example.seed.log")
    }
}
