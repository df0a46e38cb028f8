import Foundation
import ReplayTesting
import Testing

/// The defences of issue 15, each against the running `broadcast-service` binary.
@Suite("broadcast-service under attack", .serialized, .timeLimit(.minutes(3)))
struct SecuritySystemTests {
    static let password = "correct horse battery"

    static func signUp(_ name: String, service: ServiceProcess, directory: URL, interface: String? = nil) throws -> CurlSession {
        let session = CurlSession(directory: directory, interface: interface)
        _ = try session.request("GET", service.baseURL + "/signup")
        let response = try session.request("POST", service.baseURL + "/signup",
                                           form: ["name": name, "password": password, "csrf": try #require(session.csrf)])
        #expect(response.status == 303, "sign up \(name): \(response.status) \(response.body)")
        return session
    }

    // MARK: 1. CSRF

    @Test func csrfTokensAreBoundToTheSessionAndCrossSiteFormsAreRefused() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        let alice = CurlSession(directory: directory)
        _ = try alice.request("GET", service.baseURL + "/signup")
        let before = try #require(alice.csrf)
        #expect(try alice.request("POST", service.baseURL + "/signup",
                                  form: ["name": "alice", "password": Self.password, "csrf": before]).status == 303)
        _ = try alice.request("GET", service.baseURL + "/account")
        let after = try #require(alice.csrf)
        #expect(after != before, "the token is rotated at sign-in")
        let session = try #require(alice.cookie("ork_session"))

