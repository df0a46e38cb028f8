import Foundation
import Testing

/// The same service on a real PostgreSQL: two nodes share accounts, keys and broadcasts.
@Suite("broadcast-service on PostgreSQL", .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.isAvailable))
struct PostgresTests {
    /// A folder and a private PostgreSQL in it for `body`, both gone after.
    static func withPostgres(_ body: (URL, PostgresServer) async throws -> Void) async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let postgres = try PostgresServer(directory: directory)
        defer { postgres.stop() }
        try await body(directory, postgres)
    }

    @Test func twoNodesShareOneDatabaseAcrossRestarts() async throws {
        try await Self.withPostgres { directory, postgres in
            // Two nodes start together: the schema is migrated once, under a lock.
            let nodeA = try ServiceProcess(directory: directory, database: postgres.url)
            defer { nodeA.stop() }
            let nodeB = try ServiceProcess(directory: directory, database: postgres.url)
            defer { nodeB.stop() }
            let migrating = [nodeA.log, nodeB.log].filter { $0.contains("PostgreSQL schema migrated") }.count
            #expect(migrating == 1, "one node migrated, the other found the schema")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("service.sqlite").path))
            #expect(try nodeA.admin(["user", "create", "frank"], stdin: "frank-password-1\n").status == 0)
            #expect(try nodeA.admin(["user", "create", "FRANK"], stdin: "frank-password-2\n").status != 0, "names are unique, case-insensitively")
            let key = try nodeA.admin(["key", "create", "frank"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(key.hasPrefix("live_"))

            // Node B knows the account and the key.
            let api = CurlSession(directory: directory)
            let created = ServiceSystemTests.json(try api.request("POST", nodeB.baseURL + "/api/v1/broadcasts", json: """
                {"title": "On Postgres", "application": {"id": "com.example.racer", "name": "Racer", "iconPNG": "\(ServiceSystemTests.iconPNG)"}}
                """, headers: ["Authorization": "Bearer \(key)"]).body)
            let id = try #require(created["id"] as? String)
            let browser = CurlSession(directory: directory)
            _ = try browser.request("GET", nodeB.baseURL + "/signin")
            #expect(try browser.request("POST", nodeB.baseURL + "/signin",
                                        form: ["name": "frank", "password": "frank-password-1", "csrf": try #require(browser.csrf)]).status == 303)

            // Publish to node A: the broadcast prepared on node B goes live there, then ends.
            let publisher = try FFmpegPublisher(url: "\(nodeA.rtmpBase)/\(key)", seconds: 3, directory: directory)
            #expect(await nodeA.waitForLog("Broadcast live", timeout: 15))
            #expect(publisher.wait(timeout: 30) == 0, "\(publisher.log)")
            #expect(await nodeA.waitForLog("Broadcast ended"))
            // The account's icon (unverified: served at the account's own icon URL), from the shared database.
            let iconURL = try #require((created["application"] as? [String: Any])?["iconURL"] as? String)
            let icon = try api.request("GET", nodeA.baseURL + String(try #require(iconURL.firstMatch(of: /\/user-icons\/.*/)?.0)))
            #expect(icon.status == 200 && icon.headers.contains("image/png"))

            // Restart node A: everything is still there, and the session made on node B works on node A.
            nodeA.stop()
            let restarted = try ServiceProcess(directory: directory, database: postgres.url)
            defer { restarted.stop() }
            let past = ServiceSystemTests.json(try api.request("GET", restarted.baseURL + "/api/v1/broadcasts/\(id)").body)
            #expect(past["title"] as? String == "On Postgres" && past["endedAt"] != nil && past["broadcaster"] as? String == "frank")
            #expect(try browser.request("GET", restarted.baseURL + "/account").body.contains("On Postgres"))
            #expect(try restarted.admin(["key", "revoke", key]).status == 0)
            #expect(try api.request("POST", nodeB.baseURL + "/api/v1/broadcasts", json: #"{"title":"x"}"#,
                                    headers: ["Authorization": "Bearer \(key)"]).status == 401, "a key revoked on one node is refused by the other")
        }
    }

    /// A cluster shares its signing keys (`--signing-key-file`): a form token made on one node is good on
    /// another, and a node with other keys refuses it.
    @Test func formTokenFromOneNodeIsAcceptedByAnother() async throws {
        try await Self.withPostgres { directory, postgres in
            let shared = directory.appendingPathComponent("signing-keys")
            // Node A signs with the newer key; node B is mid-rotation and still signs with the old one, but
            // verifies both.
            let newKey = String(repeating: "a1", count: 32), oldKey = String(repeating: "b2", count: 32)
            try "# cluster keys\n\(newKey)\n\(oldKey)\n".write(to: shared, atomically: true, encoding: .utf8)
            let rotating = directory.appendingPathComponent("signing-keys-b")
            try "\(oldKey)\n\(newKey)\n".write(to: rotating, atomically: true, encoding: .utf8)
            let other = directory.appendingPathComponent("other-keys")
            try String(repeating: "c3", count: 32).write(to: other, atomically: true, encoding: .utf8)

            let nodeA = try ServiceProcess(directory: directory, arguments: ["--signing-key-file", shared.path], database: postgres.url)
            defer { nodeA.stop() }
            let nodeB = try ServiceProcess(directory: directory, arguments: ["--signing-key-file", rotating.path], database: postgres.url)
            defer { nodeB.stop() }
            let stranger = try ServiceProcess(directory: directory, arguments: ["--signing-key-file", other.path], database: postgres.url)
            defer { stranger.stop() }

            // A stranger's node (other keys) refuses the form A made; B accepts it.
            let browser = CurlSession(directory: directory)
            _ = try browser.request("GET", nodeA.baseURL + "/signup")
            let token = try #require(browser.csrf)
            #expect(try browser.request("POST", stranger.baseURL + "/signup",
                                        form: ["name": "grace", "password": "grace-password-1", "csrf": token]).status == 403)
            #expect(try browser.request("POST", nodeB.baseURL + "/signup",
                                        form: ["name": "grace", "password": "grace-password-1", "csrf": token]).status == 303)
            // Signed in through B: the page B serves carries B's token (its old key), which A accepts.
            _ = try browser.request("GET", nodeB.baseURL + "/account")
            let sessionToken = try #require(browser.csrf)
            #expect(sessionToken != token, "signing in binds the token to the session")
            #expect(try browser.request("POST", nodeA.baseURL + "/account/keys", form: ["label": "laptop", "csrf": sessionToken]).status == 303)
            #expect(try browser.request("POST", stranger.baseURL + "/account/keys", form: ["label": "x", "csrf": sessionToken]).status == 403)

            // A key file without a usable key stops the node before it starts.
            let short = directory.appendingPathComponent("short-key")
            try "too-short\n".write(to: short, atomically: true, encoding: .utf8)
            let refused = try await Command.run(ServiceProcess.binary, ["--signing-key-file", short.path, "--database", postgres.url, "--port", "0"])
            #expect(refused.status != 0 && refused.stderr.contains("32"), "\(refused.stderr)")
        }
    }

    /// Two nodes share what is live: node B lists the broadcast node A ingests, and the chat and likes of
    /// people on either node reach the broadcaster's extension connected to B.
    @Test func liveStateIsSharedBetweenNodes() async throws {
        try await Self.withPostgres { directory, postgres in
            let keys = directory.appendingPathComponent("signing-keys")
            try String(repeating: "d4", count: 32).write(to: keys, atomically: true, encoding: .utf8)
            let nodeA = try ServiceProcess(directory: directory, arguments: ["--signing-key-file", keys.path], database: postgres.url)
            defer { nodeA.stop() }
            let nodeB = try ServiceProcess(directory: directory, arguments: ["--signing-key-file", keys.path], database: postgres.url)
            defer { nodeB.stop() }
            #expect(try nodeA.admin(["user", "create", "heidi"], stdin: "heidi-password-1\n").status == 0)
            let key = try nodeA.admin(["key", "create", "heidi"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)

            let publisher = try FFmpegPublisher(url: "\(nodeA.rtmpBase)/\(key)", seconds: 30, directory: directory)
            defer { publisher.stop() }
            #expect(await nodeA.waitForLog("Broadcast live", timeout: 15))
            let api = CurlSession(directory: directory)
            let listed = try ServiceSystemTests.liveBroadcasts(nodeB, session: api)
            let entry = try #require(listed.first, "node B lists the broadcast node A ingests")
            #expect(entry["broadcaster"] as? String == "heidi" && entry["live"] as? Bool == true)
            let id = try #require(entry["id"] as? String)
            #expect(try api.request("GET", nodeB.baseURL + "/").body.contains("data-id=\"\(id)\""), "B's directory page shows it")

            // The broadcaster's extension is connected to node B; a viewer watches on node A.
            let eventsURL = "ws://127.0.0.1:\(nodeB.httpPort)/api/v1/broadcasts/\(id)/events"
            let feedback = WebSocketCollector()
            async let extensionEvents = WebSocketCollector.collect(url: eventsURL, seconds: 40, headers: ["Authorization": "Bearer \(key)"],
                                                                   into: feedback) { c in
                c.texts.contains { $0.contains("from node A") } && c.texts.contains { $0.contains("from node B") }
                    && c.texts.contains { $0.contains("\"like\"") } && c.viewerCounts.contains(1) && c.texts.contains { $0.contains("\"ended\"") }
            }
            try await feedback.wait { !$0.texts.isEmpty }
            let viewerURL = "ws://127.0.0.1:\(nodeA.httpPort)/b/\(id)/ws"
            let watching = WebSocketCollector()
            async let viewer = WebSocketCollector.collect(url: viewerURL, seconds: 40, into: watching) { c in
                c.texts.contains { $0.contains("hello from node B") }
            }
            // The viewer is in (its first event) before anyone chats.
            try await watching.wait(timeout: 20) { !$0.texts.isEmpty }

            // People signed in on each node chat; one likes on node B.
            let ivan = try ServiceSystemTests.signUp("ivan", service: nodeA, directory: directory)
            #expect(try ivan.request("POST", nodeA.baseURL + "/b/\(id)/chat", json: #"{"text": "hello from node A"}"#,
                                     headers: ["X-CSRF-Token": try #require(ivan.csrf)]).status == 204)
            let judy = try ServiceSystemTests.signUp("judy", service: nodeB, directory: directory)
            let judyCSRF = try #require(judy.csrf)
            #expect(try judy.request("POST", nodeB.baseURL + "/b/\(id)/chat", json: #"{"text": "hello from node B"}"#,
                                     headers: ["X-CSRF-Token": judyCSRF]).status == 204)
            #expect(try judy.request("POST", nodeB.baseURL + "/b/\(id)/like", json: "{}", headers: ["X-CSRF-Token": judyCSRF]).status == 204)
            #expect(try judy.request("POST", nodeB.baseURL + "/b/nosuchbroadcast/like", json: "{}", headers: ["X-CSRF-Token": judyCSRF]).status == 404)
            let described = ServiceSystemTests.json(try api.request("GET", nodeB.baseURL + "/api/v1/broadcasts/\(id)").body)
            #expect(described["live"] as? Bool == true, "B describes A's broadcast as live: \(described)")
            // The viewer on A saw B's line too (A owns the chat and publishes it to its viewers).
            let watched = try await viewer
            #expect(watched.texts.contains { $0.contains("hello from node B") },
                    "\(watched.binaryMessages.count) fragments, texts: \(watched.texts.filter { !$0.contains("\"stream\"") }.suffix(6))")
            try await feedback.wait(timeout: 20) { $0.viewerCounts.contains(1) && $0.texts.contains { $0.contains("\"like\"") } }

            // The publisher stops: the extension on B hears the end, and B no longer lists the broadcast.
            publisher.stop()

            let events = try await extensionEvents.events
            let comments = events.filter { $0["type"] as? String == "comment" }.compactMap { $0["text"] as? String }
            #expect(comments.contains("hello from node A"), "a line posted on A reaches the extension on B: \(events)")
            #expect(comments.contains("hello from node B"), "a line posted on B reaches the extension on B through A: \(events)")
            #expect(events.contains { $0["type"] as? String == "like" && $0["likes"] as? Int == 1 && $0["user"] as? String == "judy" })
            #expect(events.contains { $0["type"] as? String == "viewers" && $0["viewerCount"] as? Int == 1 }, "A's viewer is counted on B")
            #expect(events.last?["type"] as? String == "ended", "the end reaches the extension on B")
            #expect(await nodeA.waitForLog("Broadcast ended"))
            #expect(try ServiceSystemTests.liveBroadcasts(nodeB, session: api).isEmpty)
        }
    }

    /// PostgreSQL restarted under a live broadcast: the nodes listen again, and chat crosses nodes again.
    @Test func nodesListenAgainAfterPostgreSQLRestarts() async throws {
        try await Self.withPostgres { directory, postgres in
            let nodeA = try ServiceProcess(directory: directory, database: postgres.url)
            defer { nodeA.stop() }
            let nodeB = try ServiceProcess(directory: directory, database: postgres.url)
            defer { nodeB.stop() }
            #expect(try nodeA.admin(["user", "create", "mallory"], stdin: "mallory-password-1\n").status == 0)
            let key = try nodeA.admin(["key", "create", "mallory"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let publisher = try FFmpegPublisher(url: "\(nodeA.rtmpBase)/\(key)", seconds: 60, directory: directory)
            defer { publisher.stop() }
            #expect(await nodeA.waitForLog("Broadcast live", timeout: 15))
            let api = CurlSession(directory: directory)
            let id = try #require(ServiceSystemTests.liveBroadcasts(nodeB, session: api).first?["id"] as? String)
            let niaj = try ServiceSystemTests.signUp("niaj", service: nodeA, directory: directory)

            try postgres.restart()
            // Each node listens again (the second "Listening" line of its log).
            for node in [nodeA, nodeB] {
                let deadline = ContinuousClock.now + .seconds(20)
                while node.log.components(separatedBy: "Listening for cluster events").count < 3, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(200))
                }
                #expect(node.log.components(separatedBy: "Listening for cluster events").count >= 3, "listening again after the restart")
            }
            let feedback = WebSocketCollector()
            let eventsURL = "ws://127.0.0.1:\(nodeB.httpPort)/api/v1/broadcasts/\(id)/events"
            async let extensionEvents = WebSocketCollector.collect(url: eventsURL, seconds: 30,
                                                                   headers: ["Authorization": "Bearer \(key)"], into: feedback) { c in
                c.texts.contains { $0.contains("after the restart") }
            }
            try await feedback.wait(timeout: 20) { !$0.texts.isEmpty }
            #expect(try niaj.request("POST", nodeA.baseURL + "/b/\(id)/chat", json: #"{"text": "after the restart"}"#,
                                     headers: ["X-CSRF-Token": try #require(niaj.csrf)]).status == 204)
            let events = try await extensionEvents.events
            #expect(events.contains { $0["text"] as? String == "after the restart" }, "\(events)")
            #expect(try ServiceSystemTests.liveBroadcasts(nodeB, session: api).first?["id"] as? String == id, "the heartbeat kept the broadcast listed")
        }
    }
}
