package import Logging
package import NIOCore
package import NIOPosix
import RTMP
import ServiceLifecycle
import Synchronization

/// A publisher the service accepted: where its media goes.
package struct IngestPublication: Sendable {
    package var broadcastID: String
    package var stream: LiveStream
    /// An RTMP URL to re-publish the broadcast to (a CDN or a media-server cluster), if any.
    package var relayURL: String?
    package init(broadcastID: String, stream: LiveStream, relayURL: String? = nil) {
        self.broadcastID = broadcastID
        self.stream = stream
        self.relayURL = relayURL
    }
}

/// What the ingest asks of the rest of the service.
package protocol RTMPIngestDelegate: Sendable {
    /// A client asks to publish `streamKey` in application `app`; nil refuses it.
    func startPublishing(app: String, streamKey: String, remoteAddress: String) async -> IngestPublication?
    /// The publication ended (the publisher stopped or disconnected).
    func stopPublishing(_ publication: IngestPublication) async
    /// Asked every few seconds while publishing: false disconnects the publisher (a key revoked elsewhere).
    func isStillAuthorized(streamKey: String) async -> Bool
}

extension RTMPIngestDelegate {
    package func isStillAuthorized(streamKey: String) async -> Bool { true }
}

/// The RTMP ingest server: `rtmp://HOST:PORT/live/STREAM_KEY`, one SwiftNIO connection per publisher.
///
/// Defences: a connection must finish the handshake and start publishing within `setupTimeout`, and
/// then never stay silent longer than `idleTimeout` (slowloris); messages above `maximumMessageSize`,
/// malformed chunks and unknown handshakes close the connection with a log line.
package struct RTMPIngestServer: Service {
    package struct Configuration: Sendable {
        package var host: String
        package var port: Int
        package var setupTimeout: TimeAmount
        package var idleTimeout: TimeAmount
        package var maximumMessageSize: Int
        /// Milliseconds of media per fMP4 fragment (lower is lower latency).
        package var fragmentDuration: Int64
        /// Up to this many viewers of a broadcast, every video frame is its own fragment (0: never).
        package var frameFragmentViewers: Int

        package init(host: String = "127.0.0.1", port: Int = 1935, setupTimeout: TimeAmount = .seconds(10),
                    idleTimeout: TimeAmount = .seconds(15), maximumMessageSize: Int = 8 << 20, fragmentDuration: Int64 = 100,
                    frameFragmentViewers: Int = 0) {
            self.frameFragmentViewers = frameFragmentViewers
            self.host = host
            self.port = port
            self.setupTimeout = setupTimeout
            self.idleTimeout = idleTimeout
            self.maximumMessageSize = maximumMessageSize
            self.fragmentDuration = fragmentDuration
        }
    }

    package let configuration: Configuration
    let delegate: any RTMPIngestDelegate
    let logger: Logger
    let threadPool: NIOThreadPool
    let group: any EventLoopGroup
    let onBound: @Sendable (Int) -> Void

    /// - Parameter onBound: told the bound port (useful with port 0).
    package init(configuration: Configuration, delegate: any RTMPIngestDelegate, threadPool: NIOThreadPool = .singleton,
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger,
                onBound: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.configuration = configuration
        self.delegate = delegate
        self.threadPool = threadPool
        self.group = group
        self.logger = logger
        self.onBound = onBound
    }

    package func run() async throws {
        let idle = configuration.idleTimeout
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: configuration.host, port: configuration.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idle))
                    try channel.pipeline.syncOperations.addHandler(IdleCloser())
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let port = server.channel.localAddress?.port ?? configuration.port
        logger.info("RTMP ingest listening", metadata: ["address": "rtmp://\(configuration.host):\(port)/live/STREAM_KEY"])
        onBound(port)
        try await withGracefulShutdownHandler {
            try await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        group.addTask { await self.serve(connection) }
                    }
                }
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
        }
    }

    private func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        let channel = connection.channel
        let remote = channel.remoteAddress.map { "\($0)" } ?? "?"
        var logger = self.logger
        logger[metadataKey: "peer"] = "\(remote)"
        // Handshake, connect and publish must all happen before this deadline.
        let deadlineLogger = logger
        let setupDeadline = channel.eventLoop.scheduleTask(in: configuration.setupTimeout) {
            deadlineLogger.warning("RTMP connection closed: not publishing within the setup timeout")
            channel.close(promise: nil)
        }
        var machine = RTMPConnectionStateMachine(maximumMessageSize: configuration.maximumMessageSize)
        var publication: IngestPublication?
        var pipeline: IngestPipeline?
        let watched = WatchedPublication()
        let watchLogger = logger
        await withGracefulShutdownHandler {
            do {
                try await connection.executeThenClose { inbound, outbound in
                  try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await self.watch(watched, channel: channel, outbound: outbound, logger: watchLogger) }
                    defer { group.cancelAll() }
                    reading: for try await bytes in inbound {
                        var actions = try machine.receive(bytes)
                        var index = 0
                        while index < actions.count {
                            let action = actions[index]
                            index += 1
                            switch action {
                            case .send(let reply):
                                try await outbound.write(reply)
                            case .authorize(let app, let key):
                                publication = await delegate.startPublishing(app: app, streamKey: key, remoteAddress: remote)
                                if let publication {
                                    setupDeadline.cancel()
                                    logger[metadataKey: "broadcast"] = "\(publication.broadcastID)"
                                    logger.info("RTMP publish started")
                                    pipeline = IngestPipeline(stream: publication.stream, threadPool: threadPool, logger: logger,
                                                              fragmentDuration: configuration.fragmentDuration,
                                                              frameFragmentViewers: configuration.frameFragmentViewers,
                                                              relay: publication.relayURL.map { RTMPRelay(url: $0, logger: logger) })
                                } else {
                                    logger.warning("RTMP publish refused: unknown or revoked stream key", metadata: ["key": "\(key.prefix(4))…"])
                                }
                                actions += try machine.authorization(accepted: publication != nil)
                                if let publication, case .publishing(let streamID) = machine.state {
                                    watched.set(stream: publication.stream, streamKey: key, messageStreamID: streamID)
                                }
                            case .media(let message):
                                try await pipeline?.handle(message)
                            case .close(let reason):
                                switch reason {
                                case .unknownApplication(let app):
                                    logger.warning("RTMP connect refused: unknown application", metadata: ["app": "\(app)"])
                                case .playRefused:
                                    logger.warning("RTMP play refused: this server only ingests; watch over HTTP")
                                case .streamKeyRefused, .unpublished:
                                    break
                                }
                                break reading
                            }
                        }
                    }
                  }
                }
            } catch let error as RTMPChunkError {
                logger.warning("RTMP connection closed: malformed chunk stream", metadata: ["error": "\(error)"])
            } catch let error as RTMPServerHandshake.Failure {
                logger.warning("RTMP connection closed: bad handshake", metadata: ["error": "\(error)"])
            } catch is ChannelError {
                // Closed by a timeout or the peer; already logged where it was decided.
            } catch {
                logger.warning("RTMP connection closed", metadata: ["error": "\(error)"])
            }
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
        setupDeadline.cancel()
        if var pipeline {
            await pipeline.finish()
            logger.info("RTMP publish ended", metadata: ["video": "\(pipeline.videoFrames)", "audio": "\(pipeline.audioFrames)",
                                                         "videoHeldForSuccessor": "\(pipeline.videoFramesHeld)"])
        }
        if let publication { await delegate.stopPublishing(publication) }
    }
}

