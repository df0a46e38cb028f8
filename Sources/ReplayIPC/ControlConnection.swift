import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A client's connection to replayd: hello exchanged, requests matched to responses by id,
/// unsolicited events on `events` (a client looks for the ones it knows with `ControlEvent.decode`
/// and ignores the rest). Used by the `replay` CLI (and later by the library). Its public API shows
/// no NIO type.
///
/// Opened with `withConnection`, which owns the reading task and closes the socket when the body
/// returns.
public final class ControlConnection: Sendable {
    /// replayd's hello.
    public var daemon: Hello { state.withLock { $0.daemonHello! } }
    /// Events in arrival order; finishes when replayd closes the connection.
    public let events: AsyncStream<ControlEvent>

    private let outbound: NIOAsyncChannelOutboundWriter<ControlMessage>
    private let eventLoop: any EventLoop
    private let eventsContinuation: AsyncStream<ControlEvent>.Continuation
    private let state: Mutex<State>

    private struct State {
        var nextID: UInt64 = 1
        var pending: [UInt64: EventLoopPromise<ControlResponse>] = [:]
        var daemonHello: Hello?
        var helloPromise: EventLoopPromise<Hello>?
        /// Set once replayd has gone: every later request fails with it.
        var closed: ReplayError?
    }

    private init(outbound: NIOAsyncChannelOutboundWriter<ControlMessage>, eventLoop: any EventLoop) {
        self.outbound = outbound
        self.eventLoop = eventLoop
        (self.events, self.eventsContinuation) = AsyncStream.makeStream(of: ControlEvent.self)
        self.state = Mutex(State())
    }

