import Testing
import Foundation
import ReplayIPC
@testable import ReplayDaemon

@Suite("Session state machine: idle → starting → recording → stopping → idle")
struct SessionStateMachineTests {
    static func session(_ id: String, pid: Int32 = 100, path: String = "/tmp/a.mp4") -> SessionStateMachine.Session {
        .init(id: id, clientPID: pid, options: RecordingOptions(outputPath: path, display: ":9"),
              startedAt: Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test func aWholeRecording() {
        var machine = SessionStateMachine()
        let a = Self.session("a")
        #expect(machine.isIdle && machine.current == nil && machine.statusState == nil)
        #expect(machine.startRequested(a) == .prepare(a))
        #expect(machine.state == .starting(a, stopRequested: false))
        #expect(machine.statusState == .starting)
        #expect(machine.prepareSucceeded(id: "a") == .beginRecording)
        #expect(machine.state == .recording(a))
        #expect(machine.statusState == .running)
        #expect(machine.stopRequested() == .stopRecorder(a))
        #expect(machine.state == .stopping(a))
        #expect(machine.stopRequested() == .waitForEnd(a), "a second stop waits for the same end")
        #expect(machine.runEnded(id: "a") == .sessionEnded(a))
        #expect(machine.isIdle)
        #expect(machine.runEnded(id: "a") == .ignore, "an end is reported once")
    }

    @Test func aSecondStartIsRefusedNamingTheFirst() {
        var machine = SessionStateMachine()
        let a = Self.session("a", pid: 4242, path: "/home/u/Videos/first.mp4")
        _ = machine.startRequested(a)
        for state in ["starting", "recording", "stopping"] {
            if state == "recording" { _ = machine.prepareSucceeded(id: "a") }
            if state == "stopping" { _ = machine.stopRequested() }
            guard case .reject(let error) = machine.startRequested(Self.session("b")) else {
                Issue.record("a second session started while \(state)")
                continue
            }
            #expect(error.code == .sessionActive)
            #expect(error.message.contains("/home/u/Videos/first.mp4"))
            #expect(error.message.contains("pid 4242"))
            #expect(error.message.contains("since "))
            #expect(error.message.contains("replay stop"))
            #expect(machine.current?.id == "a")
        }
    }

    @Test func aStopWhileStartingIsRememberedAndFinishesAtOnce() {
        var machine = SessionStateMachine()
        let a = Self.session("a")
        _ = machine.startRequested(a)
        #expect(machine.stopRequested() == .waitForEnd(a))
        #expect(machine.state == .starting(a, stopRequested: true))
        #expect(machine.prepareSucceeded(id: "a") == .beginAndStop)
        #expect(machine.state == .stopping(a))
        #expect(machine.runEnded(id: "a") == .sessionEnded(a))
        #expect(machine.isIdle)
    }

    @Test func aFailedPrepareReturnsToIdle() {
        var machine = SessionStateMachine()
        _ = machine.startRequested(Self.session("a"))
        #expect(machine.prepareFailed(id: "b") == nil)
        #expect(machine.prepareFailed(id: "a")?.id == "a")
        #expect(machine.isIdle)
        #expect(machine.startRequested(Self.session("c")) == .prepare(Self.session("c")))
    }

    @Test func stopWhenIdleSaysNothingIsRecording() {
        var machine = SessionStateMachine()
        #expect(machine.stopRequested() == .nothingRecording)
        #expect(machine.isIdle)
    }

    @Test func outcomesOfAnotherSessionAreIgnored() {
        var machine = SessionStateMachine()
        _ = machine.startRequested(Self.session("a"))
        #expect(machine.prepareSucceeded(id: "zzz") == .discard)
        #expect(machine.runEnded(id: "a") == .ignore, "cannot end before it records")
        _ = machine.prepareSucceeded(id: "a")
        #expect(machine.runEnded(id: "zzz") == .ignore)
        #expect(machine.current?.id == "a")
    }
}

@Suite("Idle exit")
struct IdleExitPolicyTests {
    @Test func leavesAfterTheLimitOfContinuousIdleness() {
        var policy = IdleExitPolicy(limit: .seconds(60))
        let t0 = ContinuousClock.now
        let steps: [(busy: Bool, at: Duration, leave: Bool)] = [
            (false, .zero, false),
            (false, .seconds(59), false),
            (true, .seconds(59.5), false),  // busy resets the clock
            (false, .seconds(60), false),
            (false, .seconds(119), false),
            (false, .seconds(120), true),
        ]
        for step in steps {
            let leave = policy.update(busy: step.busy, now: t0 + step.at)
            #expect(leave == step.leave, "at \(step.at)")
        }
    }

    @Test(arguments: [nil, Duration.zero])
    func zeroOrNilNeverLeaves(_ limit: Duration?) {
        var policy = IdleExitPolicy(limit: limit)
        let t0 = ContinuousClock.now
        let first = policy.update(busy: false, now: t0)
        let later = policy.update(busy: false, now: t0 + .seconds(100_000))
        #expect(!first && !later)
    }
}

@Suite("Wire values")
struct WireValueTests {
    @Test(arguments: [
        ("1280x720+0+0", Region(width: 1280, height: 720, x: 0, y: 0)),
        ("640x480+10+20", Region(width: 640, height: 480, x: 10, y: 20)),
        ("800x600", Region(width: 800, height: 600, x: 0, y: 0)),
    ])
    func regionsParse(_ text: String, _ region: Region) {
        #expect(Region(geometry: text) == region)
    }

    @Test(arguments: ["", "x", "1280x", "1280x720+0", "0x720+0+0", "1280x720+a+0", "1280*720", "1280x720+0+0+0"])
    func badRegionsDoNot(_ text: String) {
        #expect(Region(geometry: text) == nil)
    }

    @Test func runtimeFolderFollowsXDGRuntimeDir() {
        #expect(ControlPaths.forCurrentUser(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"]).socket == "/run/user/1000/openreplaykit/replayd.sock")
        #expect(ControlPaths.forCurrentUser(environment: [:]).directory == "/tmp/openreplaykit-\(getuid())")
        #expect(ControlPaths.forCurrentUser(environment: ["XDG_RUNTIME_DIR": "relative"]).directory.hasPrefix("/tmp/openreplaykit-"))
    }
}

@Suite("What replayd checks in any client's options")
struct RecordingOptionsCheckTests {
    @Test func goodOptionsPass() throws {
        try RecordingOptions(outputPath: "/tmp/a.mp4", display: ":0").validate()
    }

    @Test(arguments: [
        (RecordingOptions(outputPath: "a.mp4", display: ":0"), ReplayError.Code.badRequest),
        (RecordingOptions(outputPath: "/a.mp4", display: ":0", framesPerSecond: 0), .badRequest),
        (RecordingOptions(outputPath: "/a.mp4", durationSeconds: -1, display: ":0"), .badRequest),
        (RecordingOptions(outputPath: "/a.mp4", display: ""), .noDisplay),
        (RecordingOptions(outputPath: "/a.mp4", display: ":0", region: Region(width: 10, height: 10, x: -1, y: 0)), .regionOutsideScreen),
    ])
    func badOptionsAreRefused(_ options: RecordingOptions, _ code: ReplayError.Code) {
        #expect(throws: ReplayError.self) { try options.validate() }
        do { try options.validate() } catch { #expect(error.code == code, "\(error.message)") }
    }
}
