import ReplayIPC
import ReplayEngine
import ReplayCapture
import ReplayMedia
import Foundation
import ReplaySystem
#if canImport(Glibc)
import Glibc
#endif

/// Apps' sessions (the OpenReplayKit library), the person's privacy choices and clip buffer, on
/// the same keyed sessions as `replay record`.
///
/// The privacy model lives here: the caller is the pid of its connection (SO_PEERCRED), never what
/// it says; its sessions capture `.application(display, ApplicationScope(processID: pid))` and the
/// app's own sound, never the screen; its first start asks the person (`ConsentStore`); a system
/// recording ends every app session first (`interrupted`, the recording discarded); an app that
/// leaves loses its sessions and their files.
extension RecordingSessions {
    /// The app clip buffer's length: iOS exports at most 15 s.
    static let appClipCapacity = AppExportClipRequest.maximumSeconds

    nonisolated func registerAppMethods(in router: inout ControlRouter) {
        router.on(AppStartRecordingRequest.self) { [self] request, context throws(ReplayError) in
            try await AppSessionAnswer(status: startApp(.appRecording, request.options, pid: context.peer.pid, connection: context.connection).get())
        }
        router.on(AppStopRecordingRequest.self) { [self] request, context throws(ReplayError) in
            try await stopAppRecording(pid: context.peer.pid, outputPath: request.outputPath).get()
        }
        router.on(AppDiscardRecordingRequest.self) { [self] _, context in
            await discardAppRecording(pid: context.peer.pid)
            return EmptyAnswer()
        }
        router.on(AppPresentPreviewRequest.self) { [self] _, context throws(ReplayError) in
            try await presentPreview(pid: context.peer.pid).get()
        }
        router.on(AppStartCaptureRequest.self) { [self] request, context throws(ReplayError) in
            let pid = context.peer.pid
            let status = try await startApp(.appCapture, request.options, pid: pid, connection: context.connection).get()
            return try await offerRing(to: pid, status: status).get()
        }
        router.on(AppStopCaptureRequest.self) { [self] _, context throws(ReplayError) in
            let slot = SessionSlot(kind: .appCapture, owner: context.peer.pid)
            return try await AppSessionAnswer(status: stopOwn(slot, nothing: "this app is not capturing: call startCapture first.").get())
        }
        router.on(AppStartClipBufferingRequest.self) { [self] request, context throws(ReplayError) in
            try await AppSessionAnswer(status: startApp(.appClip, request.options, pid: context.peer.pid, connection: context.connection).get())
        }
        router.on(AppStopClipBufferingRequest.self) { [self] _, context throws(ReplayError) in
            let slot = SessionSlot(kind: .appClip, owner: context.peer.pid)
            return try await AppSessionAnswer(status: stopOwn(slot, nothing: "this app is not buffering clips: call startClipBuffering first.").get())
        }
        router.on(AppExportClipRequest.self) { [self] request, context throws(ReplayError) in
            guard request.durationSeconds > 0, request.durationSeconds <= AppExportClipRequest.maximumSeconds else {
                throw ReplayError(.invalidParameter, "a clip is 0 to \(Int(AppExportClipRequest.maximumSeconds)) seconds long, not \(request.durationSeconds): ask for at most \(Int(AppExportClipRequest.maximumSeconds)).")
            }
            return try await exportClip(SessionSlot(kind: .appClip, owner: context.peer.pid), seconds: request.durationSeconds,
                                        to: request.outputPath, nothing: "this app is not buffering clips: call startClipBuffering first.").get()
        }
        router.on(AvailabilityRequest.self) { [self] request, context in
            await availability(display: request.display, connection: context.connection)
        }
        router.on(PrivacyListRequest.self) { [self] _, _ in
            await PrivacyListAnswer(apps: privacyList())
        }
        router.on(PrivacyResetRequest.self) { [self] request, _ in
            await PrivacyResetAnswer(removed: privacyReset(request.app))
        }
        router.on(ClipStartRequest.self) { [self] request, context throws(ReplayError) in
            try await SessionAnswer(status: startSystemClip(request, clientPID: context.peer.pid, connection: context.connection).get())
        }
        router.on(ClipSaveRequest.self) { [self] request, _ throws(ReplayError) in
            let slot = SessionSlot(kind: .clip)
            let capacity = await status(of: slot)?.clipSeconds ?? ClipStartRequest.maximumSeconds
            let seconds = request.seconds ?? capacity
            guard seconds > 0, seconds <= ClipStartRequest.maximumSeconds else {
                throw ReplayError(.invalidParameter, "--seconds must be between 1 and \(Int(ClipStartRequest.maximumSeconds)), not \(seconds).")
            }
            return try await exportClip(slot, seconds: seconds, to: request.outputPath,
                                        nothing: "no clip buffer is running: start one with `replay clip start`.").get()
        }
        router.on(ClipStopRequest.self) { [self] _, _ throws(ReplayError) in
            try await SessionAnswer(status: stopOwn(SessionSlot(kind: .clip), nothing: "no clip buffer is running.").get())
        }
    }

