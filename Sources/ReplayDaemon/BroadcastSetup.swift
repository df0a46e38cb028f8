import ReplayIPC
import ReplayCapture
import ReplayMedia
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A broadcast's **setup extension** (docs/PROTOCOL.md, "Setup extensions"), from its start until
/// it has answered and left.
///
/// replayd starts it, as it starts an upload extension (one process, as the user, a clean
/// environment, its output appended to `extension-ID.log`), plus the display it shows its window on.
/// It attaches (its pid by `SO_PEERCRED` must be the one started), learns which application the
/// broadcast is of, shows its window, and answers once: complete (setup info and URL for the upload
/// extension) or cancel (the broadcast does not start; its reason goes to the person). Leaving
/// without an answer cancels too. The broadcast goes on only once the setup process has left (its
/// window is gone before the screen is captured); one that lingers after its answer is killed
/// after `BroadcastHostLimits.finishGrace`. The process's life is its `ExtensionProcessMachine`
/// (its answer is its release; a cancel, its failure), as an upload extension's.
struct SetupExtensionHost {
    typealias Answer = Result<BroadcastSetupOutcome, ReplayError>
    var manifest: ExtensionManifest
    var service: ExtensionManifest
    var application: BroadcastApplicationInfo
    /// The setup's process: its pid, who waits for it to leave (with the answer), its first failure.
    var process: ExtensionProcessMachine<CheckedContinuation<Answer, Never>>
    var pid: Int32 { process.pid }
    /// What it completed the request with, when that was its first answer.
    var completed: BroadcastSetupOutcome?
    /// The watch (`watchSetupExtension`), a child of the sessions' `tasks`: its attach and its grace period.
    var monitor: OwnedTask?

    /// It answered (or will not: it failed, was cancelled, or left).
    var answered: Bool { completed != nil || process.failure != nil }

    /// The answer the broadcast waits for, once the process has left.
    var answer: Answer {
        if let completed { return .success(completed) }
        return .failure(process.failure ?? ReplayError(.setupCancelled, "\(manifest.displayName)'s setup (\(manifest.identifier)) ended without completing or cancelling the setup: the broadcast does not start."))
    }
}

/// What a setup extension completed the request with.
struct BroadcastSetupOutcome: Sendable, Equatable {
    var broadcastURL: String?
    var setupInfo: [String: String]
}

extension RecordingSessions {
    nonisolated func registerBroadcastSetupMethods(in router: inout ControlRouter) {
        router.on(ExtensionSetupAttachRequest.self) { [self] _, context throws(ReplayError) in
            try await attachSetupExtension(pid: context.peer.pid).get()
        }
        router.on(ExtensionSetupCompleteRequest.self) { [self] request, context throws(ReplayError) in
            try await setupExtensionAnswered(.success(BroadcastSetupOutcome(broadcastURL: request.broadcastURL, setupInfo: request.setupInfo)),
                                             pid: context.peer.pid).get()
            return EmptyAnswer()
        }
        router.on(ExtensionSetupCancelRequest.self) { [self] request, context throws(ReplayError) in
            try await setupExtensionCancelled(request, pid: context.peer.pid).get()
            return EmptyAnswer()
        }
    }