        // The issue's forgery: a planted cookie equal to the form field, with the victim's session.
        let forged = try Command.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                                                       "-H", "Cookie: ork_session=\(session); ork_csrf=x",
                                                       "--data", "csrf=x&label=forged", service.baseURL + "/account/keys"])
        #expect(forged.stdout == "403", "a planted token is refused: \(forged.stdout)")
        // The token of another browser (not signed in) does not work with this session either.
        let other = CurlSession(directory: directory)
        _ = try other.request("GET", service.baseURL + "/signin")
        #expect(try alice.request("POST", service.baseURL + "/account/keys", form: ["csrf": try #require(other.csrf), "label": "x"]).status == 403)
        // The right token, from another site: refused by Origin or Sec-Fetch-Site.
        #expect(try alice.request("POST", service.baseURL + "/account/keys", form: ["csrf": after, "label": "evil"],
                                  headers: ["Origin": "http://evil.example"]).status == 403)
        #expect(try alice.request("POST", service.baseURL + "/account/keys", form: ["csrf": after, "label": "evil"],
                                  headers: ["Sec-Fetch-Site": "same-site"]).status == 403)
        // The same origin: accepted.
        #expect(try alice.request("POST", service.baseURL + "/account/keys", form: ["csrf": after, "label": "mine"],
                                  headers: ["Origin": service.baseURL, "Sec-Fetch-Site": "same-origin"]).status == 303)
        let account = try alice.request("GET", service.baseURL + "/account").body
        #expect(account.contains("<b>mine</b>") && !account.contains("forged") && !account.contains("evil"))
        #expect(service.log.contains("Request refused: cross-site"))
    }

    /// A copy of the database signs nobody in: it holds the session token's digest, not the token,
    /// and it is readable by the service's user alone.
    @Test func theDatabaseKeepsNoSessionToken() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        let alice = try Self.signUp("alice", service: service, directory: directory)
        let token = try #require(alice.cookie("ork_session"))
        #expect(try alice.request("GET", service.baseURL + "/account").status == 200, "the cookie signs in")
        let digest = try Command.run("/usr/bin/sha256sum", [], stdin: token).stdout.prefix(64)
        var stored = Data()
        for suffix in ["", "-wal", "-journal"] {
            stored += (try? Data(contentsOf: URL(fileURLWithPath: service.databaseArgument + suffix))) ?? Data()
        }
        #expect(stored.range(of: Data(digest.utf8)) != nil, "the session is in the database, by its digest")
        #expect(stored.range(of: Data(token.utf8)) == nil, "the token itself is not")
        var info = stat()
        #expect(stat(service.databaseArgument, &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    @Test func hostPrefixedCookiesBehindHTTPS() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory, arguments: ["--behind-https"])
        defer { service.stop() }
        let headers = try CurlSession(directory: directory).request("GET", service.baseURL + "/signin").headers
        let cookie = try #require(headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("set-cookie:") })
        #expect(cookie.contains("__Host-ork_csrf=") && cookie.contains("Secure") && cookie.contains("Path=/") && !cookie.contains("Domain"), "\(cookie)")
    }

    // MARK: 2. Revocation and take-over

    @Test func revokingAKeyClosesItsPublishAndEventsAtOnce() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "dora"], stdin: "dora-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "dora"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let publisher = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 60, directory: directory)
        defer { publisher.stop() }
        #expect(await service.waitForLog("RTMP publish started", timeout: 15))
        let browser = CurlSession(directory: directory)
        let id = try #require(try ServiceSystemTests.liveBroadcasts(service, session: browser).first?["id"] as? String)
        let eventsURL = "ws://127.0.0.1:\(service.httpPort)/api/v1/broadcasts/\(id)/events"
        let events = WebSocketCollector()
        async let collected = WebSocketCollector.collect(url: eventsURL, seconds: 30, headers: ["Authorization": "Bearer \(key)"], into: events)
        try await events.wait { !$0.texts.isEmpty }

        // The owner revokes the key on /account.
        _ = try browser.request("GET", service.baseURL + "/signin")
        #expect(try browser.request("POST", service.baseURL + "/signin",
                                    form: ["name": "dora", "password": "dora-password-1", "csrf": try #require(browser.csrf)]).status == 303)
        let account = try browser.request("GET", service.baseURL + "/account").body
        let keyID = try #require(account.firstMatch(of: /action="\/account\/keys\/(\d+)\/revoke"/)?.1)
        let revoked = Date()
        #expect(try browser.request("POST", service.baseURL + "/account/keys/\(keyID)/revoke", form: ["csrf": try #require(browser.csrf)]).status == 303)
        _ = try await collected
        #expect(Date().timeIntervalSince(revoked) < 5, "the events WebSocket closes at once")
        #expect(events.events.contains { $0["type"] as? String == "ended" })
        let deadline = Date().addingTimeInterval(5)
        while publisher.process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!publisher.process.isRunning, "the publisher's connection is closed at once")
        #expect(try ServiceSystemTests.liveBroadcasts(service, session: browser).isEmpty)
    }

    @Test func aKeyRevokedFromTheCommandLineEndsItsPublishWithinSeconds() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "gus"], stdin: "gus-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "gus"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let publisher = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 60, directory: directory)
        defer { publisher.stop() }
        #expect(await service.waitForLog("RTMP publish started", timeout: 15))
        // Another process (the command line, or another node on PostgreSQL) revokes the key.
        #expect(try service.admin(["key", "revoke", key]).status == 0)
        let deadline = Date().addingTimeInterval(6)
        while publisher.process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!publisher.process.isRunning, "the live publish notices the revocation within seconds")
        #expect(await service.waitForLog("the stream key was revoked"))
        #expect(try ServiceSystemTests.liveBroadcasts(service, session: CurlSession(directory: directory)).isEmpty)
    }

    @Test func aTakenOverPublisherGetsAnErrorAndIsDisconnected() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "eve"], stdin: "eve-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "eve"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let first = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 60, directory: directory)
        defer { first.stop() }
        #expect(await service.waitForLog("RTMP publish started", timeout: 15))
        let second = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 60, directory: directory)
        defer { second.stop() }
        let deadline = Date().addingTimeInterval(10)
        while first.process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!first.process.isRunning, "the first publisher is disconnected")
        if let ended = first.process.result { #expect(!ended.succeeded, "\(ended)") }
        #expect(second.process.isRunning, "the second one publishes on")
        #expect(service.log.contains("RTMP publish closed: the broadcast was ended by the service"))
        #expect(try ServiceSystemTests.liveBroadcasts(service, session: CurlSession(directory: directory)).count == 1)
    }

    // MARK: 3. HTTP limits

    @Test func malformedOversizedAndSlowRequestsAreAnsweredAndClosed() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory, arguments: ["--http-header-timeout", "2", "--http-idle-timeout", "3",
                                                                           "--max-connections-per-address", "20"])
        defer { service.stop() }
        func answer(_ request: [UInt8]) throws -> (text: String, closed: Bool) {
            let connection = try RawConnection(port: service.httpPort)
            connection.send(request)
            return connection.readUntilClosed(timeout: 5)
        }
        let cases: [(String, [UInt8], String)] = [
            ("spaces in the target", Array("GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n".utf8), "HTTP/1.1 400"),
            ("a 1 MB URL", Array(("GET /" + String(repeating: "a", count: 1 << 20) + " HTTP/1.1\r\nHost: x\r\n\r\n").utf8), "HTTP/1.1 414"),
            ("a 1 MB header", Array(("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 1 << 20) + "\r\n\r\n").utf8), "HTTP/1.1 431"),
            ("5,000 headers", Array(("GET / HTTP/1.1\r\nHost: x\r\n" + String(repeating: "X-A: b\r\n", count: 5000) + "\r\n").utf8), "HTTP/1.1 431"),
            ("a huge Content-Length", Array("POST /signin HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n".utf8), "HTTP/1.1 413"),
        ]
        for (name, request, status) in cases {
            let (text, closed) = try answer(request)
            #expect(text.hasPrefix(status), "\(name): \(text.prefix(80))")
            #expect(closed, "\(name): the connection is closed")
        }
        // Half a header, then silence: 408 and closed after the header timeout.
        let half = try RawConnection(port: service.httpPort)
        half.send("GET / HTTP/1.1\r\nHost: x\r\n")
        let started = Date()
        let (halfText, halfClosed) = half.readUntilClosed(timeout: 6)
        #expect(halfClosed && halfText.hasPrefix("HTTP/1.1 408") && Date().timeIntervalSince(started) < 4, "\(halfText)")
        // Nothing at all: closed.
        let silent = try RawConnection(port: service.httpPort)
        #expect(silent.readUntilClosed(timeout: 6).closed)
        // A kept-alive connection answers two requests, then closes after the idle timeout.
        let keptAlive = try RawConnection(port: service.httpPort)
        keptAlive.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(keptAlive.readResponse(timeout: 5).hasPrefix("HTTP/1.1 200"))
        keptAlive.send("POST /signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5\r\n\r\nname=")
        #expect(keptAlive.readResponse(timeout: 5).hasPrefix("HTTP/1.1 "))
        keptAlive.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(keptAlive.readResponse(timeout: 5).hasPrefix("HTTP/1.1 200"))
        #expect(keptAlive.readUntilClosed(timeout: 6).closed, "idle timeout")

        // At most 20 connections from one address; another address is not affected.
        let held = try (0..<20).map { _ in try RawConnection(port: service.httpPort, source: "127.0.0.5") }
        try await Task.sleep(for: .milliseconds(300))
        let extra = try RawConnection(port: service.httpPort, source: "127.0.0.5")
        let refused = extra.readUntilClosed(timeout: 3)
        #expect(refused.closed && refused.text.hasPrefix("HTTP/1.1 503"), "\(refused.text)")
        #expect(try CurlSession(directory: directory, interface: "127.0.0.6").request("GET", service.baseURL + "/healthz").status == 200)
        _ = held
        #expect(service.process.isRunning)
    }

    // MARK: 4. Logs

    @Test func loggedValuesAreEscapedAndKeysNeverLogged() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "finn"], stdin: "finn-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "finn"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let browser = CurlSession(directory: directory)
        _ = try browser.request("GET", service.baseURL + "/signin")
        _ = try browser.request("POST", service.baseURL + "/signin",
                                form: ["name": "zz\n2026-01-01T00:00:00+0000 info openreplaykit.service : forged", "password": "x", "csrf": try #require(browser.csrf)])
        let created = try browser.request("POST", service.baseURL + "/api/v1/broadcasts",
                                          json: #"{"title":"t","application":{"id":"a\r\nforged line\u0000x","name":"n"}}"#,
                                          headers: ["Authorization": "Bearer \(key)"])
        #expect(created.status == 201, "\(created.body)")
        // The key in the RTMP application path.
        let misplaced = try FFmpegPublisher(url: "rtmp://127.0.0.1:\(service.rtmpPort)/\(key)/x", seconds: 2, directory: directory)
        _ = misplaced.wait(timeout: 20)
        #expect(await service.waitForLog("unknown application"))
        let log = service.log
        #expect(!log.split(separator: "\n").contains { $0.hasPrefix("2026-01-01T00:00:00+0000") }, "no forged line")
        #expect(!log.contains("\nforged line") && !log.contains("\r") && !log.contains("\0"))
        #expect(log.contains(#"zz\n2026"#), "control characters are shown escaped")
        #expect(!log.contains(key), "the key is not logged")
    }

    // MARK: 5. Icons

    @Test func applicationIconsBelongToTheirAccountUnlessVerified() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        var keys: [String] = []
        for name in ["gina", "hank"] {
            #expect(try service.admin(["user", "create", name], stdin: "\(name)-password-1\n").status == 0)
            keys.append(try service.admin(["key", "create", name]).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let png = Data(base64Encoded: ServiceSystemTests.iconPNG)!
        // Two valid PNGs that differ (a trailing chunk-less byte is ignored by the check but changes the bytes).
        let icons = [png.base64EncodedString(), (png + Data([0x00])).base64EncodedString()]
        let browser = CurlSession(directory: directory)
        var iconURLs: [String] = []
        for (key, icon) in zip(keys, icons) {
            let created = try browser.request("POST", service.baseURL + "/api/v1/broadcasts", json: """
                {"title": "t", "application": {"id": "com.example.game", "name": "Game", "iconPNG": "\(icon)"}}
                """, headers: ["Authorization": "Bearer \(key)"])
            #expect(created.status == 201, "\(created.body)")
            let application = ServiceSystemTests.json(created.body)["application"] as? [String: Any]
            #expect(application?["verified"] as? Bool == false)
            iconURLs.append(try #require(application?["iconURL"] as? String))
        }
        #expect(iconURLs[0] != iconURLs[1])
        let sizes = try iconURLs.enumerated().map { n, url in
            let file = directory.appendingPathComponent("fetched-\(n).png")
            _ = try Command.run("/usr/bin/curl", ["-s", "-o", file.path, url])
            return (try? Data(contentsOf: file))?.count ?? -1
        }
        #expect(sizes == [png.count, png.count + 1], "each account keeps its own icon: \(sizes)")
        // The application's own icon: a tile until the operator verifies the application.
        #expect(try browser.request("GET", service.baseURL + "/icons/com.example.game").headers.contains("image/svg+xml"))
        let file = directory.appendingPathComponent("icon.png")
        try png.write(to: file)
        let verified = try service.admin(["app", "verify", "com.example.game", "--icon", file.path])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try browser.request("GET", service.baseURL + "/icons/com.example.game").headers.contains("image/png"))
        let described = try browser.request("POST", service.baseURL + "/api/v1/broadcasts", json: """
            {"title": "t", "application": {"id": "com.example.game", "name": "Game", "iconPNG": "\(icons[1])"}}
            """, headers: ["Authorization": "Bearer \(keys[1])"])
        let application = ServiceSystemTests.json(described.body)["application"] as? [String: Any]
        #expect(application?["verified"] as? Bool == true)
        #expect((application?["iconURL"] as? String)?.hasSuffix("/icons/com.example.game") == true)
    }

    // MARK: 6. Passwords and accounts

    @Test func longPasswordsLockOutAndSignUpLimits() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        // Over 72 bytes: refused with a clear message.
        let browser = CurlSession(directory: directory, interface: "127.0.0.2")
        _ = try browser.request("GET", service.baseURL + "/signup")
        let long = try browser.request("POST", service.baseURL + "/signup",
                                       form: ["name": "ivan", "password": String(repeating: "p", count: 94), "csrf": try #require(browser.csrf)])
        #expect(long.status == 400 && long.body.contains("72 bytes"), "\(long.status)")
        let cli = try service.admin(["user", "create", "ivan"], stdin: String(repeating: "p", count: 94) + "\n")
        #expect(cli.status != 0 && cli.stderr.contains("72 bytes"), "\(cli.stderr)")

        // An attacker fails on jill's account from one address; jill signs in from another.
        _ = try Self.signUp("jill", service: service, directory: directory, interface: "127.0.0.3")
        let attacker = CurlSession(directory: directory, interface: "127.0.0.4")
        _ = try attacker.request("GET", service.baseURL + "/signin")
        var statuses: [Int] = []
        for _ in 0..<8 {
            statuses.append(try attacker.request("POST", service.baseURL + "/signin",
                                                 form: ["name": "jill", "password": "wrong-password", "csrf": try #require(attacker.csrf)]).status)
        }
        #expect(statuses.prefix(5).allSatisfy { $0 == 401 } && statuses.last == 429, "\(statuses)")
        let owner = CurlSession(directory: directory, interface: "127.0.0.7")
        _ = try owner.request("GET", service.baseURL + "/signin")
        #expect(try owner.request("POST", service.baseURL + "/signin",
                                  form: ["name": "jill", "password": Self.password, "csrf": try #require(owner.csrf)]).status == 303,
                "the owner from elsewhere still gets in")

        // Sign-up: at most 5 accounts an hour from one address.
        var signUps: [Int] = []
        for n in 0..<6 {
            let session = CurlSession(directory: directory, interface: "127.0.0.8")
            _ = try session.request("GET", service.baseURL + "/signup")
            signUps.append(try session.request("POST", service.baseURL + "/signup",
                                               form: ["name": "bulk\(n)", "password": Self.password, "csrf": try #require(session.csrf)]).status)
        }
        #expect(signUps == [303, 303, 303, 303, 303, 429], "\(signUps)")
    }

    // MARK: 7. Smaller points

    @Test func smallerPoints() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "kate"], stdin: "kate-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "kate"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let browser = CurlSession(directory: directory)
        let auth = ["Authorization": "Bearer \(key)"]
        // A title over 140 characters is refused.
        let long = try browser.request("POST", service.baseURL + "/api/v1/broadcasts", json: "{\"title\": \"\(String(repeating: "t", count: 141))\"}", headers: auth)
        #expect(long.status == 400 && long.body.contains("140"), "\(long.status) \(long.body)")
        // Short JSON errors.
        let malformed = try browser.request("POST", service.baseURL + "/api/v1/broadcasts", json: #"{"title": 5}"#, headers: auth)
        #expect(malformed.status == 400 && !malformed.body.contains("DecodingError") && !malformed.body.contains("codingPath"), "\(malformed.body)")
        // An application id that needs percent-encoding.
        let created = try browser.request("POST", service.baseURL + "/api/v1/broadcasts",
                                          json: #"{"title": "t", "application": {"id": "Über Game+1", "name": "Über"}}"#, headers: auth)
        let id = try #require(ServiceSystemTests.json(created.body)["id"] as? String)
        // ?token= is for WebSocket upgrades only.
        #expect(try browser.request("PUT", service.baseURL + "/api/v1/broadcasts/\(id)/application?token=\(key)",
                                    json: #"{"id": "x", "name": "x"}"#).status == 401)
        // Events WebSocket without a token: 401.
        let upgrade = try RawConnection(port: service.httpPort)
        upgrade.send("GET /api/v1/broadcasts/\(id)/events HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                     + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        let refused = upgrade.readResponse(timeout: 5)
        #expect(refused.hasPrefix("HTTP/1.1 401"), "\(refused.prefix(60))")

        let publisher = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 30, directory: directory)
        defer { publisher.stop() }
        #expect(await service.waitForLog("RTMP publish started", timeout: 15))
        let home = try browser.request("GET", service.baseURL + "/")
        let href = try #require(home.body.firstMatch(of: /href="(\/apps\/[^"]+)"/)?.1)
        let page = try browser.request("GET", service.baseURL + String(href)).body
        #expect(page.contains("/b/\(id)"), "the application page lists the broadcast: \(href)")
        // CSP: WebSockets to this origin only.
        let csp = try #require(home.headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-security-policy:") })
        #expect(csp.contains("connect-src 'self'") && !csp.contains("ws:") && !csp.contains("wss:"), "\(csp)")
    }
}

/// The issue's forgery in a real browser: a page on a sibling subdomain plants a CSRF cookie for the parent
/// domain and auto-submits a form to the service (same-site, so the Lax session cookie goes along).
@Suite("broadcast-service CSRF in Chromium", .serialized, .timeLimit(.minutes(3)))
struct ChromiumCSRFTests {
    @Test func aSiblingSubdomainCannotForgeAForm() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        // The attacker's page, served by a plain static server on another port.
        let site = directory.appendingPathComponent("evil")
        try FileManager.default.createDirectory(at: site, withIntermediateDirectories: true)
        try """
            <!doctype html><form method="post" action="http://live.example.test:\(service.httpPort)/account/keys">
            <input name="csrf" value="x"><input name="label" value="forged"></form>
            <script>document.cookie = "ork_csrf=x; Domain=example.test; Path=/account/keys"; document.forms[0].submit()</script>
            """.write(to: site.appendingPathComponent("attack.html"), atomically: true, encoding: .utf8)
        let server = try BackgroundProcess("/usr/bin/python3", arguments: ["-c", """
            import http.server, functools, sys
            h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
            s = http.server.HTTPServer(("127.0.0.1", 0), h); print(s.server_address[1], flush=True); s.serve_forever()
            """, site.path])
        defer { server.blockingTerminate(grace: 2) }
        var evilPort = 0
        for _ in 0..<100 where evilPort == 0 {
            evilPort = Int(server.currentOutput.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(evilPort != 0)

        let chromium = try Chromium(directory: directory, extraArguments: ["--host-resolver-rules=MAP *.example.test 127.0.0.1"])
        defer { chromium.stop() }
        let base = "http://live.example.test:\(service.httpPort)"
        let evil = "http://evil.example.test:\(evilPort)/attack.html"
        try await chromium.withPage { page in
            try await page.navigate(base + "/signup")
            _ = try await page.evaluate("""
                document.querySelector('input[name=name]').value = 'olga';
                document.querySelector('input[name=password]').value = 'olga-password-1';
                document.querySelector('form.card').submit(); true
                """)
            try await page.waitFor("location.pathname === '/account' && document.readyState === 'complete'")
            // The victim visits the attacker's page: it plants the cookie and submits the form.
            // (Not `navigate`: the page leaves at once, by its form.)
            _ = try await page.evaluate("location.href = \(ChromiumPage.quote(evil)); true")
            try await page.waitFor("location.host.startsWith('live.example.test') && document.readyState === 'complete'")
            let answer = try await page.evaluate("document.body.innerText")
            #expect(!answer.contains("forged"), "\(answer)")
            try await page.navigate(base + "/account")
            try await page.waitFor("document.readyState === 'complete' && document.querySelector('#keys') !== null")
            #expect(try await page.evaluate("document.querySelector('#keys').innerText.includes('forged')") == "false", "no key was forged")
        }
        #expect(service.log.contains("Request refused"))
    }
}
