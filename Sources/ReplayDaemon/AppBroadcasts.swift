import ReplayIPC
import ReplayCapture
import ReplayEngine
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An app's own broadcast (`RPBroadcastActivityViewController`, `RPBroadcastController`) and the
/// picker an app shows for the person's broadcast (`RPSystemBroadcastPickerView`). See
/// docs/PROTOCOL.md, "In-app broadcasts".
///
/// An app's broadcast is an app session (slot `app-broadcast` of its pid) carried by the same
/// extension host as the person's broadcast (`BroadcastHost`, Broadcasts.swift), one broadcast at
/// a time. What differs lives here:
/// - what goes out is what an app's recording holds (`appOnly`: the app's windows and sound, never
///   the screen);
/// - every start shows the pairing prompt, naming the app and the service, and nothing remembers it;
/// - the broadcast pauses by itself when another application takes the focus (`FocusWatcher`), and
///   only the app resumes it; the app hears both (`appBroadcastPaused`);
/// - the person's broadcast, a system recording, the indicator or the app leaving end it, as they end
///   the app's other sessions.
extension RecordingSessions {
    nonisolated func registerAppBroadcastMethods(in router: inout ControlRouter) {
        router.on(AppPickBroadcastServiceRequest.self) { [self] request, _ throws(ReplayError) in
            try await pickServiceForApp(request).get()
        }
        router.on(AppStartBroadcastRequest.self) { [self] request, context throws(ReplayError) in
            try await AppSessionAnswer(status: startAppBroadcast(request, pid: context.peer.pid, connection: context.connection).get())
        }
        router.on(AppPauseBroadcastRequest.self) { [self] _, context throws(ReplayError) in
            try await AppSessionAnswer(status: setAppBroadcastPaused(true, slot: Self.appBroadcastSlot(context.peer.pid), reason: nil).get())
        }
        router.on(AppResumeBroadcastRequest.self) { [self] _, context throws(ReplayError) in
            try await AppSessionAnswer(status: setAppBroadcastPaused(false, slot: Self.appBroadcastSlot(context.peer.pid), reason: nil).get())
        }
        router.on(AppFinishBroadcastRequest.self) { [self] _, context throws(ReplayError) in
            try await AppSessionAnswer(status: finishAppBroadcast(pid: context.peer.pid).get())
        }
    }

    static func appBroadcastSlot(_ pid: Int32) -> SessionSlot { SessionSlot(kind: .appBroadcast, owner: pid) }

    // MARK: the picker

    /// Shows the picker on the app's display (only `preferredExtension` when it names one) and answers
    /// with the person's choice; cancelling is `user-declined`.
    func pickServiceForApp(_ request: AppPickBroadcastServiceRequest) async -> Result<AppBroadcastServiceAnswer, ReplayError> {
        if let problem = await Self.displayProblem(request.display) {
            return .failure(ReplayError(.noDisplay, "the app cannot show the broadcast picker: \(problem)."))
        }
        let catalog = ExtensionCatalog.load(environment: ProcessInfo.processInfo.environment, executablePath: ExtensionCatalog.currentExecutable())
        for problem in catalog.problems { logger.warning("extension \(problem)") }
        var services = catalog.services
        if let preferred = request.preferredExtension {
            services = services.filter { $0.identifier == preferred }
            guard !services.isEmpty else {
                return .failure(ReplayError(.unknownService, "no broadcast service \"\(preferred)\" is installed (the app's preferred extension): `replay services` lists those that are."))
            }
        }
        let offered = services.map { SystemWindows.PickerService(identifier: $0.identifier, displayName: $0.displayName, iconPath: $0.icon) }
        let choice: SystemWindows.PickerChoice?
        do throws(ReplayError) {
            choice = try await servicePicker.pick(offered, microphone: false, showsMicrophoneButton: request.showsMicrophoneButton,
                                                  display: request.display, paths: paths)
        } catch {
            return .failure(error)
        }
        guard let choice, let manifest = services.first(where: { $0.identifier == choice.identifier }) else {
            return .failure(ReplayError(.userDeclined, "the person cancelled the broadcast in the picker."))
        }
        return .success(AppBroadcastServiceAnswer(identifier: manifest.identifier, displayName: manifest.displayName,
                                                  microphone: request.showsMicrophoneButton && choice.microphone))
    }

    // MARK: starting

    /// Why the app in `slot` cannot start a broadcast now, or nil.
    private func appBroadcastRefusal(_ slot: SessionSlot) -> ReplayError? {
        if let running = slots[.systemRecording]?.machine.current ?? slots[.broadcast]?.machine.current {
            return ReplayError(.unavailable, "the person is \(running.kind == .broadcast ? "broadcasting" : "recording") the screen (session \(running.id)): apps cannot broadcast until it ends.")
        }
        if slots[slot]?.machine.isIdle == false {
            return ReplayError(.sessionActive, "this app is already broadcasting: finish that broadcast first.")
        }
        if let host = broadcastHost {
            return ReplayError(.sessionActive, "a broadcast to \(host.manifest.displayName) is running or finishing (one at a time): try again once it has ended.")
        }
        return nil
    }

