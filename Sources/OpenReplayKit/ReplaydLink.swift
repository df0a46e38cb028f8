import Foundation
import ReplayIPC
import Synchronization

/// The library's one connection to replayd, opened on first use (replayd is started when nobody
/// answers, as `replay` does) and kept for the life of the process: replayd knows the app by it
/// (SO_PEERCRED), and ends the app's sessions when it closes. Events go to `onEvent`.
///
/// If replayd goes away, the next request opens a new connection.
final class ReplaydLink: Sendable {
    private struct State {
        var connection: ControlConnection?
        var opening: [CheckedContinuation<Result<ControlConnection, RPRecordingError>, Never>]?
    }

    private let state = Mutex(State())
    private let onEvent: @Sendable (ControlEvent) -> Void
    private let onClose: @Sendable () -> Void

    init(onEvent: @escaping @Sendable (ControlEvent) -> Void, onClose: @escaping @Sendable () -> Void) {
        self.onEvent = onEvent
        self.onClose = onClose
    }

    /// Sends `method` and waits for its answer; replayd's error as ReplayKit's.
    func request<Method: ControlMethod>(_ method: Method, starting: Bool = false) async throws(RPRecordingError) -> Method.Answer {
        let connection = try await connect()
        do throws(ReplayError) {
            return try await connection.request(method)
        } catch {
            throw RPRecordingError(error, starting: starting)
        }
    }

    /// True when a connection is open now (nothing is started).
    var isConnected: Bool { state.withLock { $0.connection != nil } }

    private func connect() async throws(RPRecordingError) -> ControlConnection {
        enum Step { case ready(ControlConnection), wait, open }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<ControlConnection, RPRecordingError>, Never>) in
            let step: Step = state.withLock { state in
                if let connection = state.connection { return .ready(connection) }
                if state.opening != nil {
                    state.opening!.append(continuation)
                    return .wait
                }
                state.opening = [continuation]
                return .open
            }
            switch step {
            case .ready(let connection): continuation.resume(returning: .success(connection))
            case .wait: break
            case .open: open()
            }
        }
        return try result.get()
    }

    private func finishOpening(_ result: Result<ControlConnection, RPRecordingError>) {
        let waiters = state.withLock { state in
            if case .success(let connection) = result { state.connection = connection }
            defer { state.opening = nil }
            return state.opening ?? []
        }
        for waiter in waiters { waiter.resume(returning: result) }
    }

    /// Starts the task that owns the connection for as long as it lives.
    private func open() {
        let paths = ControlPaths.forCurrentUser()
        Task.detached { [self] in
            do throws(ReplayError) {
                let daemon = DaemonLauncher.besideCurrentExecutable() ?? Spawn.executable(named: "replayd")
                try await DaemonLauncher.ensureRunning(paths: paths, executable: daemon)
            } catch {
                finishOpening(.failure(RPRecordingError(error)))
                return
            }
            do {
                try await ControlConnection.withConnection(socketPath: paths.socket, software: "OpenReplayKit 0.1") { connection in
                    finishOpening(.success(connection))
                    for await event in connection.events { onEvent(event) }
                }
            } catch let error as ReplayError {
                finishOpening(.failure(RPRecordingError(error)))
            } catch {
                finishOpening(.failure(RPRecordingError(.failedApplicationConnectionInvalid, "cannot reach replayd: \(error)")))
            }
            state.withLock { $0.connection = nil }
            onClose()
        }
    }
}