    // MARK: an app's sessions

    /// Starts an app's recording or clip buffer: consent first, then only the app's windows and sound.
    func startApp(_ kind: SessionStatus.Kind, _ options: AppSessionOptions, pid: Int32, connection: UInt64) async -> Result<SessionStatus?, ReplayError> {
        guard !options.display.isEmpty else {
            return .failure(ReplayError(.noDisplay, "no X display: the app has no DISPLAY, so there is nothing of it to record."))
        }
        if let problem = await Self.waylandProblem(options.display) {
            return .failure(ReplayError(.unavailableOnThisDesktop, problem))
        }
        if let running = slots[.systemRecording]?.machine.current ?? slots[.broadcast]?.machine.current {
            return .failure(ReplayError(.unavailable, "the person is \(running.kind == .broadcast ? "broadcasting" : "recording") the screen (session \(running.id)): apps cannot record until it ends."))
        }
        let slot = SessionSlot(kind: kind, owner: pid)
        if slots[slot]?.machine.isIdle == false {
            return .failure(ReplayError(.sessionActive, kind == .appClip ? "this app is already buffering clips." : "this app is already recording: stop it first."))
        }
        guard let identity = AppIdentity.of(pid: pid) else {
            return .failure(ReplayError(.badRequest, "the process that asked (pid \(pid)) is gone."))
        }
        switch await askConsent(identity, display: options.display, microphone: options.microphone) {
        case .failure(let error): return .failure(error)
        case .success(.deny):
            logger.notice("the person did not allow the app to record", metadata: ["app": "\(identity.executable)", "pid": "\(pid)"])
            return .failure(ReplayError(.userDeclined, "the person did not allow \(identity.name) to record the screen."))
        case .success(.allow):
            break
        }
        // The consent prompt took time: the app may have left, or a system recording begun.
        guard connectionPIDs.values.contains(pid) else {
            return .failure(ReplayError(.noSession, "the app left while the person was asked."))
        }
        if slots[.systemRecording]?.machine.current != nil {
            return .failure(ReplayError(.unavailable, "the person started recording the screen: apps cannot record until it ends."))
        }
        let outputPath: String
        let output: SessionOutput
        if kind == .appClip {
            outputPath = paths.directory
            output = .clip(seconds: Self.appClipCapacity)
        } else if kind == .appCapture {
            outputPath = paths.directory
            output = .ring
        } else {
            let folder = paths.directory + "/app-recordings"
            if mkdir(folder, 0o700) != 0 && errno != EEXIST {
                return .failure(ReplayError(.writeFailed, "cannot create \(folder): \(String(cString: strerror(errno)))."))
            }
            outputPath = folder + "/\(pid)-\(UUID().uuidString).mp4"
            output = .movie
        }
        let recordingOptions = RecordingOptions(outputPath: outputPath, microphone: options.microphone, systemAudio: false,
                                                display: options.display)
        let configuration = Self.appOnly(options, pid: pid)
        let started = await startSession(in: slot, options: recordingOptions, configuration: configuration, output: output,
                                         clientPID: pid, connection: connection)
        guard case .success(let status) = started else { return started }
        // The app hears "started" when its recording really is (as on iOS, where the handler comes
        // after the countdown): the engine's time zero waits up to 3 s for the sound server's first
        // samples, and an app that stops 2 s after its start must not get a recording of one second.
        await waitUntilCapturing(slot)
        return .success(self.status(of: slot) ?? status)
    }

