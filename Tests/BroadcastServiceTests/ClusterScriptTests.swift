import Foundation
import Testing

/// `scripts/cluster.sh`: three nodes, PostgreSQL 15 and HAProxy, as an operator starts them, seen
/// through the balancer's two ports.
@Suite("scripts/cluster.sh", .serialized, .timeLimit(.minutes(3)),
       .enabled(if: PostgresServer.isAvailable && FileManager.default.isExecutableFile(atPath: "/usr/sbin/haproxy")))
struct ClusterScriptTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/cluster.sh").path

    @Test func threeNodesBehindHAProxy() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // Ports of their own, so that a cluster an operator runs here is left alone.
        let base = Int.random(in: 200...400) * 100
        let (http, rtmp, pg) = (base, base + 1, base + 2)
        let environment = ["ORK_CLUSTER_DIR": directory.appendingPathComponent("cluster").path,
                           "ORK_BIN_DIR": URL(fileURLWithPath: ServiceProcess.binary).deletingLastPathComponent().path,
                           "ORK_CLUSTER_HTTP_PORT": "\(http)", "ORK_CLUSTER_RTMP_PORT": "\(rtmp)", "ORK_CLUSTER_PG_PORT": "\(pg)",
                           "ORK_CLUSTER_NODE_HTTP_BASE": "\(base + 10)", "ORK_CLUSTER_NODE_RTMP_BASE": "\(base + 20)"]
        let up = try await Command.run("/bin/bash", [Self.script, "up"], environment: environment, timeout: 120)
        defer { _ = try? Command.run("/bin/bash", [Self.script, "down"], environment: environment, timeout: 60) }
        #expect(up.status == 0, "\(up.stdout)\(up.stderr)")
        let balancer = "http://127.0.0.1:\(http)"
        let database = "postgres://postgres@127.0.0.1:\(pg)/postgres"

        let created = try await Command.run(ServiceProcess.binary, ["user", "create", "olivia", "--database", database], stdin: "olivia-password-1\n")
        #expect(created.status == 0, "\(created.stderr)")
        let key = try await Command.run(ServiceProcess.binary, ["key", "create", "olivia", "--database", database])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(key.hasPrefix("live_"))

        // Publish through HAProxy's RTMP port; every node (round robin) lists the broadcast.
        let publisher = try FFmpegPublisher(url: "rtmp://127.0.0.1:\(rtmp)/live/\(key)", seconds: 30, directory: directory)
        defer { publisher.stop() }
        let api = CurlSession(directory: directory)
        var lists: [[[String: Any]]] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            lists = try (0..<3).map { _ in ServiceSystemTests.json(try api.request("GET", balancer + "/api/live").body)["broadcasts"] as? [[String: Any]] ?? [] }
            if lists.allSatisfy({ $0.count == 1 }) { break }
            try await Task.sleep(for: .milliseconds(300))
        }
        #expect(lists.count == 3 && lists.allSatisfy { $0.count == 1 }, "three answers through the balancer list the broadcast: \(lists)")
        let id = try #require(lists.first?.first?["id"] as? String)

        // A form fetched through the balancer is accepted whichever node takes the POST.
        for name in ["peggy", "rupert", "sybil"] {
            let browser = CurlSession(directory: directory)
            _ = try browser.request("GET", balancer + "/signup")
            #expect(try browser.request("POST", balancer + "/signup",
                                        form: ["name": name, "password": "correct horse battery", "csrf": try #require(browser.csrf)]).status == 303)
        }
        // HLS reaches the ingest node through HAProxy's retries.
        var statuses: [Int] = []
        for _ in 0..<20 {
            statuses = try (0..<3).map { _ in try api.request("GET", balancer + "/hls/\(id)/index.m3u8").status }
            if statuses == [200, 200, 200] { break }
            try await Task.sleep(for: .milliseconds(300))
        }
        #expect(statuses == [200, 200, 200])

        let down = try await Command.run("/bin/bash", [Self.script, "down"], environment: environment, timeout: 60)
        #expect(down.status == 0, "\(down.stderr)")
        #expect(try api.request("GET", balancer + "/healthz").status == 0, "nothing answers after down")
    }
}