    /// Runs `service`'s setup extension when its manifest names one and `options` carry no setup
    /// values (`--setup`): what the extension completed the request with, nil when no setup ran,
    /// or why the broadcast must not start (cancelled, not installed, left without an answer).
    /// `application` is what the setup is told the broadcast is of (an in-app broadcast gives the
    /// app's identity); nil: the focused application, as for a system broadcast.
    func runBroadcastSetup(for service: ExtensionManifest, in catalog: ExtensionCatalog, options: BroadcastOptions,
                           application: BroadcastApplicationInfo? = nil) async -> Result<BroadcastSetupOutcome?, ReplayError> {
        guard let setupID = service.setupExtension, options.setupInfo.isEmpty else { return .success(nil) }
        guard let setup = catalog.setupExtension(setupID) else {
            return .failure(ReplayError(.unknownService, "\(service.displayName) (\(service.identifier)) sets up its broadcasts with the setup extension \(setupID), which is not installed: reinstall the service, or give its settings with `replay broadcast --setup KEY=VALUE`."))
        }
        guard broadcastSetup == nil else {
            return .failure(ReplayError(.sessionActive, "another broadcast is being set up (\(broadcastSetup?.manifest.identifier ?? "?")): finish or cancel it first."))
        }
        let about: BroadcastApplicationInfo
        if let application {
            about = application
        } else {
            about = await Self.broadcastApplication(display: options.display)
        }
        guard broadcastSetup == nil else {
            return .failure(ReplayError(.sessionActive, "another broadcast is being set up (\(broadcastSetup?.manifest.identifier ?? "?")): finish or cancel it first."))
        }
        guard !isShuttingDown else {
            return .failure(ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment."))
        }
        let launcher = extensionLauncher
        let pid: Int32
        do throws(ReplayError) {
            pid = try launcher.launch(setup, display: options.display) { [weak self] pid, exit in await self?.setupExtensionExited(pid: pid, exit) }
        } catch {
            return .failure(error)
        }
        logger.info("broadcast setup extension started", metadata: ["extension": "\(setup.identifier)", "pid": "\(pid)", "service": "\(service.identifier)"])
        let process = ExtensionProcessMachine<CheckedContinuation<SetupExtensionHost.Answer, Never>>(
            pid: pid, identity: launcher.identity(of: setup), limits: .setup, launchedAt: now())
        broadcastSetup = SetupExtensionHost(manifest: setup, service: service, application: about, process: process)
        broadcastSetup?.monitor = tasks.spawn { await self.watchSetupExtension(pid: pid) }
        // No await since the host was set: its waiter is in place before any answer can come.
        let result = await withCheckedContinuation { continuation in
            guard case .wait? = broadcastSetup?.process.waitForExit(continuation) else {
                continuation.resume(returning: broadcastSetup?.answer ?? .failure(ReplayError(.setupCancelled, "the setup ended as it started.")))
                return
            }
        }
        switch result {
        case .success(let outcome):
            logger.info("broadcast setup complete", metadata: ["extension": "\(setup.identifier)", "keys": "\(outcome.setupInfo.keys.sorted())"])
            return .success(outcome)
        case .failure(let error):
            logger.info("no broadcast: \(error.message)")
            return .failure(error)
        }
    }

    /// Cancels the setup running now (`replay stop`, Ctrl-C on `replay broadcast`): true when there was one.
    func cancelBroadcastSetup(_ reason: String) -> Bool {
        guard let host = broadcastSetup else { return false }
        finishSetup(pid: host.pid, .failure(ReplayError(.setupCancelled, reason)))
        if !host.process.hasExited { kill(host.pid, SIGTERM) }
        return true
    }

    /// replayd shuts down: a setup at work is cancelled (one that never attached, killed), and killed
    /// if it does not leave within the grace period.
    func shutDownBroadcastSetup() {
        guard let host = broadcastSetup, let shutdown = broadcastSetup?.process.shutdown(at: now()), let failed = shutdown.failed else { return }
        logger.notice("the broadcast setup ends: \(failed.error.message)", metadata: ["extension": "\(host.manifest.identifier)", "pid": "\(host.pid)"])
        kill(host.pid, failed.kill ? SIGKILL : SIGTERM)
    }

    /// Waits until the setup extension (if any) has left.
    func setupExtensionGone() async {
        guard broadcastSetup != nil else { return }
        _ = await withCheckedContinuation { continuation in
            guard case .wait? = broadcastSetup?.process.waitForExit(continuation) else {
                continuation.resume(returning: broadcastSetup?.answer ?? .failure(ReplayError(.setupCancelled, "the setup has left.")))
                return
            }
        }
    }

    // MARK: the setup extension's requests

    func attachSetupExtension(pid: Int32) -> Result<ExtensionSetupAttachAnswer, ReplayError> {
        guard let host = broadcastSetup, host.pid == pid, case .accept? = broadcastSetup?.process.attachRequested(at: now()) else {
            return .failure(ReplayError(.permissionDenied, "only the setup extension replayd started for the broadcast being set up may attach to it (pid \(pid) is not it)."))
        }
        return .success(ExtensionSetupAttachAnswer(identifier: host.manifest.identifier, service: host.service.identifier,
                                                   application: host.application))
    }

    func setupExtensionAnswered(_ answer: SetupExtensionHost.Answer, pid: Int32) -> Result<Void, ReplayError> {
        guard let host = broadcastSetup, host.pid == pid, host.process.isAttached else {
            return .failure(ReplayError(.permissionDenied, "pid \(pid) is not the setup extension of the broadcast being set up."))
        }
        guard !host.answered else {
            return .failure(ReplayError(.badRequest, "the setup was already answered (or cancelled): one answer only."))
        }
        finishSetup(pid: pid, answer)
        return .success(())
    }

    /// `cancelRequest(withError:)`: the broadcast does not start, and the person reads why.
    func setupExtensionCancelled(_ request: ExtensionSetupCancelRequest, pid: Int32) -> Result<Void, ReplayError> {
        let code = request.code.map { " (\(request.domain ?? "error") \($0))" } ?? ""
        let name = broadcastSetup.map { "\($0.manifest.displayName)'s setup (\($0.manifest.identifier))" } ?? "the setup extension"
        return setupExtensionAnswered(.failure(ReplayError(.setupCancelled, "\(name) cancelled the broadcast: \(request.message)\(code).")), pid: pid)
    }

    // MARK: ending

    /// Records the first answer; its process has the grace period to leave, and the broadcast goes on once it has.
    private func finishSetup(pid: Int32, _ answer: SetupExtensionHost.Answer) {
        guard let host = broadcastSetup, host.pid == pid, !host.answered else { return }
        switch answer {
        case .success(let outcome): broadcastSetup?.completed = outcome
        case .failure(let error): _ = broadcastSetup?.process.fail(error, kill: false)
        }
        _ = broadcastSetup?.process.release(at: now())
    }

    /// Twice a second until the setup has left, its machine's watch: no attach within
    /// `attachTimeout` ends the setup (killed); one that stays after its answer's grace period is killed.
    private func watchSetupExtension(pid: Int32) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(500))
            guard broadcastSetup?.pid == pid, let action = broadcastSetup?.process.tick(at: now(), residentMegabytes: nil) else { return }
            switch action {
            case .none:
                continue
            case .stopWatching:
                return
            case .killAfterGrace:
                logger.warning("the setup extension did not leave after its answer: killing it", metadata: ["pid": "\(pid)"])
                kill(pid, SIGKILL)
            case .fail(let failed):
                // It did not attach: that is its answer, and it goes.
                _ = broadcastSetup?.process.release(at: now())
                if failed.kill { kill(pid, SIGKILL) }
            }
        }
    }

    /// The setup process left (`exit`, from waitpid): without an answer, that cancels the broadcast.
    func setupExtensionExited(pid: Int32, _ exit: ExtensionExit) {
        guard broadcastSetup?.pid == pid, let left = broadcastSetup?.process.exited(exit), let host = broadcastSetup else { return }
        logger.info("the broadcast setup extension \(exit)", metadata: ["extension": "\(host.manifest.identifier)", "pid": "\(pid)"])
        broadcastSetup = nil
        host.monitor?.cancel()
        for waiter in left.resume { waiter.resume(returning: host.answer) }
    }

    /// The application a system broadcast is of: the one with the focus on `display` (as the
    /// window manager says); empty strings when none has it (the screen itself is broadcast).
    static func broadcastApplication(display: String) async -> BroadcastApplicationInfo {
        var focused: Int32?
        let first = AsyncStream<Int32?>.makeStream()
        if let watcher = try? FocusWatcher(display: display, changed: { first.continuation.yield($0) }) {
            var iterator = first.stream.makeAsyncIterator()
            focused = await iterator.next() ?? nil
            watcher.stop()
        }
        // replayd's own windows (the recording indicator) are no application's.
        let identity = focused.flatMap { $0 == getpid() ? nil : AppIdentity.of(pid: $0) }
        return BroadcastApplicationInfo(bundleIdentifier: identity?.identifier ?? "", name: identity?.name ?? "", iconPath: identity?.iconPath)
    }
}