    /// What every session of an app captures: never the screen, only the windows of the app (`pid` and
    /// its descendants) and the app's own sound, plus the microphone when asked. Recordings, captures,
    /// clips and the app's broadcasts all go through this.
    static func appOnly(_ options: AppSessionOptions, pid: Int32) -> EngineConfiguration {
        let scope = ApplicationScope(processID: pid)
        return EngineConfiguration(video: .application(display: options.display, scope),
                                   audio: [.application(scope)] + (options.microphone ? [.microphone] : []))
    }

    /// Stops the caller's recording; moves the movie to `outputPath`, or keeps it for the preview.
    func stopAppRecording(pid: Int32, outputPath: String?) async -> Result<AppRecordingAnswer, ReplayError> {
        let slot = SessionSlot(kind: .appRecording, owner: pid)
        if let outputPath {
            // Checked before stopping: a bad path leaves the recording running, to try again.
            do throws(ReplayError) { try Self.checkNewFile(outputPath) } catch { return .failure(error) }
        }
        let final: SessionStatus?
        switch await stopOwn(slot, nothing: "this app is not recording.") {
        case .failure(let error): return .failure(error)
        case .success(let status): final = status
        }
        guard let final else { return .failure(ReplayError(.noSession, "this app is not recording.")) }
        if let error = final.error {
            unlink(final.outputPath)
            return .failure(error)
        }
        guard let outputPath else {
            if let old = keptRecordings[pid] { unlink(old) }
            keptRecordings[pid] = final.outputPath
            keptDisplays[pid] = final.display
            return .success(AppRecordingAnswer(status: final, path: final.outputPath))
        }
        do throws(ReplayError) {
            try Self.move(final.outputPath, to: outputPath)
        } catch {
            unlink(final.outputPath)
            return .failure(error)
        }
        var moved = final
        moved.outputPath = outputPath
        return .success(AppRecordingAnswer(status: moved, path: outputPath))
    }

    /// Discards the caller's recording: a running one (stopped, file removed) and the kept one.
    func discardAppRecording(pid: Int32) async {
        let slot = SessionSlot(kind: .appRecording, owner: pid)
        if slots[slot]?.machine.isIdle == false {
            slots[slot]?.discardReason = ReplayError(.noSession, "the app discarded its recording.")
            _ = await stop(slot)
        }
        if let kept = keptRecordings.removeValue(forKey: pid) { unlink(kept) }
        keptDisplays[pid] = nil
    }

    /// Shows the system preview of the caller's kept recording; the file leaves replayd's folder after.
    func presentPreview(pid: Int32) async -> Result<AppPreviewAnswer, ReplayError> {
        guard let file = keptRecordings[pid], let display = keptDisplays[pid] else {
            return .failure(ReplayError(.noSession, "this app has no stopped recording to preview: call stopRecording first."))
        }
        let videos = VideosFolder.path(environment: ProcessInfo.processInfo.environment)
        let outcome: SystemWindows.PreviewOutcome
        do throws(ReplayError) {
            outcome = try await SystemWindows.preview(file: file, saveFolder: videos, display: display, paths: paths)
        } catch {
            return .failure(error)
        }
        // The person decided: the kept copy goes (saved and shared ones were written elsewhere).
        if keptRecordings[pid] == file {
            keptRecordings[pid] = nil
            keptDisplays[pid] = nil
            unlink(file)
        }
        switch outcome {
        case .saved(let path): return .success(AppPreviewAnswer(activity: "saved", path: path))
        case .shared(let path): return .success(AppPreviewAnswer(activity: "shared", path: path))
        case .cancelled: return .success(AppPreviewAnswer(activity: "cancelled", path: nil))
        }
    }

    /// Stops the session in `slot`, answering `no-session` with `nothing` when none runs.
    func stopOwn(_ slot: SessionSlot, nothing: String) async -> Result<SessionStatus?, ReplayError> {
        guard slots[slot]?.machine.isIdle == false else { return .failure(ReplayError(.noSession, nothing)) }
        return await stop(slot)
    }

