import Foundation
import Testing

/// `--relay`: one service re-publishes what it ingests to another RTMP server (here a second service,
/// standing in for a CDN or a media-server cluster).
@Suite("relay to an external RTMP URL", .serialized, .timeLimit(.minutes(2)))
struct RelayTests {
    @Test func aBroadcastIsRepublishedToAnotherServer() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let downstreamDirectory = directory.appendingPathComponent("downstream")
        try FileManager.default.createDirectory(at: downstreamDirectory, withIntermediateDirectories: true)
        let downstream = try ServiceProcess(directory: downstreamDirectory)
        defer { downstream.stop() }
        #expect(try downstream.admin(["user", "create", "cdn"], stdin: "cdn-password-1\n").status == 0)
        let downstreamKey = try downstream.admin(["key", "create", "cdn"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let origin = try ServiceProcess(directory: directory, arguments: ["--relay", "\(downstream.rtmpBase)/\(downstreamKey)"])
        defer { origin.stop() }
        #expect(try origin.admin(["user", "create", "gina"], stdin: "gina-password-1\n").status == 0)
        let key = try origin.admin(["key", "create", "gina"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let publisher = try FFmpegPublisher(url: "\(origin.rtmpBase)/\(key)", seconds: 12, directory: directory)
        defer { publisher.stop() }
        #expect(origin.waitForLog("RTMP relay connected", timeout: 15), "\(origin.log)")
        #expect(downstream.waitForLog("Broadcast live", timeout: 15))

        // The relayed copy plays downstream: ffprobe reads its HLS.
        let api = CurlSession(directory: directory)
        var hls: String?
        for _ in 0..<50 where hls == nil {
            hls = (ServiceSystemTests.json(try api.request("GET", downstream.baseURL + "/api/live").body)["broadcasts"] as? [[String: Any]])?
                .first?["hlsURL"] as? String
            if hls == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let url = try #require(hls)
        var probe = CommandResult(status: -1, stdout: "", stderr: "")
        for _ in 0..<40 {
            probe = try Command.run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "compact", url], timeout: 20)
            if probe.status == 0, probe.stdout.contains("h264") { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        #expect(probe.stdout.contains("codec_name=h264|width=320|height=240"), "\(probe.stderr)")
        #expect(probe.stdout.contains("codec_name=aac"))

        publisher.stop()
        #expect(origin.waitForLog("RTMP relay finished"))
        #expect(downstream.waitForLog("Broadcast ended"))
    }
}