    /// Connects to replayd at `socketPath`, exchanges hellos (a version mismatch is an error) and
    /// runs `body` with the connection.
    public static func withConnection<Result: Sendable>(
        socketPath: String,
        software: String,
        _ body: (ControlConnection) async throws -> Result
    ) async throws -> Result {
        try ControlPaths.checkPrivate(socketPath: socketPath)
        var attempt = 0
        let channel: NIOAsyncChannel<ControlMessage, ControlMessage>
        while true {
            do {
                let connected = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connect(unixDomainSocketPath: socketPath) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addControlMessageCodec()
                            return try NIOAsyncChannel<ControlMessage, ControlMessage>(wrappingChannelSynchronously: channel)
                        }
                    }
                // The kernel's word on who listens (known once connected), before a word is sent: a
                // socket moved into our folder by someone else still answers as its maker.
                let peer = try await PeerCredentials.of(connected.channel).get()
                guard peer.uid == getuid() else {
                    try? await connected.channel.close()
                    throw ForeignDaemon(path: socketPath, uid: peer.uid)
                }
                channel = connected
                break
            } catch let error as IOError where error.errnoCode == EAGAIN && attempt < 100 {
                // A Unix socket's accept queue is full: replayd is busy accepting; try again.
                attempt += 1
                try await Task.sleep(for: .milliseconds(20))
            } catch let foreign as ForeignDaemon {
                throw ReplayError(.permissionDenied, "the program listening at \(foreign.path) runs as uid \(foreign.uid), not as you (uid \(getuid())): it is not your replayd, and replay will not talk to it. Remove the socket, then try again.")
            } catch {
                throw ReplayError(.daemonUnavailable, "cannot reach replayd at \(socketPath): \(error). Is it running? `replay record` starts it.")
            }
        }
        return try await channel.executeThenClose { inbound, outbound in
            let connection = ControlConnection(outbound: outbound, eventLoop: channel.channel.eventLoop)
            let hello = channel.channel.eventLoop.makePromise(of: Hello.self)
            connection.state.withLock { $0.helloPromise = hello }
            return try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await connection.read(inbound) }
                defer { group.cancelAll() }
                try await outbound.write(.hello(Hello(role: .client, pid: getpid(), software: software)))
                let daemon = try await hello.futureResult.get()
                guard daemon.version == controlProtocolVersion else {
                    throw ReplayError(.protocolMismatch, "replayd (pid \(daemon.pid), \(daemon.software)) speaks protocol version \(daemon.version) and this client speaks \(controlProtocolVersion): stop the old replayd (`kill \(daemon.pid)`) and run the command again.")
                }
                return try await body(connection)
            }
        }
    }

    /// Sends one request and waits for its answer, or the `ReplayError` replayd answered.
    public func request<Method: ControlMethod>(_ method: Method) async throws(ReplayError) -> Method.Answer {
        let request: ControlRequest
        do throws(ControlCodecError) {
            request = try ControlRequest(method)
        } catch {
            throw ReplayError(.internal, "cannot encode the request \(Method.method): \(error.message)")
        }
        switch try await send(request) {
        case .success(let payload):
            do throws(ControlCodecError) {
                return try payload.decode(Method.Answer.self)
            } catch {
                throw ReplayError(.protocolMismatch, "replayd's answer to \(Method.method) is not what this client expects (\(error.message)): is replayd of another version?")
            }
        case .failure(let error):
            throw error
        }
    }

    /// Sends one request as it is and waits for its response.
    public func send(_ request: ControlRequest) async throws(ReplayError) -> ControlResponse {
        let promise = eventLoop.makePromise(of: ControlResponse.self)
        let registered: Result<UInt64, ReplayError> = state.withLock { state in
            if let closed = state.closed { return .failure(closed) }
            let id = state.nextID
            state.nextID += 1
            state.pending[id] = promise
            return .success(id)
        }
        let id: UInt64
        switch registered {
        case .success(let value): id = value
        case .failure(let error):
            promise.fail(error)
            throw error
        }
        do {
            try await outbound.write(.request(id: id, request))
        } catch {
            let failure = ReplayError(.daemonUnavailable, "cannot send to replayd: \(error).")
            if let pending = state.withLock({ $0.pending.removeValue(forKey: id) }) { pending.fail(failure) }
            throw failure
        }
        do {
            // Cancelling the waiting task stops waiting (the response, if it comes, is dropped).
            return try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                if let pending = state.withLock({ $0.pending.removeValue(forKey: id) }) { pending.fail(CancellationError()) }
            }
        } catch is CancellationError {
            throw ReplayError(.internal, "cancelled while waiting for replayd.")
        } catch let error as ReplayError {
            throw error
        } catch {
            throw ReplayError(.daemonUnavailable, "lost replayd: \(error).")
        }
    }

    private func read(_ inbound: NIOAsyncChannelInboundStream<ControlMessage>) async {
        var ending = ReplayError(.daemonUnavailable, "replayd closed the connection. Its log may say why: \(ControlPaths.forCurrentUser().logFile).")
        do {
            for try await message in inbound {
                switch message {
                case .hello(let hello):
                    let promise = state.withLock { state in
                        state.daemonHello = hello
                        defer { state.helloPromise = nil }
                        return state.helloPromise
                    }
                    promise?.succeed(hello)
                case .response(let id, let response):
                    state.withLock { $0.pending.removeValue(forKey: id) }?.succeed(response)
                case .event(let event):
                    if let goodbye = event.decode(GoodbyeEvent.self) { ending = goodbye.error }
                    eventsContinuation.yield(event)
                case .request:
                    break  // replayd sends no requests
                }
            }
        } catch {
            if !(error is CancellationError) {
                ending = ReplayError(.daemonUnavailable, "the connection to replayd broke: \(error).")
            }
        }
        let (pending, hello) = state.withLock { state in
            state.closed = ending
            defer {
                state.pending = [:]
                state.helloPromise = nil
            }
            return (state.pending.values, state.helloPromise)
        }
        for promise in pending { promise.fail(ending) }
        hello?.fail(ending)
        eventsContinuation.finish()
    }
}

/// The peer of a control socket is another user's program.
private struct ForeignDaemon: Error {
    var path: String
    var uid: UInt32
}