    /// Offers the frame ring of the app's new capture at a socket of its own, for the app (and only
    /// it) to fetch once; a capture whose app does not come for it in time is stopped.
    func offerRing(to pid: Int32, status: SessionStatus?) -> Result<AppCaptureAnswer, ReplayError> {
        let slot = SessionSlot(kind: .appCapture, owner: pid)
        guard let ring = slots[slot]?.ring else {
            return .failure(ReplayError(.noSession, "the capture ended as it started."))
        }
        let path = paths.directory + "/ring-\(pid)-\(UUID().uuidString.prefix(8)).sock"
        let logger = logger
        do throws(ReplayError) {
            try ring.offer(to: pid, at: path) { [weak self, tasks] result in
                switch result {
                case .success:
                    logger.debug("the frame ring went to its app", metadata: ["pid": "\(pid)"])
                case .failure(let error):
                    logger.warning("the app's capture stops: \(error.message)", metadata: ["pid": "\(pid)"])
                    tasks.spawn { [weak self] in _ = await self?.stopOwn(slot, nothing: "") }
                }
            }
        } catch {
            // Not awaited here: the app hears the failure at once, and its capture stops beside it.
            tasks.spawn { _ = await self.stopOwn(slot, nothing: "") }
            return .failure(error)
        }
        return .success(AppCaptureAnswer(status: status, ringSocket: path))
    }

    /// Writes the last `seconds` of the clip buffer in `slot` to `path`, while buffering goes on.
    func exportClip(_ slot: SessionSlot, seconds: Double, to path: String, nothing: String) async -> Result<ClipAnswer, ReplayError> {
        guard let clip = slots[slot]?.clip else { return .failure(ReplayError(.noSession, nothing)) }
        do throws(ReplayError) { try Self.checkNewFile(path) } catch { return .failure(error) }
        guard !exporting.contains(slot) else {
            return .failure(ReplayError(.exportInProgress, "a clip is being saved already: wait for it."))
        }
        exporting.insert(slot)
        defer { exporting.remove(slot) }
        let result: Result<Double, MediaError> = await DedicatedThread.run(named: "clip-export") {
            do throws(MediaError) { return .success(try clip.export(lastSeconds: seconds, to: path)) } catch { return .failure(error) }
        }
        switch result {
        case .success(let length):
            logger.info("clip saved", metadata: ["slot": "\(slot)", "output": "\(path)", "seconds": "\(length)"])
            return .success(ClipAnswer(path: path, seconds: length))
        case .failure(let error):
            return .failure(ReplayError(error))
        }
    }

    // MARK: priority, leaving, watching

    /// A system session takes over: every app session ends, its recording discarded, its app told.
    func interruptAppSessions(by activity: String = "recording") async {
        let running = slots.filter { $0.key.owner != nil && !$0.value.machine.isIdle }.map(\.key)
        for slot in running {
            logger.notice("a system \(activity) interrupts \(slot)")
            slots[slot]?.discardReason = ReplayError(.interrupted, "the person started \(activity) the screen, which interrupts apps' recordings: this recording was discarded.")
        }
        await withTaskGroup(of: Void.self) { group in
            for slot in running { group.addTask { _ = await self.stop(slot) } }
        }
    }

    /// The app's last connection closed: its sessions end and their files go.
    func appLeft(pid: Int32) async {
        let running = slots.filter { $0.key.owner == pid && !$0.value.machine.isIdle }.map(\.key)
        for slot in running {
            logger.info("the app left: ending its \(slot.kind)", metadata: ["pid": "\(pid)"])
            slots[slot]?.discardReason = ReplayError(.noSession, "the app disconnected.")
        }
        for slot in running { _ = await stop(slot) }
        if let kept = keptRecordings.removeValue(forKey: pid) { unlink(kept) }
        keptDisplays[pid] = nil
        // Forget the slots of an app that is gone.
        for slot in slots.keys where slot.owner == pid && slots[slot]?.machine.isIdle == true { slots[slot] = nil }
    }

    func connectionsOf(pid: Int32) -> Set<UInt64> {
        Set(connectionPIDs.filter { $0.value == pid }.map(\.key))
    }

