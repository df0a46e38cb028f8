import Foundation

/// One stream as ffprobe sees it.
public struct MediaStream: Sendable, Decodable {
    public var index: Int
    /// `h264`, `aac`, …
    public var codecName: String?
    /// `video`, `audio`, …
    public var codecType: String?
    public var width: Int?
    public var height: Int?
    public var pixelFormat: String?
    /// `tv` (video range) or `pc` (full range), as the stream says.
    public var colorRange: String?
    /// Frames (or audio packets' frames) decoded by `-count_frames`.
    public var readFrames: Int?
    /// Frames the container declares.
    public var declaredFrames: Int?
    public var duration: Double?
    public var startTime: Double?
    public var sampleRate: Int?
    public var channels: Int?
    /// `avg_frame_rate` as a number.
    public var averageFrameRate: Double?
    /// The track's name: an MP4's `handler_name` ("Microphone").
    public var handlerName: String?

    /// Decoded frames when counted, else the container's count.
    public var frameCount: Int? { readFrames ?? declaredFrames }

    enum CodingKeys: String, CodingKey {
        case index, width, height, channels
        case codecName = "codec_name", codecType = "codec_type", pixelFormat = "pix_fmt", colorRange = "color_range"
        case readFrames = "nb_read_frames", declaredFrames = "nb_frames", duration
        case startTime = "start_time", sampleRate = "sample_rate", averageFrameRate = "avg_frame_rate"
        case tags
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        index = try c.decode(Int.self, forKey: .index)
        codecName = try c.decodeIfPresent(String.self, forKey: .codecName)
        codecType = try c.decodeIfPresent(String.self, forKey: .codecType)
        width = try c.decodeIfPresent(Int.self, forKey: .width)
        height = try c.decodeIfPresent(Int.self, forKey: .height)
        channels = try c.decodeIfPresent(Int.self, forKey: .channels)
        pixelFormat = try c.decodeIfPresent(String.self, forKey: .pixelFormat)
        colorRange = try c.decodeIfPresent(String.self, forKey: .colorRange)
        readFrames = (try c.decodeIfPresent(String.self, forKey: .readFrames)).flatMap { Int($0) }
        declaredFrames = (try c.decodeIfPresent(String.self, forKey: .declaredFrames)).flatMap { Int($0) }
        duration = (try c.decodeIfPresent(String.self, forKey: .duration)).flatMap { Double($0) }
        startTime = (try c.decodeIfPresent(String.self, forKey: .startTime)).flatMap { Double($0) }
        sampleRate = (try c.decodeIfPresent(String.self, forKey: .sampleRate)).flatMap { Int($0) }
        averageFrameRate = (try c.decodeIfPresent(String.self, forKey: .averageFrameRate)).flatMap(Self.rational)
        handlerName = (try c.decodeIfPresent([String: String].self, forKey: .tags))?["handler_name"]
    }

    static func rational(_ text: String) -> Double? {
        let parts = text.split(separator: "/")
        guard parts.count == 2, let n = Double(parts[0]), let d = Double(parts[1]), d != 0 else { return Double(text) }
        return n / d
    }
}

/// The container as ffprobe sees it.
public struct MediaFormat: Sendable, Decodable {
    public var formatName: String?
    public var duration: Double?
    public var startTime: Double?
    public var size: Int?
    public var streamCount: Int?

    enum CodingKeys: String, CodingKey {
        case formatName = "format_name", duration, startTime = "start_time", size, streamCount = "nb_streams"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        formatName = try c.decodeIfPresent(String.self, forKey: .formatName)
        duration = (try c.decodeIfPresent(String.self, forKey: .duration)).flatMap { Double($0) }
        startTime = (try c.decodeIfPresent(String.self, forKey: .startTime)).flatMap { Double($0) }
        size = (try c.decodeIfPresent(String.self, forKey: .size)).flatMap { Int($0) }
        streamCount = try c.decodeIfPresent(Int.self, forKey: .streamCount)
    }
}

/// What ffprobe says about a file.
public struct MediaInfo: Sendable, Decodable {
    public var streams: [MediaStream]
    public var format: MediaFormat

    public var videoStreams: [MediaStream] { streams.filter { $0.codecType == "video" } }
    public var audioStreams: [MediaStream] { streams.filter { $0.codecType == "audio" } }
}

/// `ffprobe -v error -show_streams -show_format -count_frames -of json FILE`, decoded.
public enum MediaProbe {
    /// Probes `file`; with `countFrames` every frame is decoded and counted (`readFrames`).
    /// Throws with ffprobe's message when the file does not probe.
    public static func probe(_ file: String, countFrames: Bool = true) async throws -> MediaInfo {
        try parse(try await ProcessRunner.run("ffprobe", arguments: arguments(file, countFrames), timeout: .seconds(120)), file: file)
    }

