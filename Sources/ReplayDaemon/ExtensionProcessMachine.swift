package import ReplayIPC
import Foundation

/// How an extension's process left: waitpid's status, in words.
package enum ExtensionExit: Sendable, Equatable, CustomStringConvertible {
    /// It called exit: its status.
    case exited(status: Int32)
    /// A signal ended it: its number and its name (`strsignal`).
    case killed(signal: Int32, name: String)

    /// "was killed by signal 6 (Aborted)", "left with status 3".
    package var description: String {
        switch self {
        case .exited(let status): "left with status \(status)"
        case .killed(let signal, let name): "was killed by signal \(signal) (\(name))"
        }
    }
}

/// The names an extension process's machine uses (apart from it: they do not depend on its waiters).
package enum ExtensionProcess {
    /// Who the extension is, for the words of its failures.
    package struct Identity: Sendable, Equatable {
        package var kind: ExtensionManifest.Kind
        package var displayName: String
        package var identifier: String
        /// Where its output goes (`extension-ID.log`).
        package var logPath: String

        package init(kind: ExtensionManifest.Kind, displayName: String, identifier: String, logPath: String) {
            self.kind = kind
            self.displayName = displayName
            self.identifier = identifier
            self.logPath = logPath
        }
    }

    package struct Limits: Sendable, Equatable {
        package var attachTimeout: Duration
        /// No heartbeat for this long: it hangs. Nil: it sends none (a setup extension).
        package var hangTimeout: Duration?
        package var finishGrace: Duration
        /// Over this (its own dirtied pages, in MB) it is stopped; nil: no limit (a setup extension).
        package var memoryMegabytes: Int?

        package init(attachTimeout: Duration = BroadcastHostLimits.attachTimeout, hangTimeout: Duration?,
                     finishGrace: Duration = BroadcastHostLimits.finishGrace, memoryMegabytes: Int?) {
            self.attachTimeout = attachTimeout
            self.hangTimeout = hangTimeout
            self.finishGrace = finishGrace
            self.memoryMegabytes = memoryMegabytes
        }

        /// An upload extension's: `BroadcastHostLimits`, and its memory limit (`replayd --extension-memory-mb`).
        package static func upload(memoryMegabytes: Int) -> Limits {
            Limits(hangTimeout: BroadcastHostLimits.hangTimeout, memoryMegabytes: memoryMegabytes)
        }

        /// A setup extension's: no heartbeat, no memory limit.
        package static let setup = Limits(hangTimeout: nil, memoryMegabytes: nil)
    }
}