    /// Starts the calling app's broadcast: the pairing prompt, then the app's own windows and sound
    /// into a frame ring, the extension started and attached to it, and the focus followed.
    func startAppBroadcast(_ request: AppStartBroadcastRequest, pid: Int32, connection: UInt64) async -> Result<SessionStatus?, ReplayError> {
        guard !isShuttingDown else {
            return .failure(ReplayError(.shuttingDown, "replayd is shutting down. Try again in a moment."))
        }
        let options = request.options
        guard !options.display.isEmpty else {
            return .failure(ReplayError(.noDisplay, "no X display: the app has no DISPLAY, so there is nothing of it to broadcast."))
        }
        let slot = Self.appBroadcastSlot(pid)
        if let refusal = appBroadcastRefusal(slot) { return .failure(refusal) }
        let catalog = ExtensionCatalog.load(environment: ProcessInfo.processInfo.environment, executablePath: ExtensionCatalog.currentExecutable())
        guard let manifest = catalog.service(request.service) else {
            let known = catalog.services.map(\.identifier)
            return .failure(ReplayError(.unknownService, "no broadcast service \"\(request.service)\" is installed: "
                + (known.isEmpty ? "none is." : "choose one of \(known.joined(separator: ", ")).")))
        }
        guard let identity = AppIdentity.of(pid: pid) else {
            return .failure(ReplayError(.badRequest, "the process that asked (pid \(pid)) is gone."))
        }
        switch await askPairing(identity, service: manifest, display: options.display, microphone: options.microphone) {
        case .failure(let error): return .failure(error)
        case .success(.deny):
            logger.notice("the person did not pair the app with the service", metadata: ["app": "\(identity.executable)", "service": "\(manifest.identifier)"])
            return .failure(ReplayError(.userDeclined, "the person did not allow \(identity.name) to broadcast to \(manifest.displayName)."))
        case .success(.allow):
            break
        }
        // The service's setup extension asks the person next (sign-in, title), told of this app, unless the
        // app gave the setup info itself (BroadcastSetup.swift).
        let setup: BroadcastSetupOutcome?
        let application = BroadcastApplicationInfo(bundleIdentifier: identity.identifier, name: identity.name, iconPath: identity.iconPath)
        switch await runBroadcastSetup(for: manifest, in: catalog,
                                       options: BroadcastOptions(service: manifest.identifier, display: options.display,
                                                                 microphone: options.microphone, setupInfo: request.setupInfo),
                                       application: application) {
        case .success(let outcome): setup = outcome
        case .failure(let error): return .failure(error)
        }
        // The prompt took time: the app may have left, or another session begun.
        guard connectionPIDs.values.contains(pid) else {
            return .failure(ReplayError(.noSession, "the app left while the person was asked."))
        }
        if let refusal = appBroadcastRefusal(slot) { return .failure(refusal) }

        let recordingOptions = RecordingOptions(outputPath: paths.directory, microphone: options.microphone, systemAudio: false,
                                                display: options.display)
        let started = await startSession(in: slot, options: recordingOptions, configuration: Self.appOnly(options, pid: pid), output: .ring,
                                         clientPID: pid, connection: connection)
        guard case .success = started, let session = slots[slot]?.machine.current else { return started }
        if let error = await hostAppBroadcast(manifest, setupInfo: setup?.setupInfo ?? request.setupInfo, slot: slot, sessionID: session.id) {
            return .failure(error)
        }
        if let url = setup?.broadcastURL, broadcastHost?.broadcastURL == nil {
            broadcastHost?.broadcastURL = url
            publishBroadcastUpdate()
        }
        // The extension learns which app it carries (the one annotation: an app's broadcast stays on the app).
        tellExtension(BroadcastAnnotatedEvent(bundleIdentifier: identity.identifier, name: identity.name, iconPath: identity.iconPath))
        do throws(XDisplayError) {
            let sessionID = session.id
            broadcastHost?.focus = try FocusWatcher(display: options.display) { [weak self, tasks] focused in
                tasks.spawn { [weak self] in await self?.appBroadcastFocusChanged(to: focused, slot: slot, sessionID: sessionID) }
            }
        } catch {
            logger.warning("the app's broadcast will not pause when the app loses the focus: \(error.message)")
        }
        await waitUntilCapturing(slot)
        return .success(status(of: slot))
    }