    func availability(display: String, connection: UInt64) async -> AvailabilityAnswer {
        if connections[connection] != nil { watchers.insert(connection) }
        let captured = isCaptured
        let problem = await Self.displayProblem(display)
        if let reason = problem { return AvailabilityAnswer(available: false, reason: reason, captured: isCaptured) }
        if slots[.systemRecording]?.machine.isIdle == false {
            return AvailabilityAnswer(available: false, reason: "the person is recording the screen", captured: captured)
        }
        return AvailabilityAnswer(available: true, reason: nil, captured: captured)
    }

    /// Whether the screen is captured now: by a session of replayd's, or (on Wayland) by anyone who
    /// reads one of the compositor's screen-cast streams (`ScreencastWatch`).
    var isCaptured: Bool { compositorStreamRead || slots.values.contains { $0.recorder != nil } }

    /// What PipeWire's graph says: someone reads a screen-cast stream of the compositor's, or no one.
    package func compositorStreamRead(_ read: Bool) {
        compositorStreamRead = read
        noteCaptured()
    }

    /// Tells watchers when some session starts or stops capturing (`RPScreen.isCaptured`).
    func noteCaptured() {
        let captured = isCaptured
        guard captured != lastCaptured else { return }
        lastCaptured = captured
        broadcast(CapturedChangedEvent(captured: captured), to: watchers)
    }

    /// Tells watchers when recording becomes available or unavailable for apps.
    func noteAvailability() {
        let available = slots[.systemRecording]?.machine.isIdle ?? true
        guard available != lastAvailable else { return }
        lastAvailable = available
        broadcast(AvailabilityChangedEvent(available: available, reason: available ? nil : "the person is recording the screen"), to: watchers)
    }

    /// Every session running now.
    func allStatuses() -> [SessionStatus] {
        slots.keys.sorted { $0.description < $1.description }.compactMap { status(of: $0) }
    }

    // MARK: consent

