import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing
@testable import BroadcastMedia
@testable import BroadcastStore
@testable import BroadcastWeb
import ReplayFFmpeg

/// Live thumbnails in process: ffmpeg's captured publish through the ingest, its latest keyframe decoded
/// by libavcodec, scaled by libswscale and encoded as a JPEG, read back with ffmpeg; the cache; the
/// pure helpers of the directory's cards and the thumbnails' HTTP headers.
@Suite("live thumbnails and the directory's cards")
struct ThumbnailTests {
    /// A live stream that received ffmpeg's captured publish (testsrc, 160x120, H.264 + AAC).
    static func publishedStream() async throws -> LiveStream {
        let stream = LiveStream()
        var pipeline = IngestPipeline(stream: stream, threadPool: .singleton, logger: Logger(label: "test"))
        _ = try await PipelineTests.replay(accept: true, pipeline: &pipeline)
        await pipeline.finish()
        return stream
    }

    /// Distinct colours (3 bits a channel) of a JPEG's pixels, decoded by the ffmpeg command.
    static func colours(ofJPEG jpeg: [UInt8]) throws -> (width: Int, height: Int, colours: Int) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-thumb-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("t.jpg"), raw = folder.appendingPathComponent("t.rgb")
        try Data(jpeg).write(to: file)
        let probe = try Command.run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", file.path])
        let fields = probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",")
        guard fields.count == 3, fields[0] == "mjpeg", let width = Int(fields[1]), let height = Int(fields[2]) else {
            throw TestFailure("not a JPEG ffprobe reads: \(probe.stdout) \(probe.stderr)")
        }
        _ = try Command.run("ffmpeg", ["-v", "error", "-i", file.path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-y", raw.path])
        let pixels = try [UInt8](Data(contentsOf: raw))
        var seen = Set<Int>()
        for i in stride(from: 0, to: pixels.count - 2, by: 3) {
            seen.insert(Int(pixels[i] >> 5) << 6 | Int(pixels[i + 1] >> 5) << 3 | Int(pixels[i + 2] >> 5))
        }
        return (width, height, seen.count)
    }

    @Test func theLatestKeyframeDecodesToAJPEGOfThePicture() async throws {
        let stream = try await Self.publishedStream()
        let keyframe = try #require(stream.latestKeyframe.current, "the ingest kept the latest keyframe")
        #expect(!keyframe.avcC.isEmpty && keyframe.data.readableBytes > 0)

        // Never wider than the picture.
        let full = try ThumbnailDecoder.jpeg(of: keyframe, width: 480)
        #expect(Array(full.prefix(2)) == [0xFF, 0xD8] && Array(full.suffix(2)) == [0xFF, 0xD9], "a whole JPEG")
        let decoded = try Self.colours(ofJPEG: full)
        #expect(decoded.width == 160 && decoded.height == 120)
        #expect(decoded.colours >= 8, "testsrc's colour bars, not a grey or green picture: \(decoded.colours) colours")

        // Scaled down, the aspect kept, even sizes.
        let small = try Self.colours(ofJPEG: try ThumbnailDecoder.jpeg(of: keyframe, width: 96))
        #expect(small.width == 96 && small.height == 72)
        #expect(small.colours >= 8)
    }

    @Test func aBrokenKeyframeIsAnErrorNotACrash() throws {
        let keyframe = Keyframe(avcC: [1, 0x64, 0, 0x1F, 0xFF, 0xE0, 0], data: ByteBuffer(bytes: [0, 0, 0, 4, 0x65, 1, 2, 3]), serial: 1)
        #expect(throws: FFmpegError.self) { try ThumbnailDecoder.jpeg(of: keyframe, width: 320) }
    }

    @Test func theCacheDecodesOncePerKeyframeAndAge() async throws {
        let worker = NIOThreadPool(numberOfThreads: 1)
        worker.start()
        let stream = try await Self.publishedStream()
        let record = BroadcastRecord(id: "thumbtest", userID: 1, streamKeyID: 1, title: "t", application: .desktop, createdAt: 0,
                                     startedAt: 0, endedAt: nil, viewerPeak: 0, likes: 0)
        let broadcast = LiveBroadcast(record: record, broadcaster: "erin", stream: stream)
        let cache = ThumbnailCache(worker: worker, maximumAge: .milliseconds(300), logger: Logger(label: "test"))

        // Several at once: one decode, the same picture for all.
        let images = try await withThrowingTaskGroup(of: ThumbnailCache.Image?.self) { group in
            for _ in 0..<4 { group.addTask { try await cache.image(of: broadcast) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let first = try #require(images.first ?? nil)
        #expect(images.allSatisfy { $0?.madeAt == first.madeAt && $0?.etag == first.etag })
        #expect(first.renderCPU > .zero)
        #expect(Array(first.jpeg.readableBytesView.prefix(2)) == [0xFF, 0xD8])

        // Older than its age but the same keyframe: not decoded again, and the same validator.
        try await Task.sleep(for: .milliseconds(400))
        let again = try #require(try await cache.image(of: broadcast))
        #expect(again.etag == first.etag && again.keyframeSerial == first.keyframeSerial && again.renderCPU == first.renderCPU)

        // A new keyframe after the age: a new picture.
        stream.latestKeyframe.update(avcC: stream.latestKeyframe.current!.avcC, data: stream.latestKeyframe.current!.data)
        try await Task.sleep(for: .milliseconds(400))
        let newer = try #require(try await cache.image(of: broadcast))
        #expect(newer.keyframeSerial != first.keyframeSerial && newer.madeAt > first.madeAt)
        #expect(newer.etag == first.etag, "the same picture gets the same ETag")

        cache.forget("thumbtest")
        try await worker.shutdownGracefully()
    }

    @Test(arguments: [(0.0, "0:00"), (42.9, "0:42"), (723, "12:03"), (3723, "1:02:03"), (-5, "0:00")])
    func liveDurations(seconds: Double, text: String) {
        #expect(LiveDuration.text(seconds: seconds) == text)
    }

    @Test func httpDatesAndETags() {
        let date = Date(timeIntervalSince1970: 784_111_777)
        #expect(HTTPDate.format(date) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == date)
        #expect(HTTPDate.parse("yesterday") == nil)
        #expect(ThumbnailCache.etag([1, 2, 3]) == ThumbnailCache.etag([1, 2, 3]))
        #expect(ThumbnailCache.etag([1, 2, 3]) != ThumbnailCache.etag([1, 2, 4]))
        #expect(ThumbnailCache.etag([]).count == 18 && ThumbnailCache.etag([]).hasPrefix("\""))
    }
}
