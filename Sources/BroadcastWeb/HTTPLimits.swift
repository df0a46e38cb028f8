import Foundation
import Hummingbird
import HummingbirdCore
import Logging
public import NIOCore
import Synchronization

/// Limits on HTTP clients, applied to the raw bytes before Hummingbird's HTTP decoder sees them: a request
/// head must arrive within `headerTimeout`, a connection waiting for its next request (or in the middle of
/// a body) is closed after `idleTimeout` of silence, and requests over a limit get an answer (400, 408,
/// 411, 413, 414, 431, 503) with `Connection: close`, then the connection is closed.
public struct HTTPLimits: Sendable, Equatable {
    public var headerTimeout: TimeAmount
    public var idleTimeout: TimeAmount
    /// The request line (method, target, version): 414 above.
    public var maximumRequestLineLength: Int
    /// The whole head (request line and headers): 431 above.
    public var maximumHeadBytes: Int
    /// Header lines: 431 above.
    public var maximumHeaderCount: Int
    /// A declared `Content-Length`: 413 above.
    public var maximumBodyBytes: Int
    /// Open connections from one client address: more are answered 503 and closed. 0: no limit.
    public var maximumConnectionsPerAddress: Int

    public init(headerTimeout: TimeAmount = .seconds(10), idleTimeout: TimeAmount = .seconds(30), maximumRequestLineLength: Int = 8 << 10,
                maximumHeadBytes: Int = 32 << 10, maximumHeaderCount: Int = 100, maximumBodyBytes: Int = 1 << 20,
                maximumConnectionsPerAddress: Int = 64) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        self.maximumRequestLineLength = maximumRequestLineLength
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumHeaderCount = maximumHeaderCount
        self.maximumBodyBytes = maximumBodyBytes
        self.maximumConnectionsPerAddress = maximumConnectionsPerAddress
    }
}

/// A refusal: the status and a short reason for the client and the log.
struct HTTPRefusal: Equatable, Sendable {
    var status: Int
    var reason: String

    var statusText: String {
        switch status {
        case 400: "Bad Request"
        case 408: "Request Timeout"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 431: "Request Header Fields Too Large"
        default: "Service Unavailable"
        }
    }

    /// The whole answer, closing the connection.
    var response: String {
        let body = reason + "\n"
        return "HTTP/1.1 \(status) \(statusText)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Connection: close\r\n\r\n" + body
    }
}

/// Follows the request heads in a connection's bytes (pure: bytes in, a verdict out). Bodies are skipped by
/// their `Content-Length`; after a head asking to upgrade (WebSocket) the rest is not HTTP.
struct HTTPHeadScanner: Sendable {
    enum State: Equatable, Sendable {
        /// Between requests; `started` once a byte of the next head came.
        case head(started: Bool)
        case body(remaining: Int)
        case upgraded
        case refused
    }

    let limits: HTTPLimits
    private(set) var state = State.head(started: false)
    private var line: [UInt8] = []
    private var headBytes = 0
    private var headerCount = 0
    private var sawRequestLine = false
    private var contentLength: Int?
    private var chunked = false
    private var upgrade = false

    init(limits: HTTPLimits) { self.limits = limits }

    var isReadingHead: Bool { state == .head(started: true) }

    /// Feeds received bytes; a refusal ends the scanning.
    mutating func feed(_ bytes: some Collection<UInt8>) -> HTTPRefusal? {
        var index = bytes.startIndex
        while index != bytes.endIndex {
            switch state {
            case .upgraded, .refused:
                return nil
            case .body(let remaining):
                let available = bytes.distance(from: index, to: bytes.endIndex)
                let taken = min(remaining, available)
                index = bytes.index(index, offsetBy: taken)
                state = remaining == taken ? .head(started: false) : .body(remaining: remaining - taken)
            case .head:
                let byte = bytes[index]
                index = bytes.index(after: index)
                if let refusal = take(byte) {
                    state = .refused
                    return refusal
                }
            }
        }
        return nil
    }

