import Foundation
import Testing

/// The same service on a real PostgreSQL: two nodes share accounts, keys and broadcasts.
@Suite("broadcast-service on PostgreSQL", .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.isAvailable))
struct PostgresTests {
    @Test func twoNodesShareOneDatabaseAcrossRestarts() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let postgres = try PostgresServer(directory: directory)
        defer { postgres.stop() }

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
