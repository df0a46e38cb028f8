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
/// after `BroadcastHostLimits.finishGrace`.
struct SetupExtensionHost {
    var manifest: ExtensionManifest
    var service: ExtensionManifest
    var application: BroadcastApplicationInfo
    var pid: Int32
    var attached = false
    var exited = false
    /// The first answer (or the reason there will be none).
    var answer: Result<BroadcastSetupOutcome, ReplayError>?
    var waiter: CheckedContinuation<Result<BroadcastSetupOutcome, ReplayError>, Never>?
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
        let pid: Int32
        do throws(ReplayError) {
            pid = try launchSetupExtension(setup, display: options.display)
        } catch {
            return .failure(error)
        }
        logger.info("broadcast setup extension started", metadata: ["extension": "\(setup.identifier)", "pid": "\(pid)", "service": "\(service.identifier)"])
        broadcastSetup = SetupExtensionHost(manifest: setup, service: service, application: about, pid: pid)
        let attachTimeout = Task {
            try? await Task.sleep(for: BroadcastHostLimits.attachTimeout)
            self.setupAttachTimedOut(pid: pid)
        }
        // No await since the host was set: its waiter is in place before any answer can come.
        let result = await withCheckedContinuation { broadcastSetup?.waiter = $0 }
        attachTimeout.cancel()
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
        if !host.exited { kill(host.pid, SIGTERM) }
        return true
    }

    // MARK: the setup extension's requests

    func attachSetupExtension(pid: Int32) -> Result<ExtensionSetupAttachAnswer, ReplayError> {
        guard let host = broadcastSetup, host.pid == pid, !host.attached, host.answer == nil else {
            return .failure(ReplayError(.permissionDenied, "only the setup extension replayd started for the broadcast being set up may attach to it (pid \(pid) is not it)."))
        }
        broadcastSetup?.attached = true
        return .success(ExtensionSetupAttachAnswer(identifier: host.manifest.identifier, service: host.service.identifier,
                                                   application: host.application))
    }

    func setupExtensionAnswered(_ answer: Result<BroadcastSetupOutcome, ReplayError>, pid: Int32) -> Result<Void, ReplayError> {
        guard let host = broadcastSetup, host.pid == pid, host.attached else {
            return .failure(ReplayError(.permissionDenied, "pid \(pid) is not the setup extension of the broadcast being set up."))
        }
        guard host.answer == nil else {
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

    /// Records the first answer; the broadcast goes on once the process has left too.
    private func finishSetup(pid: Int32, _ answer: Result<BroadcastSetupOutcome, ReplayError>) {
        guard let host = broadcastSetup, host.pid == pid, host.answer == nil else { return }
        broadcastSetup?.answer = answer
        if !host.exited {
            Task {
                try? await Task.sleep(for: BroadcastHostLimits.finishGrace)
                self.killSetupIfStill(pid: pid)
            }
        }
        resumeSetupWaiterIfDone()
    }

    private func resumeSetupWaiterIfDone() {
        guard let host = broadcastSetup, host.exited, let answer = host.answer else { return }
        broadcastSetup = nil
        host.waiter?.resume(returning: answer)
    }

    private func killSetupIfStill(pid: Int32) {
        guard let host = broadcastSetup, host.pid == pid, !host.exited else { return }
        logger.warning("the setup extension did not leave after its answer: killing it", metadata: ["pid": "\(pid)"])
        kill(pid, SIGKILL)
    }

    private func setupAttachTimedOut(pid: Int32) {
        guard let host = broadcastSetup, host.pid == pid, !host.attached, !host.exited else { return }
        finishSetup(pid: pid, .failure(ReplayError(.extensionFailed, "\(host.manifest.displayName)'s setup (\(host.manifest.identifier)) did not connect to replayd within \(BroadcastHostLimits.attachTimeout): is it an OpenReplayKit setup extension (RPBroadcastSetupExtensionMain)? Its output is in \(setupLogPath(of: host.manifest)).")))
        kill(pid, SIGKILL)
    }

    /// The setup process left, with waitpid's `status`: without an answer, that cancels the broadcast.
    func setupExtensionExited(pid: Int32, status: Int32) {
        guard let host = broadcastSetup, host.pid == pid else { return }
        broadcastSetup?.exited = true
        let signalled = status & 0x7f
        let how = signalled != 0 ? "was killed by signal \(signalled) (\(String(cString: strsignal(signalled))))" : "left with status \((status >> 8) & 0xff)"
        logger.info("the broadcast setup extension \(how)", metadata: ["extension": "\(host.manifest.identifier)", "pid": "\(pid)"])
        if host.answer == nil {
            broadcastSetup?.answer = .failure(ReplayError(.setupCancelled, "\(host.manifest.displayName)'s setup (\(host.manifest.identifier)) \(how) without completing or cancelling the setup: the broadcast does not start. Its output is in \(setupLogPath(of: host.manifest))."))
        }
        resumeSetupWaiterIfDone()
    }

    // MARK: launching

    private func setupLogPath(of manifest: ExtensionManifest) -> String {
        paths.directory + "/extension-\(manifest.identifier).log"
    }

    /// Starts the setup extension as the upload extension is started (Broadcasts.swift's
    /// `launchExtension`), plus `DISPLAY` (and `XAUTHORITY`) for its window.
    private func launchSetupExtension(_ manifest: ExtensionManifest, display: String) throws(ReplayError) -> Int32 {
        let ours = ProcessInfo.processInfo.environment
        var environment = ["PATH": "/usr/local/bin:/usr/bin:/bin", "ORK_REPLAYD_SOCKET": paths.socket,
                           "ORK_EXTENSION_IDENTIFIER": manifest.identifier, "DISPLAY": display]
        for key in ["HOME", "USER", "LOGNAME", "LANG", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
                    "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "ORK_APP_GROUP_STORE"] {
            if let value = ours[key] { environment[key] = value }
        }
        if let folder = manifest.folder { environment["ORK_EXTENSION_FOLDER"] = folder }
        if let group = manifest.appGroup { environment["ORK_APP_GROUP"] = group }
        try paths.prepareDirectory()
        let pid: Int32
        do throws(ReplayError) {
            pid = try Spawn.start(manifest.executable, environment: environment, standardOutput: .file(setupLogPath(of: manifest), append: true),
                                  standardError: .standardOutput, group: .newProcessGroup)
        } catch {
            throw ReplayError(.extensionFailed, "cannot start the setup extension \(manifest.identifier): \(error.message)")
        }
        Task { [weak self] in
            let status = await DedicatedThread.run(named: "setup-extension-reaper") { Spawn.waitForExit(pid) }
            await self?.setupExtensionExited(pid: pid, status: status)
        }
        return pid
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
