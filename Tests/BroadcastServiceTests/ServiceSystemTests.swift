import Foundation
import ReplayTesting
import NIOCore
import NIOPosix
import Testing

/// The running `broadcast-service` binary on loopback, with a real ffmpeg publishing over RTMP and
/// ffprobe reading what viewers get.
@Suite("broadcast-service end to end", .serialized, .timeLimit(.minutes(3)))
struct ServiceSystemTests {
    /// A 1×1 PNG (a real one: decoders accept it).
    static let iconPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

    static func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }

    static func liveBroadcasts(_ service: ServiceProcess, session: CurlSession) throws -> [[String: Any]] {
        json(try session.request("GET", service.baseURL + "/api/live").body)["broadcasts"] as? [[String: Any]] ?? []
    }

    /// Signs up `name` in a fresh browser-like session.
    static func signUp(_ name: String, service: ServiceProcess, directory: URL) throws -> CurlSession {
        let session = CurlSession(directory: directory)
        #expect(try session.request("GET", service.baseURL + "/signup").status == 200)
        let csrf = try #require(session.csrf)
        let response = try session.request("POST", service.baseURL + "/signup", form: ["name": name, "password": "correct horse battery", "csrf": csrf])
        #expect(response.status == 303, "sign up redirects: \(response.body)")
        #expect(response.headers.lowercased().contains("set-cookie: ork_session="))
        #expect(response.headers.contains("HttpOnly"))
        #expect(response.headers.contains("SameSite=Lax"))
        // The CSRF token is bound to the new session: read it from a page.
        _ = try session.request("GET", service.baseURL + "/")
        return session
    }

    @Test func publishWatchInteractAndRestart() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var service = try ServiceProcess(directory: directory)
        defer { service.stop() }

        // Administration from the command line, on the same database.
        let created = try service.admin(["user", "create", "alice"], stdin: "alice-password-1\n")
        #expect(created.status == 0, "\(created.stderr)")
        let key = try service.admin(["key", "create", "alice"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(key.hasPrefix("live_") && key.count == 37)

        // The extension API prepares the broadcast: title, application and icon.
        let browser = CurlSession(directory: directory)
        let prepared = try browser.request("POST", service.baseURL + "/api/v1/broadcasts", json: """
            {"title": "Speed run <b>42</b>", "application": {"id": "com.example.racer", "name": "Racer", "iconPNG": "\(Self.iconPNG)"}}
            """, headers: ["Authorization": "Bearer \(key)"])
        #expect(prepared.status == 201, "\(prepared.body)")
        let broadcast = Self.json(prepared.body)
        let id = try #require(broadcast["id"] as? String)
        #expect((broadcast["pageURL"] as? String)?.hasSuffix("/b/\(id)") == true)
        #expect(broadcast["rtmpURL"] as? String == service.rtmpBase)
        #expect(try browser.request("POST", service.baseURL + "/api/v1/broadcasts", json: #"{"title":"x"}"#,
                                    headers: ["Authorization": "Bearer live_wrong"]).status == 401)

        // ffmpeg publishes; the prepared broadcast goes live.
        let publisher = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 60, directory: directory)
        defer { publisher.stop() }
        var live: [[String: Any]] = []
        for _ in 0..<100 where live.isEmpty {
            try await Task.sleep(for: .milliseconds(100))
            live = try Self.liveBroadcasts(service, session: browser)
        }
        let entry = try #require(live.first, "live after publishing: \(service.log)")
        #expect(entry["id"] as? String == id)
        #expect(entry["title"] as? String == "Speed run <b>42</b>")
        #expect(entry["broadcaster"] as? String == "alice")
        let application = try #require(entry["application"] as? [String: Any])
        #expect(application["name"] as? String == "Racer")
        let icon = try #require(application["iconURL"] as? String)
        let iconResponse = try browser.request("GET", icon)
        #expect(iconResponse.status == 200 && iconResponse.headers.contains("image/png"))

        // The directory groups by application; the application page lists the broadcast.
        let home = try browser.request("GET", service.baseURL + "/").body
        #expect(home.contains("data-app=\"com.example.racer\"") && home.contains("Racer") && home.contains("1 live"))
        let appPage = try browser.request("GET", service.baseURL + "/apps/com.example.racer").body
        #expect(appPage.contains("/b/\(id)") && appPage.contains("Speed run &lt;b&gt;42&lt;/b&gt;"))

        // HLS: ffprobe reads it.
        let hls = try #require(entry["hlsURL"] as? String)
        var probe = CommandResult(status: -1, stdout: "", stderr: "")
        for _ in 0..<40 {
            probe = try await Command.run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "compact", hls], timeout: 20)
            if probe.status == 0, probe.stdout.contains("h264") { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        #expect(probe.stdout.contains("codec_name=h264|width=320|height=240"), "\(probe.stderr)")
        #expect(probe.stdout.contains("codec_name=aac"))

        // The WebSocket fMP4 stream: a joining viewer gets the type, the init segment, then fragments from a keyframe.
        let webSocketURL = try #require(entry["webSocketURL"] as? String)
        // Until the init segment and 60 fragments (a frame or more each) are in, at most 10 s: a
        // machine that stalls for a moment delays the stream, it does not fail it.
        let viewer = try await WebSocketCollector.collect(url: webSocketURL, seconds: 10) { $0.binaryMessages.count >= 61 }
        let stream = try #require(viewer.events.first { $0["type"] as? String == "stream" })
        #expect((stream["mime"] as? String)?.hasPrefix("video/mp4; codecs=\"avc1.42") == true, "\(stream)")
        #expect((stream["mime"] as? String)?.contains("mp4a.40.2") == true)
        let first = try #require(viewer.binaryMessages.first)
        #expect(first.getString(at: 4, length: 4) == "ftyp")
        #expect(viewer.binaryMessages.count >= 61, "fragments in 10 s: \(viewer.binaryMessages.count)")
        let file = directory.appendingPathComponent("viewer.mp4")
        try Data(viewer.binaryBytes).write(to: file)
        let frames = try await Command.run("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames,codec_name",
                                                 "-of", "compact", file.path])
        #expect(frames.status == 0, "\(frames.stderr)")
        let decoded = Int(frames.stdout.split(separator: "=").last.map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "") ?? 0
        #expect(decoded >= 45, "frames decoded from 60 WebSocket fMP4 fragments: \(frames.stdout)")
        let decodeErrors = try await Command.run("ffmpeg", ["-v", "error", "-i", file.path, "-f", "null", "-"])
        #expect(decodeErrors.status == 0 && decodeErrors.stderr.isEmpty, "\(decodeErrors.stderr)")

        // Viewers sign in, chat and like; the extension's event stream receives it all.
        let bob = try Self.signUp("bob", service: service, directory: directory)
        let bobCSRF = try #require(bob.csrf)
        let eventsURL = try #require(entry["eventsURL"] as? String)
        let feedback = WebSocketCollector()
        async let extensionEvents = WebSocketCollector.collect(url: eventsURL, seconds: 15, headers: ["Authorization": "Bearer \(key)"],
                                                               into: feedback) { c in
            c.texts.contains { $0.contains("\"like\"") } && c.texts.contains { $0.contains("\"comment\"") } && c.viewerCounts.count >= 4
        }
        try await feedback.wait { $0.viewerCounts.count >= 1 }
        // Two viewers join, one leaves.
        async let firstViewer = WebSocketCollector.collect(url: webSocketURL, seconds: 5)
        try await feedback.wait { $0.viewerCounts.count >= 2 }
        async let secondViewer = WebSocketCollector.collect(url: webSocketURL, seconds: 1)
        try await feedback.wait { $0.viewerCounts.count >= 3 }
        let chat = try bob.request("POST", service.baseURL + "/b/\(id)/chat", json: #"{"text": "<script>alert(1)</script> hi"}"#,
                                   headers: ["X-CSRF-Token": bobCSRF])
        #expect(chat.status == 204, "\(chat.body)")
        #expect(try bob.request("POST", service.baseURL + "/b/\(id)/like", json: "{}", headers: ["X-CSRF-Token": bobCSRF]).status == 204)
        // Without the CSRF header, and without signing in: refused.
        #expect(try bob.request("POST", service.baseURL + "/b/\(id)/like", json: "{}").status == 403)
        #expect(try browser.request("POST", service.baseURL + "/b/\(id)/chat", json: #"{"text":"anon"}"#).status == 401)
        #expect(try bob.request("POST", service.baseURL + "/b/\(id)/chat", json: "{\"text\": \"\(String(repeating: "x", count: 301))\"}",
                                headers: ["X-CSRF-Token": bobCSRF]).status == 413)
        _ = try await secondViewer
        _ = try await firstViewer
        let events = try await extensionEvents.events
        let comment = try #require(events.first { $0["type"] as? String == "comment" })
        #expect(comment["user"] as? String == "bob" && comment["text"] as? String == "<script>alert(1)</script> hi")
        #expect(events.contains { $0["type"] as? String == "like" && $0["likes"] as? Int == 1 })
        let counts = events.compactMap { $0["type"] as? String == "viewers" ? $0["viewerCount"] as? Int : nil }
        #expect(counts.starts(with: [0, 1, 2, 1]), "viewer count followed two viewers joining and one leaving: \(counts)")
        // The page shows the chat escaped.
        let page = try bob.request("GET", service.baseURL + "/b/\(id)").body
        #expect(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; hi") && !page.contains("<script>alert(1)"))

        // The application changes mid-broadcast.
        let changed = try browser.request("PUT", service.baseURL + "/api/v1/broadcasts/\(id)/application",
                                          json: #"{"id": "org.example.paint", "name": "Paint"}"#, headers: ["Authorization": "Bearer \(key)"])
        #expect(changed.status == 200, "\(changed.body)")
        #expect((try Self.liveBroadcasts(service, session: browser).first?["application"] as? [String: Any])?["name"] as? String == "Paint")

        // The publisher stops: the broadcast ends and is recorded.
        publisher.stop()
        #expect(await service.waitForLog("Broadcast ended"))
        #expect(try Self.liveBroadcasts(service, session: browser).isEmpty)

        // Restart: accounts, keys and past broadcasts are still there.
        service.stop()
        service = try ServiceProcess(directory: directory)
        let past = Self.json(try browser.request("GET", service.baseURL + "/api/v1/broadcasts/\(id)").body)
        #expect(past["live"] as? Bool == false && past["endedAt"] != nil && past["likes"] as? Int == 1)
        #expect((past["application"] as? [String: Any])?["name"] as? String == "Paint")
        let again = CurlSession(directory: directory)
        _ = try again.request("GET", service.baseURL + "/signin")
        let signIn = try again.request("POST", service.baseURL + "/signin",
                                       form: ["name": "bob", "password": "correct horse battery", "csrf": try #require(again.csrf)])
        #expect(signIn.status == 303)
        #expect(try again.request("GET", service.baseURL + "/account").body.contains("bob"))

        // Stream keys on the account page: create one, revoke it; then sign out.
        let csrf = try #require(again.csrf)
        #expect(try again.request("POST", service.baseURL + "/account/keys", form: ["label": "laptop", "csrf": csrf]).status == 303)
        #expect(try again.request("POST", service.baseURL + "/account/keys", form: ["label": "forged"]).status == 403)
        let account = try again.request("GET", service.baseURL + "/account").body
        #expect(account.contains("<b>laptop</b> <code>live_") && !account.contains("forged"))
        let keyID = try #require(account.firstMatch(of: /action="\/account\/keys\/(\d+)\/revoke"/)?.1)
        #expect(try again.request("POST", service.baseURL + "/account/keys/\(keyID)/revoke", form: ["csrf": csrf]).status == 303)
        #expect(try again.request("GET", service.baseURL + "/account").body.contains("<b>laptop</b> revoked"))
        #expect(try again.request("POST", service.baseURL + "/signout", form: ["csrf": csrf]).status == 303)
        #expect(try again.request("GET", service.baseURL + "/account").status == 303, "signed out: /account sends to /signin")
        #expect(try browser.request("POST", service.baseURL + "/api/v1/broadcasts", json: #"{"title":"again"}"#,
                                    headers: ["Authorization": "Bearer \(key)"]).status == 201, "the key survives a restart")
    }

    @Test func refusesWhatItShould() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory, arguments: ["--rtmp-setup-timeout", "2", "--rtmp-idle-timeout", "5"])
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "carol"], stdin: "carol-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "carol"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        // A wrong key: ffmpeg is refused and the service says why.
        let wrong = try FFmpegPublisher(url: "\(service.rtmpBase)/live_not_a_key", seconds: 3, directory: directory)
        #expect(wrong.wait(timeout: 20) != 0)
        #expect(service.log.contains("RTMP publish refused: unknown or revoked stream key"))

        // A revoked key is refused too.
        #expect(try service.admin(["key", "revoke", key]).status == 0)
        let revoked = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 3, directory: directory)
        #expect(revoked.wait(timeout: 20) != 0)

        // Malformed bytes, an oversized message and a silent client: closed with a log line each.
        let group = MultiThreadedEventLoopGroup.singleton
        func exchange(_ bytes: [UInt8], wait: Double) async throws -> Bool {
            let channel = try await ClientBootstrap(group: group).connect(host: "127.0.0.1", port: service.rtmpPort).get()
            try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
            let deadline = Date().addingTimeInterval(wait)
            while channel.isActive, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
            let closed = !channel.isActive
            try? await channel.close()
            return closed
        }
        var handshake = [UInt8](repeating: 0, count: 1 + 2 * 1536)
        handshake[0] = 3
        #expect(try await exchange([3] + [UInt8](repeating: 7, count: 1536) + [UInt8](repeating: 0, count: 1536) + [0xC5, 1, 2, 3], wait: 5))
        #expect(await service.waitForLog("malformed chunk stream"))
        // A type 0 header announcing a 100 MB message.
        #expect(try await exchange(handshake + [0x03, 0, 0, 0, 0xFF, 0xFF, 0xFF, 20, 0, 0, 0, 0], wait: 5))
        #expect(await service.waitForLog("messageTooLarge"))
        #expect(try await exchange([6], wait: 5))
        #expect(await service.waitForLog("bad handshake"))
        #expect(try await exchange([3, 0, 0], wait: 6), "slowloris: the setup timeout closes it")
        #expect(await service.waitForLog("not publishing within the setup timeout"))

        // Random chunk streams after a good handshake (seeded): every connection ends, the service stays up.
        var rng = SeededGenerator(seed: 2024)
        for _ in 0..<20 {
            let garbage = (0..<Int.random(in: 1...4096, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            _ = try await exchange(handshake + garbage, wait: 0.3)
        }
        #expect(try CurlSession(directory: directory).request("GET", service.baseURL + "/healthz").status == 200)

        // Forms without a CSRF token are refused; sign-in is rate limited.
        let browser = CurlSession(directory: directory)
        #expect(try browser.request("POST", service.baseURL + "/signup", form: ["name": "mallory", "password": "whatever-password", "csrf": "forged"]).status == 403)
        _ = try browser.request("GET", service.baseURL + "/signin")
        let csrf = try #require(browser.csrf)
        var statuses: [Int] = []
        for _ in 0..<7 {
            statuses.append(try browser.request("POST", service.baseURL + "/signin", form: ["name": "carol", "password": "wrong-password", "csrf": csrf]).status)
        }
        #expect(statuses.prefix(5).allSatisfy { $0 == 401 } && statuses.last == 429, "\(statuses)")
        #expect(service.log.contains("Sign-in refused: rate limited"))

        // Still serving after all of that.
        #expect(try browser.request("GET", service.baseURL + "/healthz").status == 200)
        #expect(service.process.isRunning)
    }

    @Test func shutsDownGracefullyDuringAPublish() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "kim"], stdin: "kim-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "kim"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let publisher = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 20, directory: directory)
        defer { publisher.stop() }
        #expect(await service.waitForLog("RTMP publish started", timeout: 15))
        let id = try #require(try Self.liveBroadcasts(service, session: CurlSession(directory: directory)).first?["id"] as? String)

        // SIGTERM: the publish is closed, the broadcast recorded as ended, the process exits 0.
        let started = Date()
        service.stop()
        #expect(Date().timeIntervalSince(started) < 8)
        #expect(service.process.result?.succeeded == true, "\(service.log)")
        #expect(service.log.contains("Broadcast ended"))
        let restarted = try ServiceProcess(directory: directory)
        defer { restarted.stop() }
        let past = Self.json(try CurlSession(directory: directory).request("GET", restarted.baseURL + "/api/v1/broadcasts/\(id)").body)
        #expect(past["endedAt"] != nil && past["live"] as? Bool == false)
    }
}
