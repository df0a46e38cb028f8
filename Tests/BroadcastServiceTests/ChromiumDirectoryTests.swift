import Foundation
import ReplayTesting
import Synchronization
import ReplayTesting
import Testing

/// Where the pages' screenshots go, for a person to look at: `.build/screenshots/` of the package.
let screenshotFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent(".build/screenshots")

extension ChromiumPageTests {
    /// A 64×64 PNG icon, base64, drawn by ffmpeg.
    static func iconPNG(_ source: String, directory: URL) throws -> String {
        let file = directory.appendingPathComponent("icon-\(UUID().uuidString).png")
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try Command.run("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", source, "-frames:v", "1", "-y", file.path])
        return try Data(contentsOf: file).base64EncodedString()
    }

    /// The directory's cards (live thumbnails, titles, broadcasters, applications, viewers, time live) on
    /// the front page and an application's page; the thumbnail's caching headers; the player's controls,
    /// its LIVE badge, and its messages when the connection drops (and it reconnects) and when the
    /// broadcast ends. Screenshots in `.build/screenshots/`.
    @Test func liveCardsThumbnailsAndThePlayersControls() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let service = try ServiceProcess(directory: directory)
        defer { service.stop() }
        var keys: [String] = []
        for (name, password) in [("erin", "erin-password-1"), ("frank", "frank-password-1")] {
            #expect(try service.admin(["user", "create", name], stdin: password + "\n").status == 0)
            keys.append(try service.admin(["key", "create", name]).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let api = CurlSession(directory: directory)
        let icon = try Self.iconPNG("mandelbrot=size=64x64", directory: directory)
        let created = ServiceSystemTests.json(try api.request("POST", service.baseURL + "/api/v1/broadcasts", json: """
            {"title": "Lap record attempt", "application": {"id": "com.example.racer", "name": "Racer", "iconPNG": "\(icon)"}}
            """, headers: ["Authorization": "Bearer \(keys[0])"]).body)
        let id = try #require(created["id"] as? String)
        let racer = try FFmpegPublisher(url: "\(service.rtmpBase)/\(keys[0])", seconds: 120, size: "1280x720", directory: directory)
        defer { racer.stop() }
        let desktop = try FFmpegPublisher(url: "\(service.rtmpBase)/\(keys[1])", seconds: 120, size: "640x360", directory: directory)
        defer { desktop.stop() }
        let base = service.baseURL
        let racerProcess = racer.process.pid
        let deadline = Date().addingTimeInterval(20)
        while try ServiceSystemTests.liveBroadcasts(service, session: api).count < 2, Date() < deadline { try await Task.sleep(for: .milliseconds(200)) }
        #expect(try ServiceSystemTests.liveBroadcasts(service, session: api).count == 2)

        // The thumbnail over HTTP: a JPEG of the picture with caching headers, and 304 when unchanged.
        let jpegFile = directory.appendingPathComponent("thumbnail.jpg")
        var thumbnail = try api.request("GET", base + "/b/\(id)/thumbnail.jpg")
        for _ in 0..<50 where thumbnail.status == 404 {  // until the first keyframe
            try await Task.sleep(for: .milliseconds(200))
            thumbnail = try api.request("GET", base + "/b/\(id)/thumbnail.jpg")
        }
        #expect(thumbnail.status == 200, "\(thumbnail.headers)")
        let headers = Self.headerFields(thumbnail.headers)
        #expect(headers["content-type"] == "image/jpeg")
        let maxAge = Int(headers["cache-control"]?.replacingOccurrences(of: "max-age=", with: "") ?? "") ?? 0
        #expect((1...10).contains(maxAge), "Cache-Control: \(headers["cache-control"] ?? "none")")
        let etag = try #require(headers["etag"])
        let lastModified = try #require(headers["last-modified"])
        #expect(headers["server-timing"]?.hasPrefix("render;dur=") == true)
        // Asked again at once, well inside the thumbnail's 10 s (a loaded machine took longer than that
        // to fetch and decode it below, and the service had made the next one by then).
        #expect(try api.request("GET", base + "/b/\(id)/thumbnail.jpg", headers: ["If-None-Match": etag]).status == 304)
        #expect(try api.request("GET", base + "/b/\(id)/thumbnail.jpg", headers: ["If-Modified-Since": lastModified]).status == 304)
        _ = try await Command.run("/usr/bin/curl", ["-s", "-o", jpegFile.path, base + "/b/\(id)/thumbnail.jpg"])
        let picture = try ThumbnailTests.colours(ofJPEG: [UInt8](Data(contentsOf: jpegFile)))
        #expect(picture.width == 480 && picture.height == 270, "480 wide, 16:9 like the 1280x720 publish")
        #expect(picture.colours >= 8, "testsrc's colours: \(picture.colours)")
        #expect(try api.request("GET", base + "/b/\(id)/thumbnail.jpg", headers: ["If-None-Match": "\"other\""]).status == 200)
        #expect(try api.request("GET", base + "/b/nosuchthing/thumbnail.jpg").status == 404)

        // The player is watched through a proxy that can cut its connection, as a network drop would.
        // The proxy is stopped and started again below; whichever runs at the end is stopped then.
        let proxies = ProxyList()
        defer { proxies.stopAll() }
        let httpPort = service.httpPort
        let (proxyProcess, proxyPort) = try proxies.start(to: httpPort, directory: directory)
        let viaProxy = "http://127.0.0.1:\(proxyPort)"

        let chromium = try Chromium(directory: directory)
        defer { chromium.stop() }
        try await chromium.withPage { page in
            try await page.setViewport(width: 1280, height: 800)

            // The front page: two applications, a card each, every part of the card there.
            try await page.navigate(base + "/")
            try await page.waitFor("document.querySelectorAll('.live-card img.thumbnail').length === 2 && "
                                   + "[...document.querySelectorAll('img.thumbnail')].every(i => i.complete && i.naturalWidth === 480)", timeout: 20)
            #expect(try await page.evaluate("[...document.querySelectorAll('section.app')].map(s => s.dataset.app).sort().join()")
                == "\"com.example.racer,org.openreplaykit.desktop\"")
            let card = "document.querySelector('.live-card[data-id=\"\(id)\"]')"
            #expect(try await page.evaluate("\(card).querySelector('.title').textContent") == "\"Lap record attempt\"")
            #expect(try await page.evaluate("\(card).querySelector('.broadcaster').textContent") == "\"erin\"")
            #expect(try await page.evaluate("\(card).querySelector('.app-name').textContent") == "\"Racer\"")
            #expect(try await page.evaluate("\(card).querySelector('.meta .app-icon').naturalWidth") == "64")
            #expect(try await page.evaluate("\(card).querySelector('.viewers').textContent") == "\"0\"")
            #expect(try await page.evaluate("/^\\d+:\\d\\d$/.test(\(card).querySelector('.uptime').textContent)") == "true")
            #expect(try await page.evaluate("\(card).closest('section.app').querySelector('h2 .name').textContent") == "\"Racer\"")
            try await page.screenshot(to: screenshotFolder.appendingPathComponent("directory.png"))

            // An application's page: its broadcast only; the thumbnail is fetched again after 10 s.
            try await page.navigate(base + "/apps/com.example.racer")
            try await page.waitFor("document.querySelectorAll('.live-card').length === 1 && orkDirectory.thumbnailsLoaded === 1")
            try await page.waitFor("orkDirectory.refreshes >= 1 && orkDirectory.thumbnailsLoaded >= 2", timeout: 15)
            #expect(try await page.evaluate("document.querySelector('img.thumbnail').naturalWidth") == "480")
            try await page.screenshot(to: screenshotFolder.appendingPathComponent("application.png"))

            // The player: playing at the live edge, with volume, mute and fullscreen.
            try await page.navigate(viaProxy + "/b/\(id)")
            try await page.waitFor("window.orkPlayer && orkPlayer.mode === 'webcodecs' && orkPlayer.framesDrawn > 30", timeout: 20)
            try await page.waitFor("orkPlayer.behind !== null && orkPlayer.behind < 1.5 && document.getElementById('live-badge').textContent === 'LIVE'")
            _ = try await page.evaluate("document.getElementById('mute').click(); true")
            #expect(try await page.evaluate("orkPlayer.muted") == "true")
            _ = try await page.evaluate("document.getElementById('mute').click(); true")
            _ = try await page.evaluate("""
                const v = document.getElementById('volume'); v.value = '0.4'; v.dispatchEvent(new Event('input')); true
                """)
            #expect(try await page.evaluate("orkPlayer.muted === false && orkPlayer.volume === 0.4") == "true")
            _ = try await page.evaluate("document.getElementById('fullscreen').click(); true", userGesture: true)
            try await page.waitFor("orkPlayer.fullscreen === true", timeout: 5)
            _ = try await page.evaluate("document.exitFullscreen(); true")
            try await page.waitFor("orkPlayer.fullscreen === false", timeout: 5)
            try await page.waitFor("orkPlayer.behind !== null && orkPlayer.behind < 1.5")
            try await page.screenshot(to: screenshotFolder.appendingPathComponent("player.png"))

            // The connection drops: a message, reconnecting, and playing again with the message gone.
            kill(proxyProcess, SIGUSR1)
            try await page.waitFor("orkPlayer.messages.some(m => m.startsWith('The connection dropped.') && m.includes('Reconnecting'))", timeout: 5)
            try await page.waitFor("orkPlayer.message === '' && orkPlayer.reconnects >= 1", timeout: 20)
            let drawn = Int(try await page.evaluate("orkPlayer.framesDrawn")) ?? 0
            try await page.waitFor("orkPlayer.framesDrawn > \(drawn + 30)", timeout: 10)

            // The server cannot be reached for a while (the proxy gone): it says so, and tries again, waiting
            // longer each time; reachable again: playing again.
            kill(proxyProcess, SIGKILL)
            try await page.waitFor("orkPlayer.message.startsWith('The server cannot be reached. Reconnecting in')", timeout: 10)
            try await page.screenshot(to: screenshotFolder.appendingPathComponent("player-reconnecting.png"))
            _ = try proxies.start(to: httpPort, listen: proxyPort, directory: directory)
            try await page.waitFor("orkPlayer.message === ''", timeout: 20)
            let drawnAgain = Int(try await page.evaluate("orkPlayer.framesDrawn")) ?? 0
            try await page.waitFor("orkPlayer.framesDrawn > \(drawnAgain + 30)", timeout: 10)

            // The broadcaster stops: the broadcast has ended, said over the picture.
            kill(racerProcess, SIGKILL)  // (SIGINT is blocked in the test runner's children)
            try await page.waitFor("orkPlayer.message === 'The broadcast has ended.'", timeout: 20)
            #expect(try await page.evaluate("document.getElementById('live-badge').textContent") == "\"ENDED\"")
            #expect(try await page.evaluate("!document.getElementById('overlay').hidden") == "true")
            try await page.screenshot(to: screenshotFolder.appendingPathComponent("player-ended.png"))

            // The front page follows: one card left (it reloads when the set of live broadcasts changes).
            try await page.navigate(base + "/")
            try await page.waitFor("document.querySelectorAll('.live-card').length === 1")
            #expect(try await page.evaluate("document.querySelector('.live-card .broadcaster').textContent") == "\"frank\"")
        }
        #expect(try api.request("GET", base + "/b/\(id)/thumbnail.jpg").status == 404, "no thumbnail once ended")
    }

    /// Lower-cased header names → values, of the last response in curl's `-D` output.
    static func headerFields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in text.components(separatedBy: "\r\n") {
            if line.hasPrefix("HTTP/") { fields = [:]; continue }
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }
}

/// The proxies a test started (it restarts one), stopped at its end.
final class ProxyList: Sendable {
    private let proxies = Mutex<[CuttableProxy]>([])

    /// Starts a proxy; returns its process and port.
    func start(to port: Int, listen: Int = 0, directory: URL) throws -> (process: Int32, port: Int) {
        try proxies.withLock { proxies in
            let proxy = try CuttableProxy(to: port, listen: listen, directory: directory)
            proxies.append(proxy)
            return (proxy.process.pid, proxy.port)
        }
    }

    func stopAll() { proxies.withLock { for proxy in $0 { proxy.stop() } } }
}