    /// The person's answer for `identity`: remembered, else asked (one prompt per app at a time).
    func askConsent(_ identity: AppIdentity, display: String, microphone: Bool) async -> Result<SystemWindows.ConsentAnswer, ReplayError> {
        if let answer = consent.answer(for: identity.consentKey, now: now()) { return .success(answer) }
        if pendingConsent[identity.consentKey] == nil {
            let prompt = consentPrompt
            let paths = self.paths
            let request = SystemWindows.ConsentRequest(display: display, appName: identity.name, appIconPath: identity.iconPath,
                                                       microphone: microphone)
            logger.info("asking the person", metadata: ["app": "\(identity.executable)", "name": "\(identity.name)"])
            // A task of its own, not the asking request's: the prompt answers every start of the app
            // that waits, whichever of their connections closes first.
            let asked = tasks.spawn { [self] in
                let result: Result<SystemWindows.ConsentAnswer, ReplayError>
                switch prompt {
                case .fixed(let answer):
                    result = .success(answer)
                case .systemWindow:
                    do throws(ReplayError) { result = .success(try await SystemWindows.askConsent(request, paths: paths)) }
                    catch { result = .failure(error) }
                }
                await consentAnswered(identity, result)
            }
            guard asked != nil else {
                return .failure(ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment."))
            }
            pendingConsent[identity.consentKey] = []
        }
        // No await since the prompt was handed over: this waiter is in place before its answer can come.
        return await withCheckedContinuation { pendingConsent[identity.consentKey, default: []].append($0) }
    }

    /// The person answered for `identity` (or the prompt failed): every start that waited hears it.
    private func consentAnswered(_ identity: AppIdentity, _ result: Result<SystemWindows.ConsentAnswer, ReplayError>) {
        let waiters = pendingConsent.removeValue(forKey: identity.consentKey) ?? []
        if case .success(let answer) = result {
            consent.record(answer, for: identity.consentKey, name: identity.name, now: now())
            logger.info("the person answered", metadata: ["app": "\(identity.executable)", "answer": "\(answer.rawValue)"])
        }
        for waiter in waiters { waiter.resume(returning: result) }
    }

    func privacyList() -> [ConsentEntry] { consent.list(now: now()) }

    func privacyReset(_ app: String?) -> [ConsentEntry] {
        let removed = consent.reset(app, now: now())
        logger.info("consent forgotten", metadata: ["apps": "\(removed.map(\.executable))"])
        return removed
    }

    // MARK: the person's clip buffer

    func startSystemClip(_ request: ClipStartRequest, clientPID: Int32, connection: UInt64) async -> Result<SessionStatus?, ReplayError> {
        guard request.seconds >= 1, request.seconds <= ClipStartRequest.maximumSeconds else {
            return .failure(ReplayError(.invalidParameter, "--seconds must be between 1 and \(Int(ClipStartRequest.maximumSeconds)), not \(request.seconds)."))
        }
        do throws(ReplayError) { try request.options.validate() } catch { return .failure(error) }
        return await startSession(in: SessionSlot(kind: .clip), options: request.options, configuration: EngineConfiguration(request.options),
                                  output: .clip(seconds: request.seconds), clientPID: clientPID, connection: connection)
    }

    // MARK: files

    /// `path` is absolute, does not exist, and its folder is writable.
    static func checkNewFile(_ path: String) throws(ReplayError) {
        guard path.hasPrefix("/") else {
            throw ReplayError(.badRequest, "the output path \"\(path)\" is not absolute: send an absolute path.")
        }
        if access(path, F_OK) == 0 {
            throw ReplayError(.outputExists, "\(path) already exists: choose another name, or remove it.")
        }
        let folder = (path as NSString).deletingLastPathComponent
        guard access(folder, W_OK | X_OK) == 0 else {
            throw ReplayError(.outputNotWritable, "cannot write to \(folder): \(String(cString: strerror(errno))). Choose a folder the app can write to.")
        }
    }

    /// Moves `source` to the new file `destination` (never over an existing one), across file systems too.
    static func move(_ source: String, to destination: String) throws(ReplayError) {
        if link(source, destination) == 0 {
            unlink(source)
            return
        }
        let code = errno
        guard code == EXDEV || code == EPERM else {
            throw code == EEXIST ? ReplayError(.outputExists, "\(destination) already exists: choose another name.")
                : ReplayError(.outputNotWritable, "cannot write \(destination): \(String(cString: strerror(code))).")
        }
        let input = open(source, O_RDONLY | O_CLOEXEC)
        let output = open(destination, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        defer {
            if input >= 0 { close(input) }
            if output >= 0 { close(output) }
        }
        guard input >= 0, output >= 0 else {
            throw ReplayError(.outputNotWritable, "cannot write \(destination): \(String(cString: strerror(errno))).")
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count == 0 { break }
            let written = count > 0 ? buffer.withUnsafeBytes { write(output, $0.baseAddress, count) } : -1
            guard count > 0, written == count else {
                unlink(destination)
                throw ReplayError(.writeFailed, "cannot write \(destination): \(String(cString: strerror(errno))).")
            }
        }
        unlink(source)
    }

    /// Why apps cannot record on the Wayland `display`, or nil (also for an X display): only GNOME
    /// with OpenReplayKit's Shell extension answering (asked on a thread of its own) gives replayd an
    /// app's own windows.
    static func waylandProblem(_ display: String) async -> String? {
        guard DesktopSession(displayName: display)?.isWayland == true else { return nil }
        guard WaylandSupport.appSessionsPossible() else { return WaylandSupport.appSessionsUnavailable() }
        let problem = await DedicatedThread.run(named: "replay-gnome-shell") { GnomeWindowCapture.extensionProblem() }
        return problem.map { WaylandSupport.appSessionsUnavailable(gnomeExtensionProblem: $0) }
    }

    /// Why apps cannot record on `display`, or nil: a local display (`:N`) must have its socket.
    static func displayProblem(_ display: String) async -> String? {
        guard !display.isEmpty else { return "no X display (DISPLAY is not set)" }
        if DesktopSession(displayName: display)?.isWayland == true { return await waylandProblem(display) }
        guard display.hasPrefix(":") else { return nil }
        let number = display.dropFirst().split(separator: ".").first.map(String.init) ?? ""
        guard Int(number) != nil else { return "\"\(display)\" is not an X display name" }
        return access("/tmp/.X11-unix/X\(number)", F_OK) == 0 ? nil : "no X server on display \(display)"
    }
}
