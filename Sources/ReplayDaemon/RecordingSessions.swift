package import ReplayIPC
package import Logging
import ReplayCapture
import Foundation

/// Owns the one system session: the state machine, the `ScreenRecorder`, its indicator and the
/// task that runs it; and the connections that listen to it. Every `await` is followed by asking
/// the state machine again.
package actor RecordingSessions {
    package typealias Outbox = AsyncStream<ControlMessage>.Continuation

    private let logger: Logger
    private var machine = SessionStateMachine()
    private var recorder: ScreenRecorder?
    private var indicator: RecordingIndicator?
    private var runTask: Task<Void, Never>?
    private var stopWaiters: [CheckedContinuation<ControlResponse, Never>] = []
    private var connections: [UInt64: Outbox] = [:]
    private var subscribers: Set<UInt64> = []
    private var nextConnectionID: UInt64 = 1
    package private(set) var isShuttingDown = false

    package init(logger: Logger) {
        self.logger = logger
    }

    // MARK: connections

    /// Registers a connection's outbox; nil when replayd is shutting down (then say goodbye).
    package func register(_ outbox: Outbox) -> UInt64? {
        guard !isShuttingDown else { return nil }
        let id = nextConnectionID
        nextConnectionID += 1
        connections[id] = outbox
        return id
    }

    package func unregister(_ id: UInt64) {
        connections[id] = nil
        subscribers.remove(id)
    }

    package func subscribe(_ id: UInt64) -> SessionStatus? {
        if connections[id] != nil { subscribers.insert(id) }
        return status()
    }

    /// Ends every connection once what is queued for it has been written.
    package func closeAllConnections() {
        for outbox in connections.values { outbox.finish() }
        connections = [:]
        subscribers = []
    }

    /// True while a session exists or a client is connected (replayd must not leave by itself).
    package var isBusy: Bool { !machine.isIdle || !connections.isEmpty }

    /// Sends the running session's status to subscribers (called about twice a second).
    package func publishStatus() {
        guard !subscribers.isEmpty, let status = status(), status.state == .running || status.state == .stopping else { return }
        broadcast(.event(.status(status)))
    }

    private func broadcast(_ message: ControlMessage) {
        for id in subscribers { connections[id]?.yield(message) }
    }

    // MARK: requests

    package func start(options: RecordingOptions, clientPID: Int32, connection: UInt64?) async -> ControlResponse {
        guard !isShuttingDown else {
            return .failure(ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment."))
        }
        if let error = Self.check(options) { return .failure(error) }
        let session = SessionStateMachine.Session(id: Self.makeSessionID(), clientPID: clientPID,
                                                  options: options, startedAt: Date())
        switch machine.startRequested(session) {
        case .reject(let error):
            return .failure(error)
        case .prepare:
            break
        }
        if let connection, connections[connection] != nil { subscribers.insert(connection) }
        var sessionLogger = logger
        sessionLogger[metadataKey: "session"] = "\(session.id)"
        sessionLogger.info("starting a recording", metadata: [
            "output": "\(options.outputPath)", "display": "\(options.display)", "client-pid": "\(clientPID)",
        ])

        let prepared: ScreenRecorder
        do {
            prepared = try await ScreenRecorder.prepare(options: options, logger: sessionLogger)
        } catch {
            _ = machine.prepareFailed(id: session.id)
            sessionLogger.notice("the recording could not start: \(error.message)", metadata: ["code": "\(error.code)"])
            resumeStopWaiters(.failure(error))
            return .failure(error)
        }

        let action = machine.prepareSucceeded(id: session.id)
        guard action != .discard else {
            // Cannot happen while this actor is the only writer of the machine; finish the file anyway.
            prepared.stop()
            try? await prepared.run()
            return .failure(ReplayError(.internal, "the recording was abandoned while it started. Run the command again."))
        }
        recorder = prepared
        if action == .beginAndStop { prepared.stop() }

        // The indicator, on the recorded display, left out of the frames.
        do {
            let indicator = try await RecordingIndicator.open(display: options.display, logger: sessionLogger) { [weak self] in
                Task { await self?.stopFromIndicator(sessionID: session.id) }
            }
            if machine.current?.id == session.id {
                prepared.exclude(window: indicator.windowID)
                self.indicator = indicator
            } else {
                await indicator.close()
            }
        } catch {
            sessionLogger.warning("no recording indicator: \(error.message)")
        }

        runTask = Task { [prepared, sessionLogger] in
            let failure = await Self.runToEnd(prepared)
            await self.runEnded(sessionID: session.id, recorder: prepared, error: failure, logger: sessionLogger)
        }
        sessionLogger.info("recording", metadata: ["size": "\(prepared.width)x\(prepared.height)", "encoder": "\(prepared.encoderName)"])
        return .success(status())
    }

    /// Stops the running session and answers once its file is finished.
    package func stop() async -> ControlResponse {
        switch machine.stopRequested() {
        case .nothingRecording:
            return .failure(ReplayError(.noSession, "nothing is recording."))
        case .stopRecorder(let session):
            logger.info("stopping the recording", metadata: ["session": "\(session.id)"])
            recorder?.stop()
        case .waitForEnd:
            break
        }
        return await withCheckedContinuation { stopWaiters.append($0) }
    }

    package func setMicrophone(on: Bool) -> ControlResponse {
        guard let session = machine.current else {
            return .failure(ReplayError(.noSession, "nothing is recording: start a recording with `replay record --mic`."))
        }
        guard let recorder else {
            return .failure(ReplayError(.badRequest, "the recording is still starting: try again in a moment."))
        }
        guard recorder.microphoneRecorded else {
            return .failure(ReplayError(.badRequest, "this recording has no microphone track (it was started without --mic, or no microphone was found): the microphone can only be muted and unmuted in a recording started with `replay record --mic`."))
        }
        recorder.setMicrophone(on: on)
        logger.info("microphone \(on ? "on" : "off")", metadata: ["session": "\(session.id)"])
        return .success(status())
    }

    /// What runs now, or nil.
    package func status() -> SessionStatus? {
        guard let session = machine.current, let state = machine.statusState else { return nil }
        return makeStatus(session, state: state, recorder: recorder, error: nil)
    }

    /// Stops what runs and waits for its file to be finished (SIGTERM, SIGINT, idle).
    package func shutdown() async {
        isShuttingDown = true
        if !machine.isIdle {
            logger.notice("shutting down: finishing the recording first")
            _ = await stop()
        }
        if let runTask { await runTask.value }
    }

    // MARK: internals

    /// Runs the recorder (off this actor) until it has finished the file.
    private nonisolated static func runToEnd(_ recorder: ScreenRecorder) async -> ReplayError? {
        do {
            try await recorder.run()
            return nil
        } catch {
            return error
        }
    }

    private func stopFromIndicator(sessionID: String) async {
        guard machine.current?.id == sessionID else { return }
        logger.info("the indicator was clicked", metadata: ["session": "\(sessionID)"])
        _ = await stop()
    }

    private func runEnded(sessionID: String, recorder finished: ScreenRecorder, error: ReplayError?, logger: Logger) async {
        guard case .sessionEnded(let session) = machine.runEnded(id: sessionID) else { return }
        let indicator = self.indicator
        self.indicator = nil
        runTask = nil
        recorder = nil
        let final = makeStatus(session, state: error == nil ? .finished : .failed, recorder: finished, error: error)
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
        let audience = subscribers.compactMap { connections[$0] }
        let waiters = stopWaiters
        stopWaiters = []
        // The window is gone before anyone hears that the session ended.
        await indicator?.close()
        for outbox in audience { outbox.yield(.event(.sessionEnded(final, error))) }
        for waiter in waiters { waiter.resume(returning: .success(final)) }
    }

    private func resumeStopWaiters(_ response: ControlResponse) {
        let waiters = stopWaiters
        stopWaiters = []
        for waiter in waiters { waiter.resume(returning: response) }
    }

    private func makeStatus(_ session: SessionStateMachine.Session, state: SessionStatus.State,
                            recorder: ScreenRecorder?, error: ReplayError?) -> SessionStatus {
        let statistics = recorder?.statistics() ?? RecordingStatistics()
        // Until time zero (the sound sources are still coming up) the session is starting.
        let state = state == .running && recorder != nil && !statistics.capturing ? .starting : state
        return SessionStatus(
            id: session.id, state: state, clientPID: session.clientPID, outputPath: session.options.outputPath,
            display: session.options.display, width: recorder?.width ?? 0, height: recorder?.height ?? 0,
            framesPerSecond: session.options.framesPerSecond, elapsedSeconds: statistics.elapsedSeconds,
            framesWritten: statistics.framesWritten, framesDropped: statistics.framesDropped,
            bytesWritten: statistics.bytesWritten, microphoneOn: statistics.microphoneOn,
            microphoneRecorded: recorder?.microphoneRecorded ?? false,
            systemAudioRecorded: recorder?.systemAudioRecorded ?? false,
            encoder: recorder?.encoderName ?? "", warnings: recorder?.warnings ?? [], error: error)
    }

    /// What any client (not only `replay`, which checks the same first) must get right.
    package static func check(_ options: RecordingOptions) -> ReplayError? {
        guard options.outputPath.hasPrefix("/") else {
            return ReplayError(.badRequest, "the output path \"\(options.outputPath)\" is not absolute: send an absolute path.")
        }
        guard (1...120).contains(options.framesPerSecond) else {
            return ReplayError(.badRequest, "\(options.framesPerSecond) frames per second is outside 1...120.")
        }
        if let duration = options.durationSeconds, !(duration > 0 && duration.isFinite) {
            return ReplayError(.badRequest, "a duration of \(duration) seconds: it must be a positive number.")
        }
        guard !options.display.isEmpty else {
            return ReplayError(.noDisplay, "no X display: set DISPLAY or pass --display.")
        }
        if let region = options.region, region.width <= 0 || region.height <= 0 || region.x < 0 || region.y < 0 {
            return ReplayError(.regionOutsideScreen, "the region \(region) is not a rectangle on the screen: give WxH+X+Y with positive sizes and offsets of 0 or more.")
        }
        return nil
    }

    private static func makeSessionID() -> String {
        let digits = Array("0123456789abcdef")
        return "rec-" + String((0..<8).map { _ in digits[Int.random(in: 0..<16)] })
    }
}
