import Foundation
import Testing

/// `POST /api/v1/signin`, what the reference setup extension calls: against the running
/// `broadcast-service` binary, with curl from several loopback addresses standing for several clients.
@Suite("broadcast-service: the extensions' JSON sign-in", .serialized, .timeLimit(.minutes(3)))
struct ExtensionSignInTests {
    static let password = "kate-password-1"

    private static func signIn(_ client: CurlSession, _ service: ServiceProcess, account: String, password: String,
                               label: String? = nil) throws -> CurlSession.Response {
        var body: [String: String] = ["account": account, "password": password]
        if let label { body["label"] = label }
        let json = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        return try client.request("POST", service.baseURL + "/api/v1/signin", json: json)
    }

    /// The right password gets a new key labelled for the extension; with it the extension creates a
    /// broadcast with its application, publishes, and the broadcast is live under that application.
    @Test func theRightPasswordGetsAKeyThatCreatesAndPublishesABroadcast() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "kate"], stdin: Self.password + "\n").status == 0)

        let client = CurlSession(directory: directory)
        let signedIn = try Self.signIn(client, service, account: "kate", password: Self.password, label: "OpenReplayKit reference")
        #expect(signedIn.status == 201, "\(signedIn.status) \(signedIn.body)")
        #expect(!signedIn.headers.lowercased().contains("set-cookie"), "no session: \(signedIn.headers)")
        let answer = ServiceSystemTests.json(signedIn.body)
        let key = try #require(answer["streamKey"] as? String, "\(signedIn.body)")
        service.addSecret(key)
        #expect(key.wholeMatch(of: /live_[0-9a-f]{32}/) != nil, "\(key)")
        #expect(answer["account"] as? String == "kate")
        #expect(answer["label"] as? String == "OpenReplayKit reference")
        #expect(answer["rtmpURL"] as? String == service.rtmpBase)
        // A second sign-in is a second key (each extension install its own, revocable alone).
        let again = ServiceSystemTests.json(try Self.signIn(client, service, account: "kate", password: Self.password).body)
        let second = try #require(again["streamKey"] as? String)
        service.addSecret(second)
        #expect(second != key && again["label"] as? String == "extension")

        // The keys are the account's: listed on its page with their labels.
        let browser = CurlSession(directory: directory)
        _ = try browser.request("GET", service.baseURL + "/signin")
        #expect(try browser.request("POST", service.baseURL + "/signin",
                                    form: ["name": "kate", "password": Self.password, "csrf": try #require(browser.csrf)]).status == 303)
        let page = try browser.request("GET", service.baseURL + "/account").body
        #expect(page.contains(key) && page.contains("OpenReplayKit reference") && page.contains(second), "the account page lists both keys")

        // With the key, the existing extension API creates a broadcast with the application's info…
        let created = try client.request("POST", service.baseURL + "/api/v1/broadcasts", json: """
            {"title": "Signed in", "application": {"id": "com.example.racer", "name": "Racer", "iconPNG": "\(ServiceSystemTests.iconPNG)"}}
            """, headers: ["Authorization": "Bearer \(key)"])
        #expect(created.status == 201, "\(created.body)")
        let broadcast = ServiceSystemTests.json(created.body)
        let id = try #require(broadcast["id"] as? String)
        #expect(broadcast["broadcaster"] as? String == "kate")
        let application = broadcast["application"] as? [String: Any]
        #expect(application?["id"] as? String == "com.example.racer" && application?["name"] as? String == "Racer")
        // …and a publish with it is that broadcast, live under the application.
        let publisher = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 30, directory: directory)
        defer { publisher.stop() }
        var live: [[String: Any]] = []
        let deadline = Date().addingTimeInterval(15)
        while live.isEmpty, Date() < deadline {
            try await Task.sleep(for: .milliseconds(200))
            live = try ServiceSystemTests.liveBroadcasts(service, session: client)
        }
        let entry = try #require(live.first, "live after publishing: \(publisher.log)")
        #expect(entry["id"] as? String == id && entry["title"] as? String == "Signed in")
        #expect((entry["application"] as? [String: Any])?["name"] as? String == "Racer")
        publisher.stop()
        #expect(!service.log.contains(Self.password), "the password is not logged")
    }

    /// Wrong password and unknown account alike: 401 and a short JSON reason. Malformed input: 400.
    @Test func wrongCredentialsAndMalformedInputAreRefusedInWords() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "kate"], stdin: Self.password + "\n").status == 0)
        let client = CurlSession(directory: directory)
        for (account, password) in [("kate", "not-her-password"), ("nobody", Self.password), ("kate", String(repeating: "p", count: 100))] {
            let refused = try Self.signIn(client, service, account: account, password: password)
            #expect(refused.status == 401, "\(account): \(refused.status) \(refused.body)")
            let message = (ServiceSystemTests.json(refused.body)["error"] as? [String: Any])?["message"] as? String
            #expect(message == "Wrong account or password.", "\(refused.body)")
        }
        let missing = try client.request("POST", service.baseURL + "/api/v1/signin", json: #"{"account":"kate"}"#)
        #expect(missing.status == 400 && missing.body.contains("password is required"), "\(missing.status) \(missing.body)")
        let wrongType = try client.request("POST", service.baseURL + "/api/v1/signin", json: #"{"account":"kate","password":7}"#)
        #expect(wrongType.status == 400 && wrongType.body.contains("password has the wrong type"), "\(wrongType.body)")
        // A browser on another site cannot use it (no cookie is at stake, but nothing cross-site changes state).
        let crossSite = try client.request("POST", service.baseURL + "/api/v1/signin",
                                           json: #"{"account":"kate","password":"kate-password-1"}"#,
                                           headers: ["Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"])
        #expect(crossSite.status == 403, "\(crossSite.status)")
    }

    /// One throttle for the page and the API, by account and client address: failures on the page and
    /// through the API add up; the sixth attempt is 429 with Retry-After (even with the right password),
    /// while the owner from another address still gets a key.
    @Test func throttledExactlyAsThePageSignIn() throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "kate"], stdin: Self.password + "\n").status == 0)

        let attacker = CurlSession(directory: directory, interface: "127.0.0.5")
        _ = try attacker.request("GET", service.baseURL + "/signin")
        var statuses: [Int] = []
        for _ in 0..<2 {
            statuses.append(try attacker.request("POST", service.baseURL + "/signin",
                                                 form: ["name": "kate", "password": "guess-guess", "csrf": try #require(attacker.csrf)]).status)
        }
        for _ in 0..<3 {
            statuses.append(try Self.signIn(attacker, service, account: "kate", password: "guess-guess").status)
        }
        let throttled = try Self.signIn(attacker, service, account: "kate", password: Self.password)
        statuses.append(throttled.status)
        #expect(statuses == [401, 401, 401, 401, 401, 429], "\(statuses)")
        let retryAfter = throttled.headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("retry-after:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
        let seconds = try #require(retryAfter, "Retry-After: \(throttled.headers)")
        #expect((250...300).contains(seconds), "the oldest failure leaves the 5-minute window in \(seconds) s")
        let message = (ServiceSystemTests.json(throttled.body)["error"] as? [String: Any])?["message"] as? String
        #expect(message == "Too many sign-in attempts; try again in 5 minutes.", "\(throttled.body)")
        // The page's sign-in is locked for this address too.
        #expect(try attacker.request("POST", service.baseURL + "/signin",
                                     form: ["name": "kate", "password": Self.password, "csrf": try #require(attacker.csrf)]).status == 429)

        // The owner, elsewhere, still gets a key.
        let owner = CurlSession(directory: directory, interface: "127.0.0.6")
        let signedIn = try Self.signIn(owner, service, account: "kate", password: Self.password)
        #expect(signedIn.status == 201, "\(signedIn.status) \(signedIn.body)")
        if let key = ServiceSystemTests.json(signedIn.body)["streamKey"] as? String { service.addSecret(key) }
        #expect(service.log.contains("API sign-in refused: rate limited"))
        #expect(!service.log.contains(Self.password))
    }
}