extension RTMPIngestServer {
    /// While publishing: when the service ends the broadcast (its key revoked, or taken over by another
    /// publisher) or the key stops being valid, tells the publisher with an error status and closes.
    private func watch(_ watched: WatchedPublication, channel: any Channel, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
                       logger: Logger) async {
        var ticks = 0
        while true {
            do { try await Task.sleep(for: .milliseconds(100)) } catch { return }
            guard let current = watched.current else { continue }
            ticks += 1
            var why: String?
            if current.stream.isEnded {
                why = "the stream key was revoked or another publisher took it over"
            } else if ticks % 20 == 0, !(await delegate.isStillAuthorized(streamKey: current.streamKey)) {
                why = "the stream key was revoked"
            }
            guard let why else { continue }
            logger.warning("RTMP publish closed: the broadcast was ended by the service", metadata: ["why": "\(why)"])
            try? await outbound.write(RTMPConnectionStateMachine.publishEndedStatus(messageStreamID: current.messageStreamID,
                                                                                    description: "Broadcast ended: \(why)"))
            channel.close(promise: nil)
            return
        }
    }
}

/// The publication a connection carries, for its watcher.
final class WatchedPublication: Sendable {
    struct Current: Sendable {
        var stream: LiveStream
        var streamKey: String
        var messageStreamID: UInt32
    }
    private let state = Mutex<Current?>(nil)
    var current: Current? { state.withLock { $0 } }
    func set(stream: LiveStream, streamKey: String, messageStreamID: UInt32) {
        state.withLock { $0 = Current(stream: stream, streamKey: streamKey, messageStreamID: messageStreamID) }
    }
}

extension RTMPConnectionStateMachine {
    /// An `onStatus` error for a publish the service ends, encoded on its own (a full chunk header).
    static func publishEndedStatus(messageStreamID: UInt32, description: String) -> ByteBuffer {
        var encoder = RTMPChunkEncoder()
        encoder.setChunkSize(outgoingChunkSize)
        var out = ByteBuffer()
        encoder.encode(RTMPServerMessages.onStatus(level: "error", code: "NetStream.Publish.BadName", description: description,
                                                   messageStreamID: messageStreamID), into: &out)
        return out
    }
}

/// Closes a connection that stays silent past the `IdleStateHandler`'s read timeout.
final class IdleCloser: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            Logger(label: "openreplaykit.service.rtmp").warning("RTMP connection closed: idle timeout",
                                                                metadata: ["peer": "\(context.remoteAddress.map { "\($0)" } ?? "?")"])
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