    private mutating func take(_ byte: UInt8) -> HTTPRefusal? {
        if state == .head(started: false) {
            // Blank lines before a request are allowed (RFC 9112 §2.2).
            if byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") { return nil }
            state = .head(started: true)
        }
        headBytes += 1
        if !sawRequestLine, line.count >= limits.maximumRequestLineLength {
            return HTTPRefusal(status: 414, reason: "The request line is longer than \(limits.maximumRequestLineLength) bytes.")
        }
        if headBytes > limits.maximumHeadBytes {
            return HTTPRefusal(status: 431, reason: "The request head is larger than \(limits.maximumHeadBytes) bytes.")
        }
        guard byte == UInt8(ascii: "\n") else {
            line.append(byte)
            return nil
        }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        defer { line.removeAll(keepingCapacity: true) }
        if !sawRequestLine {
            sawRequestLine = true
            return Self.checkRequestLine(line)
        }
        if line.isEmpty { return endOfHead() }
        headerCount += 1
        if headerCount > limits.maximumHeaderCount {
            return HTTPRefusal(status: 431, reason: "More than \(limits.maximumHeaderCount) header fields.")
        }
        return header(line)
    }

    static func checkRequestLine(_ line: [UInt8]) -> HTTPRefusal? {
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        let tchar: (UInt8) -> Bool = { b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(tchar), !parts[1].isEmpty,
              parts[1].allSatisfy({ $0 > 0x20 && $0 != 0x7F }),
              parts[2].elementsEqual("HTTP/1.1".utf8) || parts[2].elementsEqual("HTTP/1.0".utf8) else {
            return HTTPRefusal(status: 400, reason: "Malformed request line.")
        }
        return nil
    }

    private mutating func header(_ line: [UInt8]) -> HTTPRefusal? {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0,
              line[0] != UInt8(ascii: " "), line[0] != UInt8(ascii: "\t"), !line[..<colon].contains(UInt8(ascii: " ")) else {
            return HTTPRefusal(status: 400, reason: "Malformed header field.")
        }
        let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
        let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: .whitespaces)
        switch name {
        case "content-length":
            guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return HTTPRefusal(status: 400, reason: "Malformed Content-Length.")
            }
            guard value.count <= 18, let length = Int(value), length <= limits.maximumBodyBytes else {
                return HTTPRefusal(status: 413, reason: "The body is larger than \(limits.maximumBodyBytes) bytes.")
            }
            if let contentLength, contentLength != length { return HTTPRefusal(status: 400, reason: "Conflicting Content-Length.") }
            contentLength = length
        case "transfer-encoding":
            chunked = true
        case "upgrade":
            upgrade = true
        default:
            break
        }
        return nil
    }

    private mutating func endOfHead() -> HTTPRefusal? {
        defer {
            headBytes = 0
            headerCount = 0
            sawRequestLine = false
            contentLength = nil
            chunked = false
            upgrade = false
        }
        if chunked { return HTTPRefusal(status: 411, reason: "Send a Content-Length; chunked request bodies are not accepted.") }
        if upgrade {
            state = .upgraded
        } else if let contentLength, contentLength > 0 {
            state = .body(remaining: contentLength)
        } else {
            state = .head(started: false)
        }
        return nil
    }
}

/// Open connections per client address.
final class ConnectionCounter: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    /// Counts a connection in; returns how many that address now has open.
    func opened(_ address: String) -> Int {
        counts.withLock { $0[address, default: 0] += 1; return $0[address]! }
    }

    func closed(_ address: String) {
        counts.withLock { c in
            let n = (c[address] ?? 1) - 1
            c[address] = n > 0 ? n : nil
        }
    }
}

