package import ReplayIPC
package import Logging
import ServiceLifecycle
import ReplayCapture
import NIOCore
import NIOPosix
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// replayd's control socket as a `Service`: accepts same-user clients on the Unix socket, answers
/// their requests through `RecordingSessions`, sends status events to subscribers about twice a
/// second, and leaves by itself after `idleExit` with no session and no client.
///
/// Graceful shutdown (SIGTERM, SIGINT through the `ServiceGroup`, or idle) stops a running
/// recording, waits for its file to be finished and for extensions to leave (killed after their
/// grace period), tells clients `sessionEnded` and goodbye, closes the socket, then cancels the
/// sessions' background tasks (`TaskOwner`, a child of `run()`'s group): none outlives `run()`.
package struct ControlServer: Service {
    package struct Configuration: Sendable {
        package var paths: ControlPaths
        /// nil or zero: never leave by itself.
        package var idleExit: Duration?
        package var software: String
        package var statusInterval: Duration
        /// How apps' consent is asked: the system window, or a fixed answer (tests only).
        package var consentPrompt: ConsentPrompt
        /// How the broadcast service is chosen when none is named: the picker window, or a fixed choice (tests only).
        package var servicePicker: ServicePicker
        /// An upload extension's resident memory limit, in MB.
        package var extensionMemoryMegabytes: Int
        /// Where to say "listening" once the socket answers (the launcher's pipe); closed then.
        package var readyDescriptor: Int32?
        /// A client that has not said hello by then is closed: a connection held open without a
        /// word holds replayd's memory and a slot of its own.
        package var helloTimeout: Duration = .seconds(10)
        /// Connections open at once, at most; more are told so and closed.
        package var maximumConnections = 256

        package init(paths: ControlPaths, idleExit: Duration?, software: String, statusInterval: Duration = .milliseconds(500),
                     consentPrompt: ConsentPrompt = .systemWindow, servicePicker: ServicePicker = .systemWindow,
                     extensionMemoryMegabytes: Int = BroadcastHostLimits.defaultMemoryMegabytes) {
            self.extensionMemoryMegabytes = extensionMemoryMegabytes
            self.paths = paths
            self.idleExit = idleExit
            self.software = software
            self.statusInterval = statusInterval
            self.consentPrompt = consentPrompt
            self.servicePicker = servicePicker
        }
    }

    private enum Trigger: Sendable, CustomStringConvertible {
        case signal, idle, listenerClosed
        var description: String {
            switch self {
            case .signal: "asked to shut down"
            case .idle: "idle"
            case .listenerClosed: "the socket closed"
            }
        }
    }

    private let configuration: Configuration
    private let logger: Logger
    private let sessions: RecordingSessions
    private let router: ControlRouter
    /// Every background task of the sessions: run and shut down by `run()` (internal for its tests).
    let tasks = TaskOwner()
    /// Connections being served now (`maximumConnections`).
    private let openConnections = OpenConnections()

    package init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.sessions = RecordingSessions(logger: logger, tasks: tasks, paths: configuration.paths, consentPrompt: configuration.consentPrompt,
                                          servicePicker: configuration.servicePicker, extensionMemoryMegabytes: configuration.extensionMemoryMegabytes)
        var router = ControlRouter()
        sessions.register(in: &router)
        self.router = router
    }

    package func run() async throws {
        let socketPath = configuration.paths.socket
        if DaemonLauncher.isListening(socketPath: socketPath) {
            throw ReplayError(.sessionActive, "another process already serves \(socketPath): is another replayd running?")
        }
        // Private from the first moment: the socket is bound under another name in the 0700 folder, made
        // 0600, and only then renamed into place, so that it is never found with other permissions. (Not
        // through umask: it is the whole process's, and a file another thread created meanwhile, an
        // in-process test's say, lost its permissions.)
        let boundPath = socketPath + ".\(getpid()).new"
        let server: NIOAsyncChannel<Connection, Never>
        // Connections accepted but not yet taken by the loop below: one accepted as the socket closes
        // never reaches the loop, and NIO traps when its writer goes unfinished; these are closed properly.
        let unserved = Mutex<[ObjectIdentifier: NIOAsyncChannel<ControlMessage, ControlMessage>]>([:])
        do {
            server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 32)
                .bind(unixDomainSocketPath: boundPath, cleanupExistingSocketFile: true) { channel in
                    // The kernel's word on who connected, read at accept (a client that already
                    // left, such as a probe of the socket, is dropped here).
                    PeerCredentials.of(channel).flatMapThrowing { peer in
                        try channel.pipeline.syncOperations.addControlMessageCodec()
                        let wrapped = try NIOAsyncChannel<ControlMessage, ControlMessage>(wrappingChannelSynchronously: channel)
                        unserved.withLock { $0[ObjectIdentifier(channel)] = wrapped }
                        return Connection(peer: peer, channel: wrapped, id: ObjectIdentifier(channel))
                    }
                }
        } catch {
            throw ReplayError(.permissionDenied, "cannot listen on \(socketPath): \(error).")
        }
        guard chmod(boundPath, 0o600) == 0, rename(boundPath, socketPath) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(boundPath)
            try? await server.channel.close()
            throw ReplayError(.permissionDenied, "cannot listen on \(socketPath): \(reason).")
        }
        defer { unlink(socketPath) }
        if let ready = configuration.readyDescriptor {
            _ = write(ready, "listening\n", 10)
            close(ready)
        }
        logger.info("listening", metadata: [
            "socket": "\(socketPath)", "pid": "\(getpid())",
            "idle-exit": "\(configuration.idleExit.map { "\($0)" } ?? "never")",
        ])

        let (triggers, trigger) = AsyncStream.makeStream(of: Trigger.self)
        let sessions = self.sessions
        let logger = self.logger
        let configuration = self.configuration
        let tasks = self.tasks
        // On Wayland, capture by others counts for `isCaptured` too (nil where PipeWire does not run).
        let screencasts = ScreencastWatch(logger: logger)
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await tasks.run() }
                if let screencasts {
                    group.addTask {
                        for await read in screencasts.changes { await sessions.compositorStreamRead(read) }
                    }
                }
                // Status events and the idle clock.
                group.addTask {
                    var idle = IdleExitPolicy(limit: configuration.idleExit)
                    while !Task.isCancelled {
                        try? await Task.sleep(for: configuration.statusInterval)
                        if await sessions.isShuttingDown { return }
                        await sessions.publishStatus()
                        if idle.update(busy: await sessions.isBusy, now: .now) {
                            trigger.yield(.idle)
                            return
                        }
                    }
                }
                // Shutdown, whatever asks for it first.
                group.addTask {
                    var iterator = triggers.makeAsyncIterator()
                    let reason = await iterator.next() ?? .listenerClosed
                    logger.info("shutting down: \(reason)")
                    await sessions.shutdown()
                    screencasts?.close()
                    server.channel.close(promise: nil)
                    await sessions.closeAllConnections()
                    // Last: the sessions' work needed its tasks (their watches kill a lingering extension).
                    tasks.shutdown()
                }
                do {
                    try await server.executeThenClose { inbound in
                        for try await connection in inbound {
                            _ = unserved.withLock { $0.removeValue(forKey: connection.id) }
                            group.addTask {
                                await self.serve(connection)
                            }
                        }
                    }
                } catch {
                    logger.error("the control socket failed: \(error)")
                }
                for channel in unserved.withLock({ $0.values }) {
                    try? await channel.executeThenClose { _, _ in }
                }
                trigger.yield(.listenerClosed)
            }
        } onGracefulShutdown: {
            trigger.yield(.signal)
        }
        logger.info("stopped")
    }

    // MARK: one connection

    private enum Side { case reader, writer, helloClock }

    /// How many connections are open, and whether one has said hello: read by its clock.
    private final class OpenConnections: Sendable {
        private let count = Mutex(0)
        /// Counts one more; false (and not counted) when `limit` are open already.
        func open(limit: Int) -> Bool {
            count.withLock { count in
                guard count < limit else { return false }
                count += 1
                return true
            }
        }
        func close() { count.withLock { $0 -= 1 } }
    }

    private final class Greeting: Sendable {
        private let said = Mutex(false)
        var isDone: Bool { said.withLock { $0 } }
        func done() { said.withLock { $0 = true } }
    }

    private struct Connection: Sendable {
        var peer: PeerCredentials
        var channel: NIOAsyncChannel<ControlMessage, ControlMessage>
        var id: ObjectIdentifier
    }

    private func serve(_ connection: Connection) async {
        let peer = connection.peer
        let channel = connection.channel
        let logger = {
            var logger = self.logger
            logger[metadataKey: "peer-pid"] = "\(peer.pid)"
            return logger
        }()
        let hello = ControlMessage.hello(Hello(role: .daemon, pid: getpid(), software: configuration.software))
        let (outbox, continuation) = AsyncStream.makeStream(of: ControlMessage.self)
        continuation.yield(hello)

        var connectionID: UInt64?
        let counted = openConnections.open(limit: configuration.maximumConnections)
        defer { if counted { openConnections.close() } }
        if !counted {
            logger.warning("refused a connection: \(configuration.maximumConnections) are open")
            continuation.yield(Self.goodbye(ReplayError(.badRequest, "replayd has \(configuration.maximumConnections) connections open, its most: a program is holding them. Close it, then try again.")))
            continuation.finish()
        } else if peer.uid != getuid() {
            logger.warning("refused a connection from another user", metadata: ["peer-uid": "\(peer.uid)"])
            continuation.yield(Self.goodbye(ReplayError(.permissionDenied, "replayd of uid \(getuid()) serves only its own user; you are uid \(peer.uid). Run your own replayd (`replay` starts it).")))
            continuation.finish()
        } else if let id = await sessions.register(continuation, pid: peer.pid) {
            connectionID = id
            logger.debug("client connected", metadata: ["connection": "\(id)"])
        } else {
            continuation.yield(Self.goodbye(ReplayError(.shuttingDown, "replayd is shutting down. Run the command again in a moment.")))
            continuation.finish()
        }

        let greeting = Greeting()
        let helloTimeout = configuration.helloTimeout
        do {
            try await channel.executeThenClose { inbound, outbound in
                await withTaskGroup(of: Side.self) { group in
                    group.addTask {
                        for await message in outbox {
                            do { try await outbound.write(message) } catch { break }
                        }
                        return .writer
                    }
                    if let connectionID {
                        group.addTask {
                            await self.read(inbound, connection: connectionID, peer: peer, greeting: greeting, outbox: continuation, logger: logger)
                            continuation.finish()
                            return .reader
                        }
                        group.addTask {
                            try? await Task.sleep(for: helloTimeout)
                            if !Task.isCancelled && !greeting.isDone {
                                logger.notice("closing a connection that said no hello within \(helloTimeout)")
                                continuation.yield(Self.goodbye(ReplayError(.badRequest, "no hello within \(helloTimeout): see docs/PROTOCOL.md.")))
                                continuation.finish()
                            }
                            return .helloClock
                        }
                    }
                    // The writer ending (replayd closing, a broken pipe, or the reader's end once
                    // what was queued is written) ends the others.
                    while let side = await group.next() {
                        if side == .writer { group.cancelAll() }
                    }
                }
            }
        } catch {
            logger.debug("connection closed: \(error)")
        }
        if let connectionID {
            await sessions.unregister(connectionID)
            logger.debug("client disconnected", metadata: ["connection": "\(connectionID)"])
        }
    }

    /// Answers the requests of one connection, in order.
    private func read(_ inbound: NIOAsyncChannelInboundStream<ControlMessage>, connection: UInt64, peer: PeerCredentials,
                      greeting: Greeting, outbox: AsyncStream<ControlMessage>.Continuation, logger: Logger) async {
        var greeted = false
        var received = false
        do {
            for try await message in inbound {
                received = true
                switch message {
                case .hello(let hello):
                    guard hello.version == controlProtocolVersion else {
                        logger.warning("refused a client of another protocol version", metadata: ["version": "\(hello.version)", "software": "\(hello.software)"])
                        outbox.yield(Self.goodbye(ReplayError(.protocolMismatch, "this client (\(hello.software)) speaks protocol version \(hello.version) and replayd (pid \(getpid())) speaks \(controlProtocolVersion): stop the old replayd (`kill \(getpid())`) and run the command again.")))
                        return
                    }
                    greeted = true
                    greeting.done()
                case .request(let id, let request):
                    guard greeted else {
                        outbox.yield(Self.goodbye(ReplayError(.badRequest, "a request came before the hello: see docs/PROTOCOL.md.")))
                        return
                    }
                    logger.debug("request", metadata: ["id": "\(id)", "method": "\(request.method)"])
                    let response = await router.answer(request, context: RequestContext(connection: connection, peer: peer))
                    outbox.yield(.response(id: id, response))
                case .response, .event:
                    outbox.yield(Self.goodbye(ReplayError(.badRequest, "clients send only hello and requests: see docs/PROTOCOL.md.")))
                    return
                }
            }
        } catch is CancellationError {
        } catch let error as IOError where !received {
            // A client that connected and left without a word (`replay` checking that replayd
            // listens) broke nothing: not worth a notice in every log.
            logger.debug("a client left without a word: \(error)")
        } catch {
            logger.notice("closing a connection that broke the protocol: \(error)")
            outbox.yield(Self.goodbye(ReplayError(.badRequest, "replayd could not read your message: \(error). See docs/PROTOCOL.md.")))
        }
    }

    /// The last message replayd sends on a connection it closes.
    static func goodbye(_ error: ReplayError) -> ControlMessage {
        // A goodbye of a code and a message always encodes.
        .event((try? ControlEvent(GoodbyeEvent(error: error))) ?? ControlEvent(name: GoodbyeEvent.event))
    }
}
