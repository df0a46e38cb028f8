import Foundation
import NIOCore

/// The tags of an FLV file (what `ffmpeg -f flv` writes): the test's source of real H.264 and AAC
/// packets for the RTMP client.
struct FLVFileTag {
    /// 8 audio, 9 video, 18 script data.
    var type: UInt8
    /// Milliseconds.
    var timestamp: UInt32
    var body: ByteBuffer
}

enum FLVFile {
    static func tags(of url: URL) throws -> [FLVFileTag] {
        var buffer = ByteBuffer(bytes: [UInt8](try Data(contentsOf: url)))
        guard buffer.readString(length: 3) == "FLV", buffer.readableBytes >= 6 else { throw TestFailure("\(url.path) is not an FLV file") }
        buffer.moveReaderIndex(forwardBy: 2)
        let headerSize = Int(buffer.readInteger(as: UInt32.self)!)
        buffer.moveReaderIndex(to: headerSize + 4)
        var tags: [FLVFileTag] = []
        while buffer.readableBytes >= 11 {
            let type = buffer.readInteger(as: UInt8.self)! & 0x1F
            let size = Int(readUInt24(&buffer))
            let low = readUInt24(&buffer)
            let high = UInt32(buffer.readInteger(as: UInt8.self)!)
            buffer.moveReaderIndex(forwardBy: 3)
            guard let body = buffer.readSlice(length: size) else { break }
            buffer.moveReaderIndex(forwardBy: min(4, buffer.readableBytes))
            tags.append(FLVFileTag(type: type, timestamp: high << 24 | low, body: body))
        }
        return tags
    }

    private static func readUInt24(_ buffer: inout ByteBuffer) -> UInt32 {
        let bytes = buffer.readBytes(length: 3)!
        return UInt32(bytes[0]) << 16 | UInt32(bytes[1]) << 8 | UInt32(bytes[2])
    }

    /// A real H.264 + AAC recording, `seconds` long, 320×240 (or `size`) at 30 fps with a keyframe every second.
    /// The tags of one publish whose picture changes size: a recording of each `(seconds, size)`
    /// made with `make`, one after the other, the later ones' times moved on by the earlier ones'
    /// length (each brings its own sequence headers, as an encoder that starts again does).
    static func resizingTags(_ parts: [(seconds: Int, size: String)], directory: URL) throws -> [FLVFileTag] {
        var tags: [FLVFileTag] = []
        var offset: UInt32 = 0
        for part in parts {
            tags += try Self.tags(of: try make(seconds: part.seconds, directory: directory, size: part.size))
                .map { FLVFileTag(type: $0.type, timestamp: $0.timestamp + offset, body: $0.body) }
            offset += UInt32(part.seconds * 1000)
        }
        return tags
    }

    static func make(seconds: Int, directory: URL, size: String = "320x240") throws -> URL {
        let file = directory.appendingPathComponent("source-\(UUID().uuidString).flv")
        let result = try Command.run("ffmpeg", ["-hide_banner", "-loglevel", "error", "-nostdin",
                                                "-f", "lavfi", "-i", "testsrc=size=\(size):rate=30", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                                                "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-g", "30", "-bf", "0",
                                                "-c:a", "aac", "-b:a", "64k", "-t", "\(seconds)", "-f", "flv", file.path])
        guard result.status == 0 else { throw TestFailure("ffmpeg could not make the FLV: \(result.stderr)") }
        return file
    }
}
