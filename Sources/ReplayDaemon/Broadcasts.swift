import ReplayIPC
import ReplayEngine
import ReplayCapture
import ReplayMedia
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The person's broadcast and the upload extension that carries it (docs/PROTOCOL.md, "Broadcasts").
///
/// replayd alone starts the extension: one process, as the user, with a clean environment (no
/// variable of replayd's but the user's folders and the socket), its output appended to
/// `extension-ID.log` in replayd's folder. The extension attaches over the control socket (its
/// pid, by `SO_PEERCRED`, must be the one replayd started), fetches the frame ring once
/// (`RingHandover`), and from then on hears pause, resume, finish and annotations as events and
/// says its URL, service info or failure as requests. replayd watches it twice a second: its
/// memory footprint (`Private_Dirty`, see `residentMegabytes`) over the limit, no heartbeat for `BroadcastHostLimits.hangTimeout`, or an exit before the end
/// each end the broadcast with an error that says which; replayd and other sessions go on.
/// The process's life is its `ExtensionProcessMachine`; the launch is `ExtensionLauncher`'s.
struct BroadcastHost {
    var manifest: ExtensionManifest
    /// The session it carries: the person's broadcast (`.broadcast`), or an app's own (AppBroadcasts.swift).
    var slot: SessionSlot = .broadcast
    var sessionID: String
    var setupInfo: [String: String]
    /// The extension's process: launched → attached → finishing → leaving → exited, its pid, who waits
    /// for its attach or its exit (resumed with the broadcast's failure, nil when none), its first failure.
    var process: ExtensionProcessMachine<CheckedContinuation<ReplayError?, Never>>
    var pid: Int32 { process.pid }
    var connection: UInt64?
    var broadcastURL: String?
    var serviceInfo: [String: String]?
    var paused = false
    /// The watch (`watchExtension`), a child of the sessions' `tasks`: its limits, its attach and its grace period.
    var monitor: OwnedTask?
    var focus: FocusWatcher?
    /// The last focused pid annotated (nil: none yet).
    var annotatedPID: Int32?
    /// An app's broadcast: the focus watcher's first report (the focus at the start) came.
    var focusReported = false
    /// Pictures the extension was not ready for, as last read from the ring (kept for the final status).
    var framesDropped = 0
}

extension SessionSlot {
    /// The person's broadcast: one at a time.
    package static let broadcast = SessionSlot(kind: .broadcast)
}

extension RecordingSessions {
    nonisolated func registerBroadcastMethods(in router: inout ControlRouter) {
        router.on(StartBroadcastRequest.self) { [self] request, context throws(ReplayError) in
            try await SessionAnswer(status: startBroadcast(request.options, clientPID: context.peer.pid, connection: context.connection).get())
        }
        router.on(StopBroadcastRequest.self) { [self] _, _ throws(ReplayError) in
            try await SessionAnswer(status: stopBroadcast().get())
        }
        router.on(PauseBroadcastRequest.self) { [self] _, _ throws(ReplayError) in
            try await SessionAnswer(status: pauseBroadcast(true).get())
        }
        router.on(ResumeBroadcastRequest.self) { [self] _, _ throws(ReplayError) in
            try await SessionAnswer(status: pauseBroadcast(false).get())
        }
        router.on(ExtensionAttachRequest.self) { [self] _, context throws(ReplayError) in
            try await attachExtension(pid: context.peer.pid, connection: context.connection).get()
        }
        router.on(ExtensionHeartbeatRequest.self) { [self] _, context throws(ReplayError) in
            try await extensionSaid(.heartbeat, pid: context.peer.pid).get()
            return EmptyAnswer()
        }
        router.on(ExtensionBroadcastURLRequest.self) { [self] request, context throws(ReplayError) in
            try await extensionSaid(.broadcastURL(request.url), pid: context.peer.pid).get()
            return EmptyAnswer()
        }
        router.on(ExtensionServiceInfoRequest.self) { [self] request, context throws(ReplayError) in
            try await extensionSaid(.serviceInfo(request.info), pid: context.peer.pid).get()
            return EmptyAnswer()
        }
        router.on(ExtensionFinishRequest.self) { [self] request, context throws(ReplayError) in
            try await extensionSaid(.finish(request), pid: context.peer.pid).get()
            return EmptyAnswer()
        }
    }

