import Foundation
import RTMP
import ReplayTesting
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

        // Long enough to outlast a loaded machine's start (the test stops it once the copy was read):
        // at 12 s it once ended, and the downstream broadcast with it, before the probe read the copy.
        let publisher = try FFmpegPublisher(url: "\(origin.rtmpBase)/\(key)", seconds: 60, directory: directory)
        defer { publisher.stop() }
        #expect(await origin.waitForLog("RTMP relay connected", timeout: 15), "\(origin.log)")
        #expect(await downstream.waitForLog("Broadcast live", timeout: 15))

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
        let deadline = ContinuousClock.now + .seconds(40)
        while ContinuousClock.now < deadline {
            probe = try await Command.run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "compact", url], timeout: 20)
            if probe.status == 0, probe.stdout.contains("h264") { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        #expect(probe.stdout.contains("codec_name=h264|width=320|height=240"),
                "\(probe.stderr)\norigin:\n\(origin.log.suffix(2000))\ndownstream:\n\(downstream.log.suffix(2000))")
        #expect(probe.stdout.contains("codec_name=aac"))

        publisher.stop()
        #expect(await origin.waitForLog("RTMP relay finished"))
        #expect(await downstream.waitForLog("Broadcast ended"))
    }

    /// The broadcaster's picture changes size mid-broadcast (a new H.264 sequence header in one
    /// publish): the relay sends the new configuration before the new pictures, and its receiver
    /// (nginx-rtmp, writing what it receives to a file) decodes every picture of both sizes, in order.
    @Test func aNewPictureSizeIsRelayedAsANewSequenceHeader() async throws {
        let directory = try ServiceProcess.makeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let tags = try FLVFile.resizingTags([(3, "320x240"), (3, "640x360")], directory: directory)
        try await NginxRTMPServer.with { nginx in
            let origin = try ServiceProcess(directory: directory, arguments: ["--relay", "\(nginx.recordingBase)/relayed"])
            defer { origin.stop() }
            #expect(try origin.admin(["user", "create", "hana"], stdin: "hana-password-1\n").status == 0)
            let key = try origin.admin(["key", "create", "hana"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)

            try await RTMPPublisher.publish(to: try RTMPPublishTarget(url: "\(origin.rtmpBase)/\(key)"), setupTimeout: RTMPClientSystemTests.setupTimeout, logger: RTMPClientSystemTests.logger) { session in
                try await RTMPClientSystemTests.send(tags, session)
            }
            #expect(await origin.waitForLog("RTMP relay finished", timeout: 15), "\(origin.log.suffix(3000))")
            #expect(origin.log.contains("RTMP relay follows a new H.264 configuration"))

            let file = try await nginx.finishedRecording(of: "relayed")
            let sizes = try await MediaProbe.videoFrameSizes(file).map { "\($0.width)x\($0.height)" }
            let before = sizes.filter { $0 == "320x240" }.count, after = sizes.filter { $0 == "640x360" }.count
            #expect(before == 90 && after == 90, "pictures decoded from the relayed copy: \(before) at 320x240, \(after) at 640x360 of \(sizes.count)")
            #expect(sizes.firstIndex(of: "640x360").map { index in !sizes[index...].contains("320x240") } == true, "the new size follows the old")
        }
    }
}
