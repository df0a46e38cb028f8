import Foundation
import Logging
import Testing
@testable import BroadcastService
@testable import BroadcastWeb

@Suite("Security policies")
struct SecurityPolicyTests {
    // MARK: CSRF

    @Test func csrfTokensAreBoundAndCheckedInConstantShape() {
        let tokens = CSRFTokens(secret: Array(repeating: 7, count: 32))
        let token = tokens.token(for: "session/abc")
        #expect(token.count == 64 && token.allSatisfy(\.isHexDigit))
        #expect(tokens.check(token, binding: "session/abc"))
        #expect(!tokens.check(token, binding: "session/abd"), "another session")
        #expect(!tokens.check("x", binding: "nonce/x"), "a planted cookie equal to the field")
        #expect(!tokens.check(token, binding: nil) && !tokens.check(nil, binding: "session/abc"))
        #expect(CSRFTokens(secret: Array(repeating: 8, count: 32)).token(for: "session/abc") != token, "another server secret")
    }

    @Test func originPolicy() {
        let policy = RequestOriginPolicy(ownOrigin: "https://live.example")
        #expect(policy.check(origin: nil, fetchSite: nil) == .allowed, "not a browser")
        #expect(policy.check(origin: "https://live.example", fetchSite: "same-origin") == .allowed)
        #expect(policy.check(origin: nil, fetchSite: "none") == .allowed)
        #expect(policy.check(origin: "https://evil.live.example", fetchSite: nil) != .allowed, "a sibling subdomain")
        #expect(policy.check(origin: "null", fetchSite: nil) != .allowed)
        #expect(policy.check(origin: "https://live.example", fetchSite: "same-site") != .allowed)
        #expect(policy.check(origin: nil, fetchSite: "cross-site") != .allowed)
        #expect(RequestOriginPolicy.isStateChanging("POST") && RequestOriginPolicy.isStateChanging("put") && !RequestOriginPolicy.isStateChanging("GET"))
    }

    // MARK: Sign-in throttle

    @Test func loginThrottleLimitsAccountAndAddressPairs() {
        var throttle = LoginThrottle()
        for t in 0..<5 {
            #expect(throttle.decide(account: "jill", address: "10.0.0.1", now: Double(t)) == .allow)
            throttle.failed(account: "jill", address: "10.0.0.1", now: Double(t))
        }
        #expect(throttle.decide(account: "jill", address: "10.0.0.1", now: 5) == .wait(295))
        #expect(throttle.decide(account: "JILL", address: "10.0.0.1", now: 5) != .allow, "names are case-insensitive")
        #expect(throttle.decide(account: "jill", address: "10.0.0.2", now: 5) == .allow, "the owner elsewhere gets in")
        #expect(throttle.decide(account: "jack", address: "10.0.0.1", now: 5) == .allow, "other accounts from that address")
        #expect(throttle.decide(account: "jill", address: "10.0.0.1", now: 300) == .allow, "the window slides")
        throttle.succeeded(account: "jill", address: "10.0.0.2")
    }

