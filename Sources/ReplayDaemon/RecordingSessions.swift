package import ReplayIPC
package import Logging
import ReplayCapture
import ReplayEngine
import ReplayMedia
import Foundation
import ReplaySystem

/// Which session a request is about. Sessions are keyed: the system recording (the person's, from
/// the Control Center) is one slot; an app's own recordings, captures and clips, and broadcasts,
/// are slots of their own kinds, keyed by their owner, each with its own life cycle.
package struct SessionSlot: Hashable, Sendable, CustomStringConvertible {
    package var kind: SessionStatus.Kind
    /// The owning app's pid, or nil for the system's (the person's) sessions.
    package var owner: Int32?

    package init(kind: SessionStatus.Kind, owner: Int32? = nil) {
        self.kind = kind
        self.owner = owner
    }

    /// `replay record`: one at a time, for the whole screen.
    package static let systemRecording = SessionSlot(kind: .recording)

    package var description: String { owner.map { "\(kind) of pid \($0)" } ?? "system \(kind)" }
}

/// Owns replayd's sessions, keyed by `SessionSlot`: for each, its state machine, its
/// `RecordingEngine`, its indicator, the task that runs it, and who waits for its end or listens
/// to it; and the connections. Every `await` is followed by asking the slot's state machine again.
package actor RecordingSessions {
    package typealias Outbox = AsyncStream<ControlMessage>.Continuation
    typealias StopWaiter = CheckedContinuation<Result<SessionStatus?, ReplayError>, Never>

    /// One slot's session and what hangs on it.
    struct Slot {
        var machine = SessionStateMachine()
        var recorder: RecordingEngine?
        /// The clip buffer of a clip session (`replay clip`, an app's `startClipBuffering`).
        var clip: ClipBuffer?
        /// The frame ring of an app's in-app capture.
        var ring: RingTap?
        var indicator: RecordingIndicator?
        /// The engine's run, a child of `tasks`: it ends once the file is finished.
        var runTask: OwnedTask?
        /// Fires at the engine's time zero (its first picture) or at the session's end (`waitUntilCapturing`).
        var capturing: OneShotSignal?
        var stopWaiters: [StopWaiter] = []
        /// Connections that receive this slot's status and end events.
        var subscribers: Set<UInt64> = []
        /// Set when the system ends an app's session (a system session took over, the app left):
        /// the file is removed at the end and the app hears this error.
        var discardReason: ReplayError?
    }

    let logger: Logger
    /// replayd's private folder: app recordings are kept there until saved or discarded.
    let paths: ControlPaths
    var slots: [SessionSlot: Slot] = [:]
    var connections: [UInt64: Outbox] = [:]
    /// Who is at the other end of each connection (SO_PEERCRED's pid).
    var connectionPIDs: [UInt64: Int32] = [:]
    private var nextConnectionID: UInt64 = 1
    package private(set) var isShuttingDown = false
    /// Apps' consent answers, remembered for a while (`ConsentStore.memory`).
    var consent = ConsentStore()
    /// Consent prompts on screen now, by executable, and who waits for each: a second start of the same
    /// app waits for the same answer.
    var pendingConsent: [String: [CheckedContinuation<Result<SystemWindows.ConsentAnswer, ReplayError>, Never>]] = [:]
    /// Where every background task of the sessions runs (`ControlServer.run` owns it): cancelled at shutdown.
    let tasks: TaskOwner
    let consentPrompt: ConsentPrompt
    /// How the person chooses a broadcast service when none is named (the picker window).
    let servicePicker: ServicePicker
    /// The clock of consent's memory (tests move it on).
    let now: @Sendable () -> ContinuousClock.Instant
    /// An app's stopped recording, kept for its preview until saved, shared or discarded (by owner pid).
    var keptRecordings: [Int32: String] = [:]
    /// The display each kept recording was made on (where its preview shows).
    var keptDisplays: [Int32: String] = [:]
    /// Clip buffers saving a clip now.
    var exporting: Set<SessionSlot> = []
    /// Connections that asked for availability: they hear `availabilityChanged` and `capturedChanged`.
    var watchers: Set<UInt64> = []
    /// What the watchers last heard.
    var lastCaptured = false
    /// Someone reads one of the compositor's screen-cast streams (Wayland: a browser, OBS, replayd).
    var compositorStreamRead = false
    var lastAvailable = true
    /// The person's broadcast's upload extension (Broadcasts.swift), from its start until it has left.
    var broadcastHost: BroadcastHost?
    /// The setup extension of the broadcast being set up (BroadcastSetup.swift), until it has answered and left.
    var broadcastSetup: SetupExtensionHost?
    /// An upload extension's resident memory limit (`replayd --extension-memory-mb`).
    let extensionMemoryMegabytes: Int

    package init(logger: Logger, tasks: TaskOwner, paths: ControlPaths = .forCurrentUser(), consentPrompt: ConsentPrompt = .systemWindow,
                 servicePicker: ServicePicker = .systemWindow,
                 extensionMemoryMegabytes: Int = BroadcastHostLimits.defaultMemoryMegabytes,
                 now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.logger = logger
        self.tasks = tasks
        self.extensionMemoryMegabytes = extensionMemoryMegabytes
        self.paths = paths
        self.consentPrompt = consentPrompt
        self.servicePicker = servicePicker
        self.now = now
    }

    // MARK: connections

    /// Registers a connection's outbox; nil when replayd is shutting down (then say goodbye).
    package func register(_ outbox: Outbox, pid: Int32? = nil) -> UInt64? {
        guard !isShuttingDown else { return nil }
        let id = nextConnectionID
        nextConnectionID += 1
        connections[id] = outbox
        if let pid { connectionPIDs[id] = pid }
        return id
    }

    package func unregister(_ id: UInt64) async {
        connections[id] = nil
        watchers.remove(id)
        for slot in slots.keys { slots[slot]?.subscribers.remove(id) }
        guard let pid = connectionPIDs.removeValue(forKey: id), !connectionPIDs.values.contains(pid) else { return }
        // The app's last connection is gone: its sessions end and their files go.
        await appLeft(pid: pid)
    }

    package func subscribe(_ id: UInt64, to slot: SessionSlot = .systemRecording) -> SessionStatus? {
        if connections[id] != nil { slots[slot, default: Slot()].subscribers.insert(id) }
        return status(of: slot)
    }

    /// Ends every connection once what is queued for it has been written.
    package func closeAllConnections() {
        for outbox in connections.values { outbox.finish() }
        connections = [:]
        watchers = []
        for slot in slots.keys { slots[slot]?.subscribers = [] }
    }

    /// True while a session exists or a client is connected (replayd must not leave by itself).
    package var isBusy: Bool { slots.values.contains { !$0.machine.isIdle } || !connections.isEmpty }

    /// Sends each running session's status to its subscribers (called about twice a second).
    package func publishStatus() {
        for (slot, entry) in slots where !entry.subscribers.isEmpty {
            guard let status = status(of: slot), status.state == .running || status.state == .stopping else { continue }
            broadcast(StatusEvent(status: status), to: entry.subscribers)
        }
    }

    func broadcast(_ event: some ControlEventBody, to subscribers: Set<UInt64>) {
        guard let message = Self.message(event) else { return }
        for id in subscribers { connections[id]?.yield(message) }
    }

    private static func message(_ event: some ControlEventBody) -> ControlMessage? {
        (try? ControlEvent(event)).map(ControlMessage.event)
    }

    // MARK: the requests this actor answers

    /// Registers the system recording's requests.
    package nonisolated func register(in router: inout ControlRouter) {
        router.on(StartRecordingRequest.self) { [self] request, context throws(ReplayError) in
            try await SessionAnswer(status: start(options: request.options, clientPID: context.peer.pid, connection: context.connection).get())
        }
        router.on(StopRecordingRequest.self) { [self] _, _ throws(ReplayError) in
            try await SessionAnswer(status: stop().get())
        }
        router.on(StatusRequest.self) { [self] _, _ in
            SessionAnswer(status: await status())
        }
        router.on(SetMicrophoneRequest.self) { [self] request, _ throws(ReplayError) in
            try await SessionAnswer(status: setMicrophone(on: request.on).get())
        }
        router.on(SubscribeRequest.self) { [self] _, context in
            SessionAnswer(status: await subscribe(context.connection))
        }
        router.on(SessionsRequest.self) { [self] _, _ in
            SessionsAnswer(sessions: await allStatuses())
        }
        registerAppMethods(in: &router)
        registerBroadcastMethods(in: &router)
        registerBroadcastSetupMethods(in: &router)
        registerAppBroadcastMethods(in: &router)
    }

    // MARK: requests

    /// Starts the system recording (`replay record`). It has priority: every app session ends
    /// (`interrupted`, its recording discarded) first.
    package func start(options: RecordingOptions, clientPID: Int32, connection: UInt64?) async -> Result<SessionStatus?, ReplayError> {
        guard !isShuttingDown else {
            return .failure(ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment."))
        }
        do throws(ReplayError) { try options.validate() } catch { return .failure(error) }
        if slots[.systemRecording]?.machine.isIdle ?? true { await interruptAppSessions() }
        let result = await startSession(in: .systemRecording, options: options, configuration: EngineConfiguration(options),
                                        output: .movie, clientPID: clientPID, connection: connection)
        noteAvailability()
        return result
    }

    /// Starts a session in `slot` with the engine configured as `configuration`, writing to `output`.
    func startSession(in slot: SessionSlot, options: RecordingOptions, configuration: EngineConfiguration, output: SessionOutput,
                      clientPID: Int32, connection: UInt64?) async -> Result<SessionStatus?, ReplayError> {
        guard !isShuttingDown else {
            return .failure(ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment."))
        }
        let session = SessionStateMachine.Session(id: Self.makeSessionID(), kind: slot.kind, clientPID: clientPID,
                                                  options: options, startedAt: Date(), owner: slot.owner, output: output)
        switch slots[slot, default: Slot()].machine.startRequested(session) {
        case .reject(let error):
            return .failure(error)
        case .prepare:
            break
        }
        slots[slot]?.discardReason = nil
        if let connection, connections[connection] != nil { slots[slot]?.subscribers.insert(connection) }
        var sessionLogger = logger
        sessionLogger[metadataKey: "session"] = "\(session.id)"
        sessionLogger.info("starting a recording", metadata: [
            "output": "\(options.outputPath)", "display": "\(options.display)", "client-pid": "\(clientPID)",
        ])

        let prepared: RecordingEngine
        let clip: ClipBuffer?
        let ring: RingTap?
        do throws(ReplayError) {
            (prepared, clip, ring) = try await Self.prepare(options, configuration: configuration, output: output, logger: sessionLogger)
        } catch {
            _ = slots[slot]?.machine.prepareFailed(id: session.id)
            sessionLogger.notice("the recording could not start: \(error.message)", metadata: ["code": "\(error.code)"])
            resumeStopWaiters(of: slot, .failure(error))
            return .failure(error)
        }

        let action = slots[slot]?.machine.prepareSucceeded(id: session.id) ?? .discard
        guard action != .discard else {
            // Cannot happen while this actor is the only writer of the machine; finish the file anyway.
            prepared.stop()
            try? await prepared.run()
            ring?.close()
            return .failure(ReplayError(.internal, "the recording was abandoned while it started. Run the command again."))
        }
        slots[slot]?.recorder = prepared
        slots[slot]?.clip = clip
        slots[slot]?.ring = ring
        // The engine takes its first picture at its time zero: that picture is the event an app's start waits for.
        let capturing = OneShotSignal()
        try? prepared.attach(tap: FirstPictureTap(capturing))
        slots[slot]?.capturing = capturing
        if action == .beginAndStop { prepared.stop() }

        // The indicator, on the recorded display, left out of the frames. A Wayland desktop shows its
        // own screen-sharing indicator (and it is in the picture: nothing can be left out there).
        if DesktopSession(displayName: options.display)?.isWayland != true {
            do throws(IndicatorError) {
                let indicator = try await RecordingIndicator.open(display: options.display, logger: sessionLogger) { [weak self, tasks] in
                    tasks.spawn { [weak self] in await self?.stopFromIndicator(slot: slot, sessionID: session.id) }
                }
                if slots[slot]?.machine.current?.id == session.id {
                    prepared.exclude(window: indicator.windowID)
                    slots[slot]?.indicator = indicator
                } else {
                    await indicator.close()
                }
            } catch {
                sessionLogger.warning("no recording indicator: \(error.message)")
            }
        }

        let runTask = tasks.spawn { [prepared, sessionLogger] in
            let failure = await Self.runToEnd(prepared)
            await self.runEnded(slot: slot, sessionID: session.id, recorder: prepared, error: failure, logger: sessionLogger)
        }
        guard let runTask else {
            // The server has stopped its tasks (it shuts down): the session ends here, its file finished.
            prepared.stop()
            let failure = await Self.runToEnd(prepared)
            await runEnded(slot: slot, sessionID: session.id, recorder: prepared, error: failure, logger: sessionLogger)
            return .failure(ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment."))
        }
        slots[slot]?.runTask = runTask
        sessionLogger.info("recording", metadata: ["size": "\(prepared.width)x\(prepared.height)", "encoder": "\(prepared.encoderName.isEmpty ? "none (the frame ring's reader encodes)" : prepared.encoderName)"])
        noteCaptured()
        return .success(status(of: slot))
    }

    /// Waits until the engine of the session in `slot` is past its time zero (its sound sources have
    /// sent their first samples, at most 3 s) or the session ended; at most 4 s.
    func waitUntilCapturing(_ slot: SessionSlot) async {
        guard let capturing = slots[slot]?.capturing, slots[slot]?.recorder != nil else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await capturing.wait() }
            group.addTask { try? await Task.sleep(for: .seconds(4)) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Stops the session in `slot` and answers once its file is finished.
    package func stop(_ slot: SessionSlot = .systemRecording) async -> Result<SessionStatus?, ReplayError> {
        switch slots[slot, default: Slot()].machine.stopRequested() {
        case .nothingRecording:
            return .failure(ReplayError(.noSession, "nothing is recording."))
        case .stopRecorder(let session):
            logger.info("stopping the recording", metadata: ["session": "\(session.id)"])
            slots[slot]?.recorder?.stop()
        case .waitForEnd:
            break
        }
        return await withCheckedContinuation { slots[slot, default: Slot()].stopWaiters.append($0) }
    }

    package func setMicrophone(on: Bool, in slot: SessionSlot = .systemRecording) -> Result<SessionStatus?, ReplayError> {
        guard let session = slots[slot]?.machine.current else {
            return .failure(ReplayError(.noSession, "nothing is recording: start a recording with `replay record --mic`."))
        }
        guard let recorder = slots[slot]?.recorder else {
            return .failure(ReplayError(.badRequest, "the recording is still starting: try again in a moment."))
        }
        guard recorder.microphoneRecorded else {
            return .failure(ReplayError(.badRequest, "this recording has no microphone track (it was started without --mic, or no microphone was found): the microphone can only be muted and unmuted in a recording started with `replay record --mic`."))
        }
        recorder.setMicrophone(on: on)
        logger.info("microphone \(on ? "on" : "off")", metadata: ["session": "\(session.id)"])
        return .success(status(of: slot))
    }

    /// What runs in `slot` now, or nil.
    package func status(of slot: SessionSlot = .systemRecording) -> SessionStatus? {
        guard let entry = slots[slot], let session = entry.machine.current, let state = entry.machine.statusState else { return nil }
        return makeStatus(session, state: state, recorder: entry.recorder, error: nil)
    }

    /// Stops every session and waits for their files to be finished (SIGTERM, SIGINT, idle).
    package func shutdown() async {
        isShuttingDown = true
        // An app's recording cannot reach its app any more: it goes.
        for (slot, entry) in slots where slot.owner != nil && !entry.machine.isIdle {
            slots[slot]?.discardReason = ReplayError(.shuttingDown, "replayd is shutting down: the app's recording was discarded.")
        }
        for kept in keptRecordings.values { unlink(kept) }
        keptRecordings = [:]
        for (slot, entry) in slots where !entry.machine.isIdle {
            logger.notice("shutting down: finishing the \(slot) first")
            _ = await stop(slot)
        }
        for entry in slots.values { if let runTask = entry.runTask { await runTask.value() } }
        // Extensions still here (a setup window, an upload extension finishing) are told to go, and
        // killed after their grace period; shutdown waits for them to have left (their watches and
        // reapers are still running), so that no child outlives replayd.
        await shutDownExtensions()
    }

    // MARK: internals

    /// `configuration` as the engine takes it for `output`. A frame ring's pictures may change size
    /// (its reader follows): when the resolution changes, a broadcast's screen is not scaled into its
    /// first size, and an app's capture or broadcast takes the new size (its windows beyond the old
    /// one included). A file or a clip has one size.
    static func engineConfiguration(_ configuration: EngineConfiguration, for output: SessionOutput) -> EngineConfiguration {
        var configuration = configuration
        if case .ring = output { configuration.screenSizeChanges = .followed }
        return configuration
    }

    /// Opens the engine for `options`, then its output: the file (last: nothing is left on disk
    /// when anything before fails), the clip buffer or the frame ring, attached to the engine.
    private nonisolated static func prepare(_ options: RecordingOptions, configuration: EngineConfiguration, output: SessionOutput,
                                            logger: Logger) async throws(ReplayError) -> (RecordingEngine, ClipBuffer?, RingTap?) {
        let engine: RecordingEngine
        do throws(EngineError) {
            engine = try await RecordingEngine.prepare(configuration: Self.engineConfiguration(configuration, for: output), logger: logger)
        } catch {
            throw ReplayError(error)
        }
        if case .clip(let seconds) = output {
            // Two seconds more than asked: a clip of N seconds starts at the keyframe before them.
            let clip = ClipBuffer(seconds: seconds + SessionOutput.keyframeMargin, logger: logger)
            do throws(EngineError) {
                try engine.attach(clip)
            } catch {
                throw ReplayError(error)
            }
            return (engine, clip, nil)
        }
        if case .ring = output {
            let ring = try RingTap(width: engine.width, height: engine.height, name: "\(Self.ringName)-\(options.display)", logger: logger)
            do throws(EngineError) {
                try engine.attach(tap: ring)
                try engine.attach(audioTap: ring)
            } catch {
                ring.close()
                throw ReplayError(error)
            }
            return (engine, nil, ring)
        }
        let writer: MovieWriter
        do throws(MediaError) {
            writer = try MovieWriter(path: options.outputPath, logger: logger)
        } catch {
            throw ReplayError(error)
        }
        do throws(EngineError) {
            try engine.attach(writer)
        } catch {
            unlink(options.outputPath)
            throw ReplayError(error)
        }
        return (engine, nil, nil)
    }

    /// Runs the engine (off this actor) until it has finished the file. Cancelled (the server's tasks
    /// stopped before the session was), it stops the engine, which still finishes the file.
    private nonisolated static func runToEnd(_ recorder: RecordingEngine) async -> ReplayError? {
        await withTaskCancellationHandler {
            do throws(EngineError) {
                try await recorder.run()
                return nil
            } catch {
                return ReplayError(error)
            }
        } onCancel: {
            recorder.stop()
        }
    }

    private func stopFromIndicator(slot: SessionSlot, sessionID: String) async {
        guard slots[slot]?.machine.current?.id == sessionID else { return }
        logger.info("the indicator was clicked", metadata: ["session": "\(sessionID)"])
        if slot.owner != nil {
            // The person stopped an app's session: it ends as when the system interrupts it.
            slots[slot]?.discardReason = ReplayError(.interrupted, "the person stopped this app's recording with the indicator: it was discarded.")
        }
        _ = await stop(slot)
    }

    private func runEnded(slot: SessionSlot, sessionID: String, recorder finished: RecordingEngine, error: ReplayError?, logger: Logger) async {
        guard case .sessionEnded(let session) = slots[slot]?.machine.runEnded(id: sessionID) else { return }
        let indicator = slots[slot]?.indicator
        slots[slot]?.indicator = nil
        slots[slot]?.runTask = nil
        slots[slot]?.recorder = nil
        slots[slot]?.clip = nil
        // An app's start that waited for time zero hears that the session ended instead.
        slots[slot]?.capturing?.fire()
        slots[slot]?.capturing = nil
        if let counters = slots[slot]?.ring?.counters, slot == broadcastHost?.slot { broadcastHost?.framesDropped = Int(counters.framesDropped) }
        // The app's reader sees the ring closed and ends its delivery.
        slots[slot]?.ring?.close()
        slots[slot]?.ring = nil
        let discardReason = slots[slot]?.discardReason
        slots[slot]?.discardReason = nil
        let error = discardReason ?? error
        var final = makeStatus(session, state: error == nil ? .finished : .failed, recorder: finished, error: error)
        if finished.endedByPerson {
            final.warnings.append("stopped by the person from the desktop's screen-sharing indicator")
            logger.info("stopped by the person (the desktop ended the screen sharing)")
        }
        if discardReason != nil, case .movie = session.output {
            unlink(session.options.outputPath)
            logger.info("the app's recording was discarded", metadata: ["output": "\(session.options.outputPath)", "reason": "\(discardReason!.code)"])
        }
        if let error {
            logger.error("the recording ended with an error: \(error.message)", metadata: ["code": "\(error.code)"])
        } else {
            logger.info("recording finished", metadata: [
                "output": "\(final.outputPath)", "seconds": "\(final.elapsedSeconds)",
                "frames": "\(final.framesWritten)", "dropped": "\(final.framesDropped)", "bytes": "\(final.bytesWritten)",
            ])
        }
        // Who hears of this session's end is decided now: a session started while the window
        // closes below has its own subscribers and stop waiters.
        let audience = slots[slot]?.subscribers ?? []
        let waiters = slots[slot]?.stopWaiters ?? []
        slots[slot]?.stopWaiters = []
        // The broadcast's extension hears that it is over (and is killed if it does not leave).
        if slot == broadcastHost?.slot { broadcastSessionEnded() }
        // The window is gone before anyone hears that the session ended.
        await indicator?.close()
        broadcast(SessionEndedEvent(status: final, error: error), to: audience)
        // The system ended an app's session (not the app): its connections hear why.
        // (`no-session` as the reason: the app discarded it or left, so there is no one to tell.)
        let appCaused = discardReason?.code == .noSession
        if let owner = slot.owner, let error, !appCaused, waiters.isEmpty || discardReason != nil {
            broadcast(AppSessionStoppedEvent(status: final, error: error), to: connectionsOf(pid: owner))
        }
        for waiter in waiters { waiter.resume(returning: discardReason.map { .failure($0) } ?? .success(final)) }
        noteCaptured()
        if slot == .systemRecording { noteAvailability() }
        // A session's threads freed tens of MB into glibc's per-thread arenas, which keep them: once the
        // engine is gone (its last references go with this call and the run task), give them back, so
        // that a replayd that runs for days stays small.
        tasks.spawn {
            // Cancelled (replayd shuts down): the process is about to give everything back anyway.
            do { try await Task.sleep(for: .seconds(2)) } catch { return }
            await DedicatedThread.run(named: "replay-trim") { GlibcMalloc.trim() }
        }
    }

    private func resumeStopWaiters(of slot: SessionSlot, _ response: Result<SessionStatus?, ReplayError>) {
        let waiters = slots[slot]?.stopWaiters ?? []
        slots[slot]?.stopWaiters = []
        for waiter in waiters { waiter.resume(returning: response) }
    }

    func makeStatus(_ session: SessionStateMachine.Session, state: SessionStatus.State,
                            recorder: RecordingEngine?, error: ReplayError?) -> SessionStatus {
        let statistics = recorder?.statistics() ?? EngineStatistics()
        // Until time zero (the sound sources are still coming up) the session is starting.
        let state = state == .running && recorder != nil && !statistics.capturing ? .starting : state
        var status = SessionStatus(
            id: session.id, kind: session.kind, state: state, clientPID: session.clientPID, outputPath: session.options.outputPath,
            display: session.options.display, width: recorder?.width ?? 0, height: recorder?.height ?? 0,
            framesPerSecond: session.options.framesPerSecond, elapsedSeconds: statistics.elapsedSeconds,
            framesWritten: statistics.framesWritten, framesDropped: statistics.framesDropped,
            bytesWritten: statistics.bytesWritten, microphoneOn: statistics.microphoneOn,
            microphoneRecorded: recorder?.microphoneRecorded ?? false,
            systemAudioRecorded: recorder?.systemAudioRecorded ?? false,
            encoder: recorder?.encoderName ?? "", warnings: recorder?.warnings ?? [], error: error)
        if session.kind == .broadcast || session.kind == .appBroadcast { addBroadcastFields(to: &status) }
        guard case .clip(let seconds) = session.output else { return status }
        // A clip buffer's bytes are what it holds in memory now.
        let clip = slots[SessionSlot(kind: session.kind, owner: session.owner)]?.clip
        status.clipSeconds = seconds
        status.bufferedSeconds = clip?.bufferedSeconds ?? 0
        status.bytesWritten = clip?.bytesWritten ?? 0
        return status
    }

    private static func makeSessionID() -> String {
        let digits = Array("0123456789abcdef")
        return "rec-" + String((0..<8).map { _ in digits[Int.random(in: 0..<16)] })
    }
}

/// Fires its signal at the first picture the engine takes, which it takes at its time zero (the
/// capture thread's first tick): the event `waitUntilCapturing` waits for, instead of polling.
private final class FirstPictureTap: FrameTap {
    private let signal: OneShotSignal

    init(_ signal: OneShotSignal) {
        self.signal = signal
    }

    func receive(_ picture: VideoFrame, tick: Int64, time: Int64) {
        signal.fire()
    }
}
