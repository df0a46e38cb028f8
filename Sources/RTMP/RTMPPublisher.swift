public import Logging
public import NIOCore
public import NIOPosix
import Synchronization

/// Where to publish: `rtmp://HOST[:PORT]/APP/STREAM_KEY`.
public struct RTMPPublishTarget: Sendable, Hashable {
    public var host: String
    public var port: Int
    public var app: String
    public var streamKey: String

    public init(host: String, port: Int = 1935, app: String, streamKey: String) {
        self.host = host
        self.port = port
        self.app = app
        self.streamKey = streamKey
    }

    /// Parses `rtmp://HOST[:PORT]/APP/STREAM_KEY` (an IPv6 host in brackets).
    public init(url: String) throws(RTMPPublishError) {
        func refuse() -> RTMPPublishError {
            RTMPPublishError(code: .connectionFailed, message: "cannot read the URL; expected rtmp://HOST[:PORT]/APP/STREAM_KEY")
        }
        guard url.lowercased().hasPrefix("rtmp://") else { throw refuse() }
        let rest = url.dropFirst("rtmp://".count)
        guard let slash = rest.firstIndex(of: "/") else { throw refuse() }
        let authority = rest[..<slash]
        let path = rest[rest.index(after: slash)...]
        guard let appEnd = path.firstIndex(of: "/") else { throw refuse() }
        let app = String(path[..<appEnd]), key = String(path[path.index(after: appEnd)...])
        var host = String(authority), port = 1935
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { guard let p = Int(after.dropFirst()) else { throw refuse() }; port = p }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let p = Int(authority[authority.index(after: colon)...]) else { throw refuse() }
            port = p
        }
        guard !host.isEmpty, !app.isEmpty, !key.isEmpty, (1...65535).contains(port) else { throw refuse() }
        self.init(host: host, port: port, app: app, streamKey: key)
    }

    /// `rtmp://HOST:PORT/APP`, as `connect` reports it.
    public var applicationURL: String {
        "rtmp://\(host.contains(":") ? "[\(host)]" : host):\(port)/\(app)"
    }
}

/// An RTMP publishing client over SwiftNIO: connects, publishes a stream key, and sends FLV tags (an AVC
/// sequence header and NAL units, an AAC sequence header and frames) until the body returns, then
/// unpublishes and closes. The protocol is `RTMPPublishStateMachine`; this only moves its bytes.
///
/// ```swift
/// try await RTMPPublisher.publish(to: RTMPPublishTarget(url: "rtmp://host/live/KEY"), logger: logger) { session in
///     try await session.send(.sequenceHeader(avcC), timestamp: 0)
///     try await session.send(FLVVideoTag(frameType: .keyframe, packet: .nalus(nalus, compositionTime: 0)), timestamp: 0)
/// }
/// ```
/// A refused stream key throws `RTMPPublishError` with code `.publishRefused` (and the server's status,
/// e.g. `NetStream.Publish.BadName`); a publish the server ends (a revoked key) fails the next `send` with
/// `.publishEnded`.
public enum RTMPPublisher {
    public static func publish<Result: Sendable>(
        to target: RTMPPublishTarget, setupTimeout: TimeAmount = .seconds(10),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger,
        _ body: (RTMPPublishSession) async throws -> Result
    ) async throws -> Result {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: group)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .connectTimeout(setupTimeout)
                .connect(host: target.host, port: target.port) { channel in
                    channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
                }
        } catch {
            throw RTMPPublishError(code: .connectionFailed, message: "cannot connect to \(target.host):\(target.port): \(error)")
        }
        var tagged = logger
        tagged[metadataKey: "rtmp"] = "\(target.applicationURL)"
        let logger = tagged
        let machine = RTMPPublishStateMachine(app: target.app, streamKey: target.streamKey, tcURL: target.applicationURL)
        return try await channel.executeThenClose { inbound, outbound in
            let session = RTMPPublishSession(machine: machine, channel: channel.channel, outbound: outbound)
            let timeout = channel.channel.eventLoop.scheduleTask(in: setupTimeout) {
                session.end(RTMPPublishError(code: .timedOut, message: "no publish within \(setupTimeout.nanoseconds / 1_000_000) ms"))
            }
            defer { timeout.cancel() }
            try await outbound.write(session.start())
            return try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { await session.read(inbound, logger: logger) }
                defer { tasks.cancelAll() }
                try await session.waitUntilPublishing()
                timeout.cancel()
                logger.debug("RTMP publishing")
                let result = try await body(session)
                try await session.finish()
                return result
            }
        }
    }
}