    // MARK: the person's requests

    func startBroadcast(_ options: BroadcastOptions, clientPID: Int32, connection: UInt64) async -> Result<SessionStatus?, ReplayError> {
        guard !isShuttingDown else {
            return .failure(ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment."))
        }
        if let running = slots[.broadcast]?.machine.current {
            return .failure(ReplayError(.sessionActive, "a broadcast is already running (session \(running.id), to \(broadcastHost?.manifest.displayName ?? "?")): stop it with `replay stop` first."))
        }
        if broadcastHost?.slot == .broadcast {
            return .failure(ReplayError(.sessionActive, "the last broadcast's extension is still finishing: try again in a few seconds."))
        }
        let catalog = ExtensionCatalog.load(environment: ProcessInfo.processInfo.environment, executablePath: ExtensionCatalog.currentExecutable())
        for problem in catalog.problems { logger.warning("extension \(problem)") }
        var options = options
        if options.service == nil {
            // Without a service the person picks one in the picker window (`replay-ui picker`), with the
            // microphone switch as the command asked it.
            let offered = catalog.services.map { SystemWindows.PickerService(identifier: $0.identifier, displayName: $0.displayName, iconPath: $0.icon) }
            let choice: SystemWindows.PickerChoice?
            do throws(ReplayError) {
                choice = try await servicePicker.pick(offered, microphone: options.microphone, display: options.display, paths: paths)
            } catch {
                return .failure(error)
            }
            guard let choice else {
                return .failure(ReplayError(.userDeclined, "the person cancelled the broadcast in the picker."))
            }
            options.service = choice.identifier
            options.microphone = choice.microphone
            // The picker took time: another broadcast may have begun meanwhile.
            if let running = slots[.broadcast]?.machine.current {
                return .failure(ReplayError(.sessionActive, "a broadcast started while the picker was open (session \(running.id)): stop it with `replay stop` first."))
            }
        }
        let serviceID = options.service ?? ""
        guard let manifest = catalog.service(serviceID) else {
            let known = catalog.services.map(\.identifier)
            return .failure(ReplayError(.unknownService, "no broadcast service \"\(serviceID)\" is installed: "
                + (known.isEmpty ? "none is (see docs/WRITING-AN-EXTENSION.md)." : "choose one of \(known.joined(separator: ", ")) (`replay services` lists them).")))
        }
        // Its setup extension asks the person first (BroadcastSetup.swift), unless --setup said it all.
        let setup: BroadcastSetupOutcome?
        switch await runBroadcastSetup(for: manifest, in: catalog, options: options) {
        case .success(let outcome): setup = outcome
        case .failure(let error): return .failure(error)
        }
        if setup != nil, let running = slots[.broadcast]?.machine.current {
            return .failure(ReplayError(.sessionActive, "a broadcast started while this one was being set up (session \(running.id)): stop it with `replay stop` first."))
        }
        var setupInfo = setup?.setupInfo ?? options.setupInfo
        if let title = options.title { setupInfo["title"] = title }
        let recordingOptions = RecordingOptions(outputPath: paths.directory, microphone: options.microphone, systemAudio: options.systemAudio,
                                                audioRequired: options.microphone, display: options.display, framesPerSecond: options.framesPerSecond)
        do throws(ReplayError) { try recordingOptions.validate() } catch { return .failure(error) }
        // A system broadcast takes over, as a system recording does: an app's broadcast first, its
        // extension gone before this one starts (AppBroadcasts.swift).
        await interruptAppBroadcast()
        if broadcastHost != nil {
            return .failure(ReplayError(.sessionActive, "the last broadcast's extension is still finishing: try again in a few seconds."))
        }
        await interruptAppSessions(by: "broadcasting")
        let started = await startSession(in: .broadcast, options: recordingOptions, configuration: EngineConfiguration(recordingOptions),
                                         output: .ring, clientPID: clientPID, connection: connection)
        guard case .success(_) = started, let session = slots[.broadcast]?.machine.current else { return started }

        let pid: Int32
        do throws(ReplayError) {
            pid = try hostExtension(manifest, slot: .broadcast, sessionID: session.id, setupInfo: setupInfo)
        } catch {
            slots[.broadcast]?.discardReason = error
            _ = await stop(.broadcast)
            return .failure(error)
        }
        logger.info("broadcast extension started", metadata: ["extension": "\(manifest.identifier)", "pid": "\(pid)", "session": "\(session.id)"])
        broadcastHost?.broadcastURL = setup?.broadcastURL
        if let error = await waitForAttach(pid: pid, slot: .broadcast, sessionID: session.id) { return .failure(error) }
        do throws(XDisplayError) {
            broadcastHost?.focus = try FocusWatcher(display: options.display) { [weak self, tasks] focusedPID in
                tasks.spawn { [weak self] in await self?.focusChanged(to: focusedPID, sessionID: session.id) }
            }
        } catch {
            logger.warning("no application annotations: \(error.message)")
        }
        return .success(status(of: .broadcast))
    }

    func stopBroadcast() async -> Result<SessionStatus?, ReplayError> {
        if slots[.broadcast]?.machine.isIdle != false, cancelBroadcastSetup("the broadcast was stopped during its setup.") {
            return .success(nil)
        }
        guard slots[.broadcast]?.machine.isIdle == false else {
            return .failure(ReplayError(.noSession, "no broadcast is running."))
        }
        sendFinished()
        let result = await stop(.broadcast)
        await extensionGone()
        return result
    }

    func pauseBroadcast(_ on: Bool) -> Result<SessionStatus?, ReplayError> {
        guard slots[.broadcast]?.machine.current != nil, let ring = slots[.broadcast]?.ring, broadcastHost != nil else {
            return .failure(ReplayError(.noSession, "no broadcast is running."))
        }
        if broadcastHost?.paused != on {
            broadcastHost?.paused = on
            ring.setPaused(on)
            tellExtension(BroadcastControlEvent(action: on ? .paused : .resumed))
            logger.info(on ? "broadcast paused" : "broadcast resumed")
        }
        return .success(status(of: .broadcast))
    }

    // MARK: the extension's requests

    func attachExtension(pid: Int32, connection: UInt64) -> Result<ExtensionAttachAnswer, ReplayError> {
        guard let host = broadcastHost, host.pid == pid, host.process.awaitsAttach else {
            return .failure(ReplayError(.permissionDenied, "only the extension replayd started for the running broadcast may attach to it (pid \(pid) is not it)."))
        }
        guard let ring = slots[host.slot]?.ring else { return .failure(ReplayError(.noSession, "the broadcast ended as it started.")) }
        let path = paths.directory + "/ring-ext-\(pid)-\(UUID().uuidString.prefix(8)).sock"
        let name = host.manifest.displayName
        do throws(ReplayError) {
            try ring.offer(to: pid, at: path) { [weak self, tasks] result in
                if case .failure(let error) = result {
                    tasks.spawn { [weak self] in await self?.failBroadcast(ReplayError(.extensionFailed, "\(name) did not take its samples: \(error.message)"), kill: true) }
                }
            }
        } catch {
            return .failure(error)
        }
        guard case .accept(let waiters)? = broadcastHost?.process.attachRequested(at: now()) else {
            return .failure(ReplayError(.permissionDenied, "only the extension replayd started for the running broadcast may attach to it (pid \(pid) is not it)."))
        }
        broadcastHost?.connection = connection
        for waiter in waiters { waiter.resume(returning: nil) }
        return .success(ExtensionAttachAnswer(identifier: host.manifest.identifier, sessionID: host.sessionID, setupInfo: host.setupInfo,
                                              ringSocket: path, heartbeatSeconds: Double(BroadcastHostLimits.heartbeatInterval.components.seconds)))
    }

    enum ExtensionMessage: Sendable {
        case heartbeat
        case broadcastURL(String)
        case serviceInfo([String: String])
        case finish(ExtensionFinishRequest)
    }

    /// What the running broadcast's attached extension (and only it: `pid`) says.
    func extensionSaid(_ message: ExtensionMessage, pid: Int32) -> Result<Void, ReplayError> {
        guard let host = broadcastHost, host.pid == pid, host.process.isAttached else {
            return .failure(ReplayError(.permissionDenied, "pid \(pid) is not the running broadcast's extension."))
        }
        switch message {
        case .heartbeat:
            broadcastHost?.process.heartbeat(at: now())
        case .broadcastURL(let url):
            broadcastHost?.broadcastURL = url
            publishBroadcastUpdate()
        case .serviceInfo(let info):
            broadcastHost?.serviceInfo = info
            publishBroadcastUpdate()
        case .finish(let request):
            let code = request.code.map { " (\(request.domain ?? "error") \($0))" } ?? ""
            // The person is offered the service's own app, where such an error is put right (iOS offers the
            // extension's containing app).
            let remedy = host.manifest.containingApplication.map { " To put it right, open \(host.manifest.displayName)'s app: gtk-launch \($0)" } ?? ""
            let error = ReplayError(.extensionFailed, "\(host.manifest.displayName) ended the broadcast: \(request.message)\(code).\(remedy)")
            // After this answer: ending the broadcast waits for the extension, which waits for the answer.
            tasks.spawn { await self.failBroadcast(error, kill: false) }
        }
        return .success(())
    }

    func publishBroadcastUpdate() {
        guard let host = broadcastHost else { return }
        if let url = host.broadcastURL { logger.info("broadcast URL", metadata: ["url": "\(url)"]) }
        broadcast(BroadcastUpdatedEvent(broadcastURL: host.broadcastURL, serviceInfo: host.serviceInfo),
                  to: slots[host.slot]?.subscribers ?? [])
    }

    // MARK: ending

    /// Ends the broadcast with `error` (the first reason wins), killing the extension when it cannot be trusted to leave.
    func failBroadcast(_ error: ReplayError, kill killIt: Bool) async {
        guard let failed = broadcastHost?.process.fail(error, kill: killIt) else { return }
        await carryOut(failed)
    }

    /// What the extension's machine decided when it failed: it is killed, its attach waiters hear
    /// why, and its session ends with that reason.
    private func carryOut(_ failed: ExtensionProcessMachine<CheckedContinuation<ReplayError?, Never>>.Failed) async {
        guard let host = broadcastHost else { return }
        logger.error("the broadcast ends: \(failed.error.message)", metadata: ["extension": "\(host.manifest.identifier)", "pid": "\(host.pid)"])
        if failed.kill { kill(host.pid, SIGKILL) }
        for waiter in failed.resume { waiter.resume(returning: failed.error) }
        guard slots[host.slot]?.machine.current?.id == host.sessionID else { return }
        slots[host.slot]?.discardReason = failed.error
        if host.slot == .broadcast {
            _ = await stopBroadcast()
        } else {
            _ = await finishHostedAppBroadcast(host.slot)
        }
    }

    /// The session is over (stopped, failed, or its engine ended): the extension hears it, and
    /// is killed if it has not left `finishGrace` later (`watchExtension`).
    func broadcastSessionEnded() {
        guard let release = broadcastHost?.process.release(at: now()) else { return }
        broadcastHost?.focus?.stop()
        broadcastHost?.focus = nil
        switch release {
        case .awaitExit(let told): carryOut(told)
        case .forget: forgetBroadcastHost()
        case .none: break
        }
    }

    /// Tells the extension `broadcastFinished` (once).
    func sendFinished() {
        guard let told = broadcastHost?.process.finish() else { return }
        carryOut(told)
    }

    private func carryOut(_ told: ExtensionProcessMachine<CheckedContinuation<ReplayError?, Never>>.FinishAction) {
        if told.sendFinish { tellExtension(BroadcastControlEvent(action: .finished)) }
        // An attach that will not come: those who waited re-check the session.
        for waiter in told.resume { waiter.resume(returning: nil) }
    }

    /// Waits until the extension's process has left.
    func extensionGone() async {
        guard broadcastHost != nil else { return }
        _ = await withCheckedContinuation { continuation in
            switch broadcastHost?.process.waitForExit(continuation) {
            case .wait?: break
            case .resume(let failure)?: continuation.resume(returning: failure)
            case nil: continuation.resume(returning: nil)
            }
        }
    }

    private func forgetBroadcastHost() {
        broadcastHost?.monitor?.cancel()
        broadcastHost?.focus?.stop()
        broadcastHost = nil
    }

    /// The extension's process left (`exit`, from waitpid): before it was told to finish, that ends the broadcast.
    func extensionExited(pid: Int32, _ exit: ExtensionExit) async {
        guard broadcastHost?.pid == pid, let left = broadcastHost?.process.exited(exit), let host = broadcastHost else { return }
        logger.info("the broadcast extension \(exit)", metadata: ["extension": "\(host.manifest.identifier)", "pid": "\(pid)"])
        if let failed = left.failed { await carryOut(failed) }
        for waiter in left.resume { waiter.resume(returning: host.process.failure) }
        if broadcastHost?.pid == pid, broadcastHost?.process.isDone == true { forgetBroadcastHost() }
    }

    /// replayd shuts down: the broadcast's extension (and a setup's, `shutDownBroadcastSetup`) is told
    /// to finish, and killed if it does not leave within the grace period (one that never attached at once).
    /// Returns once both have left.
    func shutDownExtensions() async {
        shutDownBroadcastSetup()
        if let shutdown = broadcastHost?.process.shutdown(at: now()) {
            switch shutdown.release {
            case .awaitExit(let told): carryOut(told)
            case .forget: forgetBroadcastHost()
            case .none: break
            }
            if let failed = shutdown.failed { await carryOut(failed) }
        }
        await extensionGone()
        await setupExtensionGone()
    }

    // MARK: watching

    /// Twice a second until the extension has left, its machine's watch (`tick`): memory over the
    /// limit, no attach or no heartbeat for too long end the broadcast; one that stays after the grace
    /// period is killed.
    func watchExtension(pid: Int32) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(500))
            guard let host = broadcastHost, host.pid == pid else { return }
            if let counters = slots[host.slot]?.ring?.counters { broadcastHost?.framesDropped = Int(counters.framesDropped) }
            let resident = host.process.wantsMemoryReading ? Self.residentMegabytes(of: pid) : nil
            guard let action = broadcastHost?.process.tick(at: now(), residentMegabytes: resident) else { return }
            switch action {
            case .none:
                continue
            case .stopWatching:
                return
            case .killAfterGrace:
                logger.warning("the extension did not leave after broadcastFinished: killing it", metadata: ["pid": "\(pid)"])
                kill(pid, SIGKILL)
            case .fail(let failed):
                await carryOut(failed)
            }
        }
    }

    /// The extension's memory footprint in MB, as iOS counts it against an extension's limit: pages
    /// it dirtied that are its own (`Private_Dirty` of `/proc/PID/smaps`: its heap, stacks, written
    /// data), not the clean pages of shared libraries every program maps, nor the frame ring (shared
    /// memory, replayd's; see `ownDirtyKilobytes`). `RssAnon` of `/proc/PID/status` where smaps is missing.
    static func residentMegabytes(of pid: Int32) -> Double? {
        if let smaps = readProcFile("/proc/\(pid)/smaps"), let kilobytes = ownDirtyKilobytes(smaps: smaps) {
            return Double(kilobytes) / 1024
        }
        guard let text = readProcFile("/proc/\(pid)/status") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }.map { Double($0) / 1024 }
        }
        return nil
    }

    /// The whole text of a file of /proc, read to its end: they say their size is 0, and Foundation's
    /// `String(contentsOfFile:)` gives only the start of a large one (smaps), which hid most of an extension's memory.
    static func readProcFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            bytes += chunk[0..<count]
        }
    }

    /// The sum of `Private_Dirty` over the mappings of `smaps` (the text of `/proc/PID/smaps`) but
    /// the frame ring's (`/memfd:openreplaykit-ring…`): once replayd has unmapped its side at the
    /// end of a broadcast, the extension is the ring's only user and the ring would count as its
    /// private pages until it exits, taking an extension over its limit as it finishes.
    /// Nil when there is no such field (not an smaps text).
    static func ownDirtyKilobytes(smaps: String) -> Int? {
        var total: Int?
        var inRing = false
        for line in smaps.split(separator: "\n", omittingEmptySubsequences: true) {
            let name = line.prefix { $0 != " " }
            guard name.hasSuffix(":") else {
                // A mapping's header: "start-end perms offset device inode [path]".
                inRing = line.contains("/memfd:\(Self.ringName)")
                continue
            }
            guard name == "Private_Dirty:", !inRing else { continue }
            total = (total ?? 0) + (line.dropFirst(name.count).split(separator: " ").first.flatMap { Int($0) } ?? 0)
        }
        return total
    }

    /// The frame ring's memfd name (`RecordingSessions`: its display after it).
    static let ringName = "openreplaykit-ring"

    private func focusChanged(to pid: Int32?, sessionID: String) {
        guard let pid, let host = broadcastHost, host.sessionID == sessionID, host.process.isAtWork, host.annotatedPID != pid,
              let identity = AppIdentity.of(pid: pid) else { return }
        broadcastHost?.annotatedPID = pid
        logger.info("the focused application changed", metadata: ["app": "\(identity.identifier)", "pid": "\(pid)"])
        tellExtension(BroadcastAnnotatedEvent(bundleIdentifier: identity.identifier, name: identity.name, iconPath: identity.iconPath))
    }

    func tellExtension(_ event: some ControlEventBody) {
        guard let connection = broadcastHost?.connection else { return }
        broadcast(event, to: [connection])
    }

    // MARK: launching

    /// Starts `manifest`'s upload extension (`ExtensionLauncher`) for the session `sessionID` in `slot`,
    /// and its host with its watch; its pid.
    func hostExtension(_ manifest: ExtensionManifest, slot: SessionSlot, sessionID: String,
                       setupInfo: [String: String]) throws(ReplayError) -> Int32 {
        guard !isShuttingDown else { throw ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment.") }
        let launcher = extensionLauncher
        let pid = try launcher.launch(manifest) { [weak self] pid, exit in await self?.extensionExited(pid: pid, exit) }
        let process = ExtensionProcessMachine<CheckedContinuation<ReplayError?, Never>>(
            pid: pid, identity: launcher.identity(of: manifest), limits: .upload(memoryMegabytes: extensionMemoryMegabytes), launchedAt: now())
        broadcastHost = BroadcastHost(manifest: manifest, slot: slot, sessionID: sessionID, setupInfo: setupInfo, process: process)
        broadcastHost?.monitor = tasks.spawn { await self.watchExtension(pid: pid) }
        return pid
    }

    /// Waits for the extension `pid` to come for its samples (`BroadcastHostLimits.attachTimeout` at
    /// most, `watchExtension`): nil once it has and the session in `slot` still runs; else why the
    /// broadcast ended (a failure to attach ends it, killing the extension). For the person's broadcast and an app's.
    func waitForAttach(pid: Int32, slot: SessionSlot, sessionID: String) async -> ReplayError? {
        let failure = await withCheckedContinuation { continuation in
            guard broadcastHost?.pid == pid, let wait = broadcastHost?.process.waitForAttach(continuation) else {
                continuation.resume(returning: nil)
                return
            }
            if case .resume(let failure) = wait { continuation.resume(returning: failure) }
        }
        if let failure {
            await failBroadcast(failure, kill: true)
            return failure
        }
        guard slots[slot]?.machine.current?.id == sessionID else {
            return broadcastHost?.process.failure ?? ReplayError(.extensionFailed, "the broadcast ended as it started.")
        }
        return nil
    }

    /// The broadcast's own fields of its status.
    func addBroadcastFields(to status: inout SessionStatus) {
        guard let host = broadcastHost, host.sessionID == status.id else {
            return
        }
        status.service = host.manifest.identifier
        status.broadcastURL = host.broadcastURL
        status.serviceInfo = host.serviceInfo
        status.paused = host.paused
        status.extensionFramesDropped = slots[host.slot]?.ring.map { Int($0.counters.framesDropped) } ?? host.framesDropped
    }
}
