import Foundation
import RTMP
import ReplayTesting
import Testing

/// The viewer pages in a real browser: headless Chromium driven over the DevTools protocol.
@Suite("broadcast pages in headless Chromium", .serialized, .timeLimit(.minutes(3)),
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")))
struct ChromiumPageTests {
    /// `replay broadcast` prints the page's address as soon as the broadcast is created, before its
    /// first picture reaches the service: a viewer who opens it then waits on the page, which plays
    /// the broadcast as soon as it is live, without a reload by hand.
    @Test func aPageOpenedBeforeTheBroadcastStartsPlaysItWhenItDoes() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        let (key, id) = try Self.createBroadcast(on: service, directory: directory, user: "fay", title: "Soon")
        let chromium = try Chromium(directory: directory)
        defer { chromium.stop() }
        let pageURL = service.baseURL + "/b/\(id)", rtmp = "\(service.rtmpBase)/\(key)"
        try await chromium.withPage { page in
            try await page.navigate(pageURL)
            try await page.waitFor("document.readyState === 'complete'")
            #expect(try await page.evaluate("document.getElementById('status').textContent").contains("has not started yet"))
            #expect(try await page.evaluate("!!window.orkPlayer") == "false")
            let publisher = try FFmpegPublisher(url: rtmp, seconds: 30, directory: directory)
            defer { publisher.stop() }
            try await page.waitFor("window.orkPlayer && orkPlayer.framesDrawn > 15", timeout: 30)
            #expect(try await page.evaluate("document.getElementById('title').textContent") == "\"Soon\"")
        }
    }

    @Test func signUpFindTheBroadcastWatchChatAndLike() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        #expect(try service.admin(["user", "create", "erin"], stdin: "erin-password-1\n").status == 0)
        let key = try service.admin(["key", "create", "erin"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let api = CurlSession(directory: directory)
        let created = ServiceSystemTests.json(try api.request("POST", service.baseURL + "/api/v1/broadcasts", json: """
            {"title": "Chromium check", "application": {"id": "com.example.racer", "name": "Racer", "iconPNG": "\(ServiceSystemTests.iconPNG)"}}
            """, headers: ["Authorization": "Bearer \(key)"]).body)
        let id = try #require(created["id"] as? String)
        // The directory shows an application's icon once the operator verified it.
        let iconFile = directory.appendingPathComponent("racer.png")
        try Data(base64Encoded: ServiceSystemTests.iconPNG)!.write(to: iconFile)
        #expect(try service.admin(["app", "verify", "com.example.racer", "--icon", iconFile.path]).status == 0)
        let publisher = try FFmpegPublisher(url: "\(service.rtmpBase)/\(key)", seconds: 40, directory: directory)
        defer { publisher.stop() }
        #expect(await service.waitForLog("RTMP publish started", timeout: 15))

        let chromium = try Chromium(directory: directory)
        defer { chromium.stop() }
        let base = service.baseURL
        let webSocketBase = "ws://127.0.0.1:\(service.httpPort)"
        try await chromium.withPage { page in
            // Sign up through the form.
            try await page.navigate(base + "/signup")
            _ = try await page.evaluate("""
                document.querySelector('input[name=name]').value = 'dave';
                document.querySelector('input[name=password]').value = 'dave-password-1';
                document.querySelector('form.card').submit(); true
                """)
            try await page.waitFor("location.pathname === '/account' && document.readyState === 'complete'")
            #expect(try await page.evaluate("document.querySelector('header nav b').textContent") == "\"dave\"")

            // The directory shows the broadcast under its application's name and icon.
            try await page.navigate(base + "/")
            try await page.waitFor("document.querySelector('[data-app=\"com.example.racer\"] img').complete")
            #expect(try await page.evaluate("document.querySelector('[data-app=\"com.example.racer\"] .name').textContent") == "\"Racer\"")
            #expect(try await page.evaluate("document.querySelector('[data-app=\"com.example.racer\"] img').naturalWidth") == "1")

            // The broadcast page plays with WebCodecs on a canvas: frames are drawn one after another, the
            // pixels are the test pattern's, and the sound is decoded too.
            try await page.navigate(base + "/b/\(id)")
            try await page.waitFor("window.orkPlayer && orkPlayer.mode === 'webcodecs' && orkPlayer.framesDrawn > 15", timeout: 20)
            let drawn0 = Int(try await page.evaluate("orkPlayer.framesDrawn")) ?? 0
            try await Task.sleep(for: .seconds(2))
            let drawn1 = Int(try await page.evaluate("orkPlayer.framesDrawn")) ?? 0
            #expect(drawn1 - drawn0 > 30, "frames drawn: \(drawn0) → \(drawn1)")
            #expect(try await page.evaluate("document.getElementById('video').hidden && !document.getElementById('screen').hidden") == "true")
            #expect(try await page.evaluate("orkPlayer.error") == "null")
            let playerState = try await page.evaluate("JSON.stringify({...orkPlayer, events: orkPlayer.events.slice(-4)})")
            #expect((Int(try await page.evaluate("orkPlayer.audioDecoded")) ?? 0) > 20, "AAC decoded for WebAudio: \(playerState)")
            #expect(try await Self.colours(page, of: "screen") >= 8, "testsrc's colour bars on the canvas")
            #expect(try await page.evaluate("document.getElementById('viewers').textContent") == "\"1\"")

            // The Media Source Extensions fallback (forced): time advances, frames decode, pixels are the test pattern's.
            try await page.navigate(base + "/b/\(id)?player=mse")
            try await page.waitFor("document.getElementById('video').currentTime > 0.5", timeout: 20)
            #expect(try await page.evaluate("orkPlayer.mode") == "\"mse\"")
            let t0 = Double(try await page.evaluate("document.getElementById('video').currentTime")) ?? 0
            try await Task.sleep(for: .seconds(2))
            let t1 = Double(try await page.evaluate("document.getElementById('video').currentTime")) ?? 0
            #expect(t1 - t0 > 1.0, "playback advances: \(t0) → \(t1)")
            let frames = Int(try await page.evaluate("document.getElementById('video').getVideoPlaybackQuality().totalVideoFrames")) ?? 0
            #expect(frames > 30)
            #expect(try await Self.colours(page, of: "video") >= 8, "testsrc's colour bars in the video")
            try await Task.sleep(for: .seconds(1))
            let pageEvents = try await page.evaluate("JSON.stringify(orkPlayer.events)")
            #expect(try await page.evaluate("document.getElementById('viewers').textContent") == "\"1\"", "\(pageEvents)")

            // A second viewer joins and leaves: the page's count follows.
            async let second = WebSocketCollector.collect(url: webSocketBase + "/b/\(id)/ws", seconds: 2)
            try await page.waitFor("document.getElementById('viewers').textContent === '2'", timeout: 5)
            _ = try await second
            try await page.waitFor("document.getElementById('viewers').textContent === '1'", timeout: 5)

            // Chat and like from the page arrive on the extension's event stream.
            let feedback = WebSocketCollector()
            async let events = WebSocketCollector.collect(url: webSocketBase + "/api/v1/broadcasts/\(id)/events", seconds: 10,
                                                          headers: ["Authorization": "Bearer \(key)"], into: feedback) { c in
                c.texts.contains { $0.contains("\"like\"") } && c.texts.contains { $0.contains("\"comment\"") }
            }
            try await feedback.wait { !$0.texts.isEmpty }
            _ = try await page.evaluate("""
                document.querySelector('#chat-form input[name=text]').value = 'gg <img src=x onerror=alert(1)>';
                document.querySelector('#chat-form button').click();
                document.getElementById('like').click(); true
                """)
            let received = try await events.events
            #expect(received.contains { $0["type"] as? String == "comment" && $0["user"] as? String == "dave"
                && $0["text"] as? String == "gg <img src=x onerror=alert(1)>" })
            #expect(received.contains { $0["type"] as? String == "like" && $0["user"] as? String == "dave" })
            // The page shows the comment as text, not as markup.
            try await page.waitFor("document.querySelectorAll('#chat li').length === 1")
            #expect(try await page.evaluate("document.querySelectorAll('#chat img').length") == "0")
            #expect(try await page.evaluate("document.getElementById('likes').textContent") == "\"1\"")
        }
    }

    /// The broadcaster's picture changes size mid-broadcast (an app's broadcast follows its screen,
    /// and its encoder starts again with a new H.264 configuration): the service sends the viewers
    /// the new type and init segment, and the page plays on at the new size, in both of its players.
    /// The publisher sends 5 s of a 320x240 recording, then 7 s of a 640x360 one, in one publish.
    @Test(arguments: ["webcodecs", "mse"])
    func aNewPictureSizeMidBroadcastPlaysOnAtThatSize(player: String) async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let tags = try FLVFile.resizingTags([(5, "320x240"), (7, "640x360")], directory: directory)
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        let (key, id) = try Self.createBroadcast(on: service, directory: directory, user: "gus", title: "Resized")
        let chromium = try Chromium(directory: directory)
        defer { chromium.stop() }
        let pageURL = service.baseURL + "/b/\(id)" + (player == "mse" ? "?player=mse" : ""), rtmp = "\(service.rtmpBase)/\(key)"
        try await chromium.withPage { page in
            try await page.navigate(pageURL)
            try await page.waitFor("document.readyState === 'complete'")
            let publishing = Task {
                try await RTMPPublisher.publish(to: try RTMPPublishTarget(url: rtmp), setupTimeout: RTMPClientSystemTests.setupTimeout, logger: RTMPClientSystemTests.logger) { session in
                    try await RTMPClientSystemTests.send(tags, session)
                }
            }
            defer { publishing.cancel() }
            // What each player shows: WebCodecs draws on the canvas and counts its pictures; MSE plays the
            // <video>, whose time (30 pictures a second) says how far it has played.
            let element = player == "mse" ? "video" : "screen"
            let width = player == "mse" ? "document.getElementById('video').videoWidth" : "document.getElementById('screen').width"
            let shown = player == "mse" ? "Math.round(document.getElementById('video').currentTime * 30)" : "orkPlayer.framesDrawn"
            try await page.waitFor("window.orkPlayer && orkPlayer.mode === '\(player)' && \(shown) > 15 && \(width) === 320", timeout: 20)
            #expect(try await Self.colours(page, of: element) >= 4, "the 320x240 pattern shows")
            try await page.waitFor("orkPlayer.players === 2 && \(width) === 640", timeout: 20)
            let drawnThen = Double(try await page.evaluate(shown)) ?? 0
            try await Task.sleep(for: .seconds(2))
            let drawnNow = Double(try await page.evaluate(shown)) ?? 0
            #expect(drawnNow - drawnThen >= 30, "the page plays on at 640x360: \(drawnNow - drawnThen) pictures in 2 s")
            #expect(try await page.evaluate("\(width)") == "640")
            #expect(try await Self.colours(page, of: element) >= 4, "the 640x360 pattern shows")
            #expect(try await page.evaluate("orkPlayer.error") == "null")
            try await publishing.value
        }
        #expect(await service.waitForLog("H.264 configuration changed"), "\(service.log.suffix(2000))")
    }

    /// A new account `user` with a stream key, and a broadcast created with that key (not yet live):
    /// the key to publish with and the broadcast's id (its page is `/b/{id}`).
    static func createBroadcast(on service: ServiceProcess, directory: URL, user: String, title: String) throws -> (key: String, id: String) {
        #expect(try service.admin(["user", "create", user], stdin: "\(user)-password-1\n").status == 0)
        let key = try service.admin(["key", "create", user]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let created = ServiceSystemTests.json(try CurlSession(directory: directory).request("POST", service.baseURL + "/api/v1/broadcasts", json: """
            {"title": "\(title)"}
            """, headers: ["Authorization": "Bearer \(key)"]).body)
        return (key, try #require(created["id"] as? String))
    }

    /// How many distinct colours (3 bits a channel) a sample of the element's pixels has.
    static func colours(_ page: ChromiumPage, of element: String) async throws -> Int {
        Int(try await page.evaluate("""
            (() => { const v = document.getElementById('\(element)'); const c = document.createElement('canvas');
              c.width = v.videoWidth || v.width; c.height = v.videoHeight || v.height; const g = c.getContext('2d'); g.drawImage(v, 0, 0);
              const d = g.getImageData(0, 0, c.width, c.height).data; const seen = new Set();
              for (let i = 0; i < d.length; i += 4 * 97) seen.add((d[i] >> 5) + ',' + (d[i+1] >> 5) + ',' + (d[i+2] >> 5));
              return seen.size; })()
            """)) ?? 0
    }
}