    /// The same, blocking the calling thread: for synchronous tests.
    public static func probe(_ file: String, countFrames: Bool = true) throws -> MediaInfo {
        try parse(try ProcessRunner.run("ffprobe", arguments: arguments(file, countFrames), timeout: .seconds(120)), file: file)
    }

    private static func arguments(_ file: String, _ countFrames: Bool) -> [String] {
        ["-v", "error", "-show_streams", "-show_format"] + (countFrames ? ["-count_frames"] : []) + ["-of", "json", file]
    }

    private static func parse(_ result: ProcessResult, file: String) throws -> MediaInfo {
        guard result.succeeded else { throw HarnessError("ffprobe cannot read \(file): \(result.stderr)") }
        do {
            return try JSONDecoder().decode(MediaInfo.self, from: result.standardOutput)
        } catch {
            throw HarnessError("ffprobe's JSON for \(file) did not decode: \(error)\n\(result.stdout.prefix(2000))")
        }
    }

    /// Every decoded video frame in presentation order: its time as stored (seconds, not moved
    /// to the file's start) and its picture type ("I", "P" or "B").
    public static func videoPictures(_ file: String) async throws -> [(time: Double, type: String)] {
        try await csv(file, ["-select_streams", "v:0", "-show_entries", "frame=pts_time,pict_type"]).map { fields in
            guard fields.count >= 2, let time = Double(fields[0]) else { throw HarnessError("ffprobe gave a frame without a time: \(fields)") }
            return (time, fields[1])
        }
    }

    /// Every video packet in decoding order: its presentation and decoding time (seconds, as stored).
    public static func videoPackets(_ file: String) async throws -> [(presentation: Double, decoding: Double)] {
        try await csv(file, ["-select_streams", "v:0", "-show_entries", "packet=pts_time,dts_time"]).map { fields in
            guard fields.count >= 2, let pts = Double(fields[0]), let dts = Double(fields[1]) else {
                throw HarnessError("ffprobe gave a packet without times: \(fields)")
            }
            return (pts, dts)
        }
    }

    /// Where the stream `selector` (`v:0`, `a:0`) ends: the latest presentation time plus duration of
    /// its packets (seconds, as stored).
    public static func lastPacketEnd(_ file: String, stream selector: String) async throws -> Double {
        let ends = try await csv(file, ["-select_streams", selector, "-show_entries", "packet=pts_time,duration_time"]).compactMap { fields -> Double? in
            guard fields.count >= 2, let pts = Double(fields[0]) else { return nil }
            return pts + (Double(fields[1]) ?? 0)
        }
        guard let end = ends.max() else { throw HarnessError("\(file) has no packets in stream \(selector)") }
        return end
    }

    /// The durations ffprobe reports for `file`: the format's, each stream's, and where each
    /// stream's packets end, as one line for messages.
    public static func durations(_ file: String) async throws -> (format: Double?, streams: [Double?], packetEnds: [Double]) {
        let info = try await probe(file, countFrames: false)
        var ends: [Double] = []
        for stream in info.streams {
            ends.append(try await lastPacketEnd(file, stream: "\(stream.index)"))
        }
        return (info.format.duration, info.streams.map(\.duration), ends)
    }

    private static func csv(_ file: String, _ arguments: [String]) async throws -> [[String]] {
        let result = try await ProcessRunner.run("ffprobe", arguments: ["-v", "error"] + arguments + ["-of", "csv=p=0", file],
                                                 timeout: .seconds(120))
        guard result.succeeded else { throw HarnessError("ffprobe cannot read \(file): \(result.stderr)") }
        return result.stdout.split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
            .filter { !$0.allSatisfy(\.isEmpty) }
    }

    /// Every decoded video frame's size, in decoding order of presentation: a stream whose
    /// resolution changed has frames of each size.
    public static func videoFrameSizes(_ file: String) async throws -> [(width: Int, height: Int)] {
        try await csv(file, ["-select_streams", "v:0", "-show_entries", "frame=width,height"]).map { fields in
            guard fields.count >= 2, let width = Int(fields[0]), let height = Int(fields[1]) else {
                throw HarnessError("ffprobe gave a frame without a size: \(fields)")
            }
            return (width, height)
        }
    }

    /// The presentation times (seconds, from the file's start) of every video frame, decoded.
    public static func videoFrameTimes(_ file: String) async throws -> [Double] {
        let frames = try await csv(file, ["-select_streams", "v:0", "-show_entries", "frame=pts_time,best_effort_timestamp_time"])
        let start = try await probe(file, countFrames: false).format.startTime ?? 0
        return frames.compactMap { fields in fields.compactMap { Double($0) }.first.map { $0 - start } }
    }
}