    /// The pairing prompt: the app and the service, asked at every start (never remembered).
    private func askPairing(_ identity: AppIdentity, service: ExtensionManifest, display: String,
                            microphone: Bool) async -> Result<SystemWindows.ConsentAnswer, ReplayError> {
        logger.info("asking the person to pair", metadata: ["app": "\(identity.name)", "service": "\(service.displayName)"])
        switch consentPrompt {
        case .fixed(let answer):
            return .success(answer)
        case .systemWindow:
            let request = SystemWindows.ConsentRequest(display: display, appName: identity.name, appIconPath: identity.iconPath,
                                                       microphone: microphone, serviceName: service.displayName)
            do throws(ReplayError) { return .success(try await SystemWindows.askConsent(request, paths: paths)) }
            catch { return .failure(error) }
        }
    }

    /// Starts `manifest`'s extension for the app's session in `slot` and waits until it has attached
    /// (its frame ring taken); an error when it did not, the session then ended.
    private func hostAppBroadcast(_ manifest: ExtensionManifest, setupInfo: [String: String], slot: SessionSlot,
                                  sessionID: String) async -> ReplayError? {
        let pid: Int32
        do throws(ReplayError) {
            pid = try hostExtension(manifest, slot: slot, sessionID: sessionID, setupInfo: setupInfo)
        } catch {
            slots[slot]?.discardReason = error
            _ = await stop(slot)
            return error
        }
        logger.info("app broadcast extension started", metadata: ["extension": "\(manifest.identifier)", "pid": "\(pid)", "session": "\(sessionID)", "app": "\(slot.owner ?? 0)"])
        return await waitForAttach(pid: pid, slot: slot, sessionID: sessionID)
    }

    // MARK: pausing, finishing

    /// Another application took the focus: the app's broadcast pauses (the first report, the focus at
    /// the start, and replayd's own windows do not count). Only the app resumes it.
    private func appBroadcastFocusChanged(to focused: Int32?, slot: SessionSlot, sessionID: String) {
        guard let host = broadcastHost, host.slot == slot, host.sessionID == sessionID, host.process.isAtWork,
              let owner = slot.owner else { return }
        let first = !host.focusReported
        broadcastHost?.focusReported = true
        guard let focused, !first, !host.paused else { return }
        guard !ProcessTree.members(rootedAt: owner).contains(focused), !ProcessTree.members(rootedAt: getpid()).contains(focused) else { return }
        logger.notice("the app lost the focus: its broadcast pauses", metadata: ["app": "\(owner)", "focused": "\(focused)"])
        _ = setAppBroadcastPaused(true, slot: slot, reason: "the app lost the focus")
    }

    /// Pauses or resumes the app's broadcast in `slot`; the extension and the app hear it.
    func setAppBroadcastPaused(_ on: Bool, slot: SessionSlot, reason: String?) -> Result<SessionStatus?, ReplayError> {
        guard slots[slot]?.machine.current != nil, let ring = slots[slot]?.ring, broadcastHost?.slot == slot else {
            return .failure(ReplayError(.noSession, "this app is not broadcasting: start a broadcast first."))
        }
        if broadcastHost?.paused != on {
            broadcastHost?.paused = on
            ring.setPaused(on)
            tellExtension(BroadcastControlEvent(action: on ? .paused : .resumed))
            if let owner = slot.owner {
                broadcast(AppBroadcastPausedEvent(paused: on, reason: reason), to: connectionsOf(pid: owner))
            }
            logger.info(on ? "app broadcast paused" : "app broadcast resumed", metadata: ["reason": "\(reason ?? "the app asked")"])
        }
        return .success(status(of: slot))
    }

    /// The app finishes its broadcast.
    func finishAppBroadcast(pid: Int32) async -> Result<SessionStatus?, ReplayError> {
        let slot = Self.appBroadcastSlot(pid)
        guard slots[slot]?.machine.isIdle == false else {
            return .failure(ReplayError(.noSession, "this app is not broadcasting."))
        }
        return await finishHostedAppBroadcast(slot)
    }

    /// Ends the app's broadcast in `slot`: the extension hears `broadcastFinished`, the session stops,
    /// and the answer comes once the extension has left.
    func finishHostedAppBroadcast(_ slot: SessionSlot) async -> Result<SessionStatus?, ReplayError> {
        if broadcastHost?.slot == slot { sendFinished() }
        let result = await stop(slot)
        if broadcastHost?.slot == slot { await extensionGone() }
        return result
    }

    /// The person's broadcast takes over: an app's broadcast ends (`interrupted`), and its extension leaves first.
    func interruptAppBroadcast() async {
        guard let host = broadcastHost, host.slot != .broadcast else { return }
        if slots[host.slot]?.machine.isIdle == false {
            logger.notice("a system broadcast interrupts \(host.slot)")
            slots[host.slot]?.discardReason = ReplayError(.interrupted, "the person started broadcasting the screen, which ends apps' broadcasts.")
            _ = await finishHostedAppBroadcast(host.slot)
        } else {
            await extensionGone()
        }
    }
}