/// The life of one extension process replayd started, an upload extension (Broadcasts.swift) or a
/// setup extension (BroadcastSetup.swift): launched → attached → finishing → leaving → exited.
///
/// - **launched**: started; it must attach (come for its samples or its request) within
///   `attachTimeout`. Those who wait for the attach wait here.
/// - **attached**: at work; an upload extension sends a heartbeat at least every `hangTimeout`.
/// - **finishing**: told to finish (`broadcastFinished`) while its session still ends.
/// - **leaving**: its work is over (the session ended, the setup answered): it has `finishGrace` to
///   leave before it is killed.
/// - **exited**: gone. Leaving before **finishing** is leaving without an answer: a failure.
///
/// The first failure (a crash, a hang, the memory limit, no attach, one the owner reports) is kept
/// beside the state: it is the reason the person reads, and later failures only kill.
///
/// A value type with no I/O and no clock: instants come in with the events, and each event returns
/// what the owner must do (resume its waiters, send `broadcastFinished`, kill, fail with a reason).
/// `Waiter` is the owner's handle for one who waits (a continuation; a number in the tests).
package struct ExtensionProcessMachine<Waiter: Sendable>: Sendable {
    package typealias Instant = ContinuousClock.Instant

    package typealias Identity = ExtensionProcess.Identity
    package typealias Limits = ExtensionProcess.Limits

    package enum State: Sendable {
        /// Started at `since`; `attachWaiters` wait for it to attach.
        case launched(since: Instant, attachWaiters: [Waiter])
        case attached(lastHeartbeat: Instant)
        /// Told to finish; its session still ends.
        case finishing(attached: Bool)
        /// Its work is over: it is killed at `deadline` (nil once it was).
        case leaving(attached: Bool, deadline: Instant?)
        /// Gone; `released`: its work was over too (its owner may forget it).
        case exited(ExtensionExit, released: Bool)
    }

    /// The process, from its start to its end (it names the extension in every request it makes).
    package let pid: Int32
    package let identity: Identity
    package let limits: Limits
    package private(set) var state: State
    /// The first reason it ended in error, nil while all goes as asked.
    package private(set) var failure: ReplayError?
    /// Those who wait for it to leave.
    private var exitWaiters: [Waiter] = []

    package init(pid: Int32, identity: Identity, limits: Limits, launchedAt: Instant) {
        self.pid = pid
        self.identity = identity
        self.limits = limits
        self.state = .launched(since: launchedAt, attachWaiters: [])
    }

    // MARK: questions

    /// It attached and has not left: its requests are heard.
    package var isAttached: Bool {
        switch state {
        case .attached: true
        case .finishing(let attached), .leaving(let attached, _): attached
        case .launched, .exited: false
        }
    }

    /// Attached and not yet told to finish: at work.
    package var isAtWork: Bool {
        if case .attached = state { return true }
        return false
    }

    /// It may attach now: launched, and not failed.
    package var awaitsAttach: Bool {
        if failure == nil, case .launched = state { return true }
        return false
    }

    package var hasExited: Bool {
        if case .exited = state { return true }
        return false
    }

    /// Gone, and its work over: the owner forgets it.
    package var isDone: Bool {
        if case .exited(_, released: true) = state { return true }
        return false
    }

    /// Its memory is to be measured for the next `tick` (it has a limit, runs, and has not failed).
    package var wantsMemoryReading: Bool {
        limits.memoryMegabytes != nil && failure == nil && !hasExited
    }

    // MARK: attaching

    package enum WaitAction: Sendable {
        /// The waiter is kept: it is resumed by a later action.
        case wait
        /// Resume it now: with the failure, or nil (attached, or its work ended before).
        case resume(ReplayError?)
    }

    /// Someone waits until it has attached.
    package mutating func waitForAttach(_ waiter: Waiter) -> WaitAction {
        guard failure == nil, case .launched(let since, var waiters) = state else { return .resume(failure) }
        waiters.append(waiter)
        state = .launched(since: since, attachWaiters: waiters)
        return .wait
    }

    package enum AttachAction: Sendable {
        /// Welcome it; resume these waiters (with nil).
        case accept(resume: [Waiter])
        /// Not now (attached already, failed, or its work is over): permission denied.
        case refuse
    }

    /// It came to attach at `now`.
    package mutating func attachRequested(at now: Instant) -> AttachAction {
        guard failure == nil, case .launched(_, let waiters) = state else { return .refuse }
        state = .attached(lastHeartbeat: now)
        return .accept(resume: waiters)
    }

    /// It says it lives.
    package mutating func heartbeat(at now: Instant) {
        if case .attached = state { state = .attached(lastHeartbeat: now) }
    }

    // MARK: finishing

    package struct FinishAction: Sendable {
        /// Tell it `broadcastFinished` (an upload extension that attached, once).
        package var sendFinish: Bool
        /// Waiters for an attach that will not come now: resume them with nil (the owner re-checks its session).
        package var resume: [Waiter]
    }

    /// Its session is ending: it is told to finish. Nil when it was already (or has left).
    package mutating func finish() -> FinishAction? {
        switch state {
        case .launched(_, let waiters):
            state = .finishing(attached: false)
            return FinishAction(sendFinish: false, resume: waiters)
        case .attached:
            state = .finishing(attached: true)
            return FinishAction(sendFinish: true, resume: [])
        case .finishing, .leaving, .exited:
            return nil
        }
    }

    package enum ReleaseAction: Sendable {
        /// Wait for it to leave (`tick` kills it at the end of the grace period).
        case awaitExit(FinishAction)
        /// It has left already: forget it.
        case forget
        /// Released before.
        case none
    }

    /// Its work is over at `now` (the session ended, the setup answered): it has `finishGrace` to leave.
    package mutating func release(at now: Instant) -> ReleaseAction {
        let deadline = now + limits.finishGrace
        switch state {
        case .launched, .attached:
            let told = finish()
            state = .leaving(attached: told?.sendFinish ?? false, deadline: deadline)
            return .awaitExit(told ?? FinishAction(sendFinish: false, resume: []))
        case .finishing(let attached):
            state = .leaving(attached: attached, deadline: deadline)
            return .awaitExit(FinishAction(sendFinish: false, resume: []))
        case .leaving, .exited(_, released: true):
            return .none
        case .exited(let exit, released: false):
            state = .exited(exit, released: true)
            return .forget
        }
    }

    /// replayd shuts down at `now`: an extension at work is told to finish, and every one that has not
    /// left by the end of the grace period is killed; one that never attached is killed at once. The
    /// shutdown is the failure of one that had not finished.
    package mutating func shutdown(at now: Instant) -> ShutdownAction {
        guard !hasExited else { return ShutdownAction(failed: nil, release: .none) }
        let neverAttached = if case .launched = state { true } else { false }
        let failed = isAtWork || neverAttached
            ? fail(ReplayError(.shuttingDown, "replayd is shutting down: \(identity.displayName) (\(identity.identifier)) was stopped."), kill: neverAttached)
            : nil
        return ShutdownAction(failed: failed, release: release(at: now))
    }

    package struct ShutdownAction: Sendable {
        /// The failure to carry out (nil: it had finished already, or failed before).
        package var failed: Failed?
        package var release: ReleaseAction
    }

    // MARK: failing

    /// A failure to carry out: log `error`, kill the process when `kill`, resume `resume` with `error`.
    package struct Failed: Sendable {
        package var error: ReplayError
        package var kill: Bool
        package var resume: [Waiter]
    }

    /// It failed (the first reason wins: nil when it had failed before). `kill`: it cannot be trusted to leave.
    package mutating func fail(_ error: ReplayError, kill: Bool) -> Failed? {
        guard failure == nil else { return nil }
        failure = error
        var waiters: [Waiter] = []
        if case .launched(let since, let attachWaiters) = state {
            waiters = attachWaiters
            state = .launched(since: since, attachWaiters: [])
        }
        return Failed(error: error, kill: kill && !hasExited, resume: waiters)
    }

    package enum TickAction: Sendable {
        case none
        /// Carry out this failure (it is recorded).
        case fail(Failed)
        /// It did not leave within the grace period: kill it.
        case killAfterGrace
        /// It has left: stop watching.
        case stopWatching
    }

    /// The watch, at `now` (twice a second): the end of the grace period, then (unless it failed
    /// already) its memory (`residentMegabytes`, when measured), the attach it owes, its heartbeat.
    package mutating func tick(at now: Instant, residentMegabytes: Double?) -> TickAction {
        switch state {
        case .exited:
            return .stopWatching
        case .leaving(let attached, let deadline?) where now >= deadline:
            state = .leaving(attached: attached, deadline: nil)
            return .killAfterGrace
        default:
            break
        }
        guard failure == nil else { return .none }
        if let limit = limits.memoryMegabytes, let resident = residentMegabytes, resident > Double(limit) {
            let figure = String(format: "%.1f", resident)
            return fail(.extensionFailed, "\(identity.displayName) used \(figure) MB of memory, over its limit of \(limit) MB (replayd --extension-memory-mb): it was stopped.")
        }
        switch state {
        case .launched(let since, _) where now - since >= limits.attachTimeout:
            return fail(.extensionFailed, attachTimeoutMessage)
        case .attached(let lastHeartbeat):
            guard let hangTimeout = limits.hangTimeout, now - lastHeartbeat > hangTimeout else { return .none }
            return fail(.extensionFailed, "\(identity.displayName) stopped answering (no heartbeat for \(hangTimeout)): it hangs, and was stopped.")
        default:
            return .none
        }
    }

    private mutating func fail(_ code: ReplayError.Code, _ message: String) -> TickAction {
        fail(ReplayError(code, message), kill: true).map { .fail($0) } ?? .none
    }

    private var attachTimeoutMessage: String {
        switch identity.kind {
        case .broadcastUpload:
            "\(identity.displayName) did not connect to replayd within \(limits.attachTimeout): is it an OpenReplayKit extension (RPBroadcastExtensionMain)? Its output is in \(identity.logPath)."
        case .broadcastSetup:
            "\(identity.displayName)'s setup (\(identity.identifier)) did not connect to replayd within \(limits.attachTimeout): is it an OpenReplayKit setup extension (RPBroadcastSetupExtensionMain)? Its output is in \(identity.logPath)."
        }
    }

    // MARK: leaving

    /// Someone waits until it has left: `.wait`, or `.resume` when it has.
    package mutating func waitForExit(_ waiter: Waiter) -> WaitAction {
        guard !hasExited else { return .resume(failure) }
        exitWaiters.append(waiter)
        return .wait
    }

    package struct ExitAction: Sendable {
        package var exit: ExtensionExit
        /// It left without an answer (before it was told to finish): carry out this failure.
        package var failed: Failed?
        /// Resume those who waited for it to leave (with `failure`).
        package var resume: [Waiter]
        /// Its work was over too: forget it.
        package var forget: Bool
    }

    /// The process left (`exit`, from waitpid). Nil when it had been reported before.
    package mutating func exited(_ exit: ExtensionExit) -> ExitAction? {
        let released: Bool
        var failed: Failed?
        switch state {
        case .exited:
            return nil
        case .launched, .attached:
            released = false
            failed = fail(ReplayError(identity.kind == .broadcastUpload ? .extensionFailed : .setupCancelled, leftWithoutAnswerMessage(exit)), kill: false)
        case .finishing:
            released = false
        case .leaving:
            released = true
        }
        state = .exited(exit, released: released)
        let waiters = exitWaiters
        exitWaiters = []
        return ExitAction(exit: exit, failed: failed, resume: waiters, forget: released)
    }

    private func leftWithoutAnswerMessage(_ exit: ExtensionExit) -> String {
        switch identity.kind {
        case .broadcastUpload:
            let crashed = if case .killed = exit { "crashed: it " } else { "" }
            return "\(identity.displayName) (\(identity.identifier)) \(crashed)\(exit) during the broadcast. Its output is in \(identity.logPath)."
        case .broadcastSetup:
            return "\(identity.displayName)'s setup (\(identity.identifier)) \(exit) without completing or cancelling the setup: the broadcast does not start. Its output is in \(identity.logPath)."
        }
    }
}