    @Test func loginThrottleBacksOffExponentiallyPerAddress() {
        var throttle = LoginThrottle(policy: .init(failuresPerAccountAndAddress: 1000, freeFailuresPerAddress: 3, maximumBackOff: 60))
        var now = 0.0
        for n in 0..<3 { throttle.failed(account: "a\(n)", address: "x", now: now) }
        // 3 failures: the next attempt waits 1 s, then 2, 4, 8 … up to 60.
        #expect(throttle.decide(account: "b", address: "x", now: now) == .wait(1))
        #expect(throttle.decide(account: "b", address: "y", now: now) == .allow)
        var waits: [Double] = []
        for n in 0..<8 {
            guard case .wait(let w) = throttle.decide(account: "c\(n)", address: "x", now: now) else { break }
            waits.append(w)
            now += w
            #expect(throttle.decide(account: "c\(n)", address: "x", now: now) == .allow)
            throttle.failed(account: "c\(n)", address: "x", now: now)
        }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60], "\(waits)")
        // A success on one's own account does not reset the address.
        throttle.succeeded(account: "mine", address: "x")
        #expect(throttle.decide(account: "d", address: "x", now: now) != .allow)
        // Forgotten after an hour without failures.
        #expect(throttle.decide(account: "d", address: "x", now: now + 3600) == .allow)
    }

    // MARK: HTTP heads

    static func scan(_ text: String, limits: HTTPLimits = HTTPLimits(), pieces: Int = 1) -> (HTTPRefusal?, HTTPHeadScanner) {
        var scanner = HTTPHeadScanner(limits: limits)
        let bytes = Array(text.utf8)
        let size = max(1, bytes.count / pieces)
        var refusal: HTTPRefusal?
        var start = 0
        while start < bytes.count, refusal == nil {
            refusal = scanner.feed(bytes[start..<min(bytes.count, start + size)])
            start += size
        }
        return (refusal, scanner)
    }

    @Test(arguments: [1, 7, 1000])
    func wellFormedRequestsPassAndBodiesAreSkipped(pieces: Int) {
        let two = "GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 15\r\n\r\nGET / HTTP/1.\r\n"
            + "\r\nGET /again HTTP/1.0\r\n\r\n"
        let (refusal, scanner) = Self.scan(two, pieces: pieces)
        #expect(refusal == nil, "the body (15 bytes of request-like text) is not read as a head")
        #expect(scanner.state == .head(started: false))
        let (_, upgraded) = Self.scan("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{81}\u{05}hello", pieces: pieces)
        #expect(upgraded.state == .upgraded)
    }

    @Test func refusals() {
        let limits = HTTPLimits(maximumRequestLineLength: 100, maximumHeadBytes: 1000, maximumHeaderCount: 10, maximumBodyBytes: 500)
        func status(_ text: String) -> Int? { Self.scan(text, limits: limits).0?.status }
        #expect(status("GET /a b c HTTP/1.1\r\n") == 400)
        #expect(status("GET / HTTP/2.0\r\n") == 400)
        #expect(status("G@T / HTTP/1.1\r\n") == 400)
        #expect(status("GET /\(String(repeating: "a", count: 200))") == 414, "refused before the line ends")
        #expect(status("GET / HTTP/1.1\r\nX: \(String(repeating: "b", count: 2000))") == 431)
        #expect(status("GET / HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 11)) == 431)
        #expect(status("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n") == 413)
        #expect(status("POST / HTTP/1.1\r\nContent-Length: 501\r\n\r\n") == 413)
        #expect(status("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n") == 400)
        #expect(status("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n") == 400)
        #expect(status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 411)
        #expect(status("GET / HTTP/1.1\r\n folded\r\n\r\n") == 400)
        #expect(status("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == nil)
        #expect(Self.scan("GET / HTTP/1.1\r\nHost", limits: limits).1.isReadingHead)
        let response = HTTPRefusal(status: 431, reason: "Too big.").response
        #expect(response.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n") && response.contains("Connection: close\r\n")
                && response.hasSuffix("\r\n\r\nToo big.\n"))
    }

    // MARK: Logs

    @Test func logTextEscapesControlCharactersAndRedactsKeys() {
        #expect(LogText.sanitize("zz\n2026 info forged") == #"zz\n2026 info forged"#)
        #expect(LogText.sanitize("a\r\nb\u{0}c\u{1B}[31m\u{2028}") == #"a\r\nb\0c\u{1b}[31m\u{2028}"#)
        #expect(LogText.sanitize(#"back\slash"#) == #"back\\slash"#)
        #expect(LogText.sanitize("Über café ✓") == "Über café ✓")
        let key = "live_0123456789abcdef0123456789abcdef"
        #expect(LogText.sanitize("rtmp://host/\(key)/x") == "rtmp://host/live_…/x")
        #expect(LogText.sanitize("live_now") == "live_now")
    }

    @Test func sanitizingHandlerCleansMessagesAndMetadata() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorded = RecordingLogHandler()
        var logger = Logger(label: "test") { _ in SanitizingLogHandler(wrapping: recorded) }
        logger[metadataKey: "peer"] = "a\nb"
        logger.info("line\nforged", metadata: ["user": "x\ry"])
        let event = try #require(recorded.events.first)
        #expect(event.message == #"line\nforged"#)
        #expect(event.metadata["user"] == #"x\ry"# && event.metadata["peer"] == #"a\nb"#)
    }
}

/// Records what reaches it, as text.
final class RecordingLogHandler: LogHandler, @unchecked Sendable {
    // @unchecked: used from one test's thread only.
    struct Event { var message: String; var metadata: [String: String] }
    var events: [Event] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        events.append(Event(message: event.message.description, metadata: all.mapValues { "\($0)" }))
    }
}