/// The first handler of every HTTP connection: drives an `HTTPHeadScanner` and the timeouts, answers
/// refusals itself (in raw bytes) and closes.
final class HTTPRequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private var scanner: HTTPHeadScanner
    private let connections: ConnectionCounter
    private let logger: Logger
    private var address: String?
    private var headStarted = NIODeadline.now()
    private var lastActivity = NIODeadline.now()
    private var timer: Scheduled<Void>?
    private var refused = false

    init(limits: HTTPLimits, connections: ConnectionCounter, logger: Logger) {
        scanner = HTTPHeadScanner(limits: limits)
        self.connections = connections
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        let address = context.remoteAddress?.ipAddress ?? "?"
        self.address = address
        let open = connections.opened(address)
        lastActivity = .now()
        context.fireChannelActive()
        let maximum = scanner.limits.maximumConnectionsPerAddress
        if maximum > 0, open > maximum {
            refuse(HTTPRefusal(status: 503, reason: "Too many connections from your address (at most \(maximum))."), context: context)
            return
        }
        scheduleCheck(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let address { connections.closed(address) }
        address = nil
        timer?.cancel()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        let buffer = unwrapInboundIn(data)
        let wasReading = scanner.isReadingHead
        lastActivity = .now()
        if let refusal = scanner.feed(buffer.readableBytesView) {
            refuse(refusal, context: context)
            return
        }
        if !wasReading, scanner.isReadingHead {
            // The header timeout is usually shorter than the idle one: move the timer forward.
            headStarted = .now()
            timer?.cancel()
            scheduleCheck(context: context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        lastActivity = .now()
        if let status = upgradeRefusalStatus {
            upgradeRefusalStatus = nil
            let refused = "HTTP/1.1 400 Bad Request\r\n"
            if case .byteBuffer(var buffer) = unwrapOutboundIn(data), buffer.readableBytes >= refused.utf8.count, buffer.getString(at: buffer.readerIndex, length: refused.utf8.count) == refused {
                buffer.moveReaderIndex(forwardBy: refused.utf8.count)
                var answer = ByteBuffer(string: "HTTP/1.1 \(status) \(status == 401 ? "Unauthorized" : "Forbidden")\r\n")
                if status == 401 { answer.writeString("WWW-Authenticate: Bearer\r\n") }
                answer.writeBuffer(&buffer)
                context.write(wrapOutboundOut(.byteBuffer(answer)), promise: promise)
                return
            }
        }
        context.write(data, promise: promise)
    }

    /// Set by a WebSocket route that refused an upgrade: the status its answer should have. Hummingbird
    /// answers every refused upgrade 400; this turns that status line into `status`.
    private var upgradeRefusalStatus: Int?

    /// Makes the next refused-upgrade answer on `channel` carry `status` (401 for a missing or wrong key).
    static func answerRefusedUpgrade(on channel: any Channel, status: Int) async {
        try? await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.handler(type: HTTPRequestGuard.self).upgradeRefusalStatus = status
        }.get()
    }

    /// When the connection must have made progress by, or nil when no timer applies (upgraded).
    private var deadline: NIODeadline? {
        switch scanner.state {
        case .upgraded, .refused: nil
        case .head(started: true): headStarted + scanner.limits.headerTimeout
        case .head(started: false), .body: lastActivity + scanner.limits.idleTimeout
        }
    }

    private func scheduleCheck(context: ChannelHandlerContext) {
        guard let deadline else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            self.check(context: context)
        }
    }

    private func check(context: ChannelHandlerContext) {
        guard !refused, context.channel.isActive, let deadline else { return }
        if deadline <= .now() {
            if scanner.isReadingHead {
                refuse(HTTPRefusal(status: 408, reason: "The request head did not arrive in time."), context: context)
            } else {
                context.close(promise: nil)
            }
            return
        }
        scheduleCheck(context: context)
    }

    /// Answers, closes the output, and closes entirely a moment later, reading and dropping whatever the
    /// client still sends meanwhile (so that the answer is not lost to a reset).
    private func refuse(_ refusal: HTTPRefusal, context: ChannelHandlerContext) {
        refused = true
        timer?.cancel()
        logger.notice("HTTP request refused", metadata: ["status": "\(refusal.status)", "reason": "\(refusal.reason)",
                                                         "peer": "\(address ?? "?")"])
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(ByteBuffer(string: refusal.response)))).whenComplete { _ in
            channel.close(mode: .output).whenFailure { _ in channel.close(promise: nil) }
            channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        }
    }
}

/// An HTTP child channel with an `HTTPRequestGuard` in front of everything else.
struct GuardedHTTPChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value
    let inner: Inner
    let limits: HTTPLimits
    let connections: ConnectionCounter

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(HTTPRequestGuard(limits: limits, connections: connections, logger: logger), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}