/// A running publish: send media with `send`, from one task (messages go out in the order sent).
public final class RTMPPublishSession: Sendable {
    private struct State: Sendable {
        var machine: RTMPPublishStateMachine
        /// Set once the publish failed or ended.
        var failure: RTMPPublishError?
        var published = false
        var waiter: CheckedContinuation<Void, any Error>?
    }

    private let state: Mutex<State>
    private let channel: any Channel
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>

    init(machine: RTMPPublishStateMachine, channel: any Channel, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) {
        state = Mutex(State(machine: machine))
        self.channel = channel
        self.outbound = outbound
    }

    /// Why the publish ended, once it has (the server ended it, or closed the connection).
    public var failure: RTMPPublishError? { state.withLock { $0.failure } }

    /// Sends an H.264 tag at `timestamp` (decoding time, milliseconds from the start).
    public func send(_ tag: FLVVideoTag, timestamp: UInt32) async throws {
        try await write(state.withLock { s throws(RTMPPublishError) in
            if let failure = s.failure { throw failure }
            return try s.machine.video(tag, timestamp: timestamp)
        })
    }

    /// Sends an AAC tag at `timestamp` (milliseconds from the start).
    public func send(_ tag: FLVAudioTag, timestamp: UInt32) async throws {
        try await write(state.withLock { s throws(RTMPPublishError) in
            if let failure = s.failure { throw failure }
            return try s.machine.audio(tag, timestamp: timestamp)
        })
    }

    private func write(_ bytes: ByteBuffer) async throws {
        do { try await outbound.write(bytes) } catch {
            // A server that ends the publish says why just before it closes: give the reader a moment to read it.
            for _ in 0..<20 where failure == nil { try? await Task.sleep(for: .milliseconds(50)) }
            throw failure ?? RTMPPublishError(code: .connectionClosed, message: "the connection closed while publishing: \(error)")
        }
    }

    func start() -> ByteBuffer { state.withLock { $0.machine.start() } }

    /// Reads the server until the connection closes, answering what the state machine says.
    func read(_ inbound: NIOAsyncChannelInboundStream<ByteBuffer>, logger: Logger) async {
        do {
            for try await bytes in inbound {
                let actions = state.withLock { $0.machine.receive(bytes) }
                for action in actions {
                    switch action {
                    case .send(let reply): try await outbound.write(reply)
                    case .publishing: markPublishing()
                    case .fail(let error):
                        logger.warning("RTMP publish failed", metadata: ["error": "\(error)"])
                        end(error)
                        return
                    }
                }
            }
        } catch {
            logger.debug("RTMP connection error", metadata: ["error": "\(error)"])
        }
        if let error = state.withLock({ $0.machine.connectionClosed() }) { end(error) }
    }

    /// Records `error` (the first one counts), wakes a waiting `waitUntilPublishing` and closes the connection.
    func end(_ error: RTMPPublishError) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, any Error>? in
            if s.failure == nil { s.failure = error }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(throwing: error)
        channel.close(promise: nil)
    }

    private func markPublishing() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, any Error>? in
            s.published = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    func waitUntilPublishing() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let ready: Result<Void, RTMPPublishError>? = state.withLock { s in
                if let failure = s.failure { return .failure(failure) }
                if s.published { return .success(()) }
                s.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready.mapError { $0 as any Error }) }
        }
        if let failure { throw failure }
    }

    /// Unpublishes and closes the connection.
    func finish() async throws {
        let bytes = state.withLock { $0.machine.unpublish() }
        if bytes.readableBytes > 0 { try? await outbound.write(bytes) }
        // Writes and the close run in order on the channel's loop: the unpublish goes out first.
        try? await channel.close()
        if let failure { throw failure }
    }
}
