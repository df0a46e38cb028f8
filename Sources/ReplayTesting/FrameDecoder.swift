import Foundation

/// Decodes video frames to RGB24 with ffmpeg.
public enum FrameDecoder {
    /// The frame shown at `seconds` (from the file's start).
    public static func frame(at seconds: Double, in file: String) async throws -> RGBImage {
        let images = try await decodePPM(file: file, arguments: [
            "-ss", String(format: "%.3f", seconds), "-i", file, "-map", "0:v:0", "-frames:v", "1",
        ])
        guard var image = images.first else { throw HarnessError("no video frame at \(seconds) s in \(file)") }
        image.time = seconds
        return image
    }

    /// The same as ``frame(at:in:)``, blocking the calling thread: for synchronous tests.
    public static func frame(of file: String, at seconds: Double) throws -> RGBImage {
        let result = try ProcessRunner.run("ffmpeg", arguments: ppmArguments([
            "-ss", String(format: "%.3f", seconds), "-i", file, "-map", "0:v:0", "-frames:v", "1",
        ]), timeout: .seconds(120))
        guard result.succeeded else { throw HarnessError("ffmpeg could not decode \(file): \(result.stderr)") }
        guard var image = try parsePPMs([UInt8](result.standardOutput)).first else {
            throw HarnessError("no video frame at \(seconds) s in \(file)")
        }
        image.time = seconds
        return image
    }

    /// Frames number `range` (0-based, in decoding order of presentation).
    public static func frames(_ range: ClosedRange<Int>, in file: String) async throws -> [RGBImage] {
        let images = try await decodePPM(file: file, arguments: [
            "-i", file, "-map", "0:v:0", "-vf", "select=between(n\\,\(range.lowerBound)\\,\(range.upperBound))",
            "-fps_mode", "passthrough",
        ])
        guard images.count == range.count else {
            throw HarnessError("asked for frames \(range) of \(file), got \(images.count)")
        }
        return images
    }

    /// Every frame, cropped to `crop` (in the video's pixels), in order. Keep the crop small: all
    /// frames are held in memory.
    public static func allFrames(in file: String, crop: PixelRect) async throws -> [RGBImage] {
        let result = try await ProcessRunner.run("ffmpeg", arguments: [
            "-nostdin", "-v", "error", "-i", file, "-map", "0:v:0",
            "-vf", "crop=\(crop.width):\(crop.height):\(crop.x):\(crop.y)", "-fps_mode", "passthrough",
            "-f", "rawvideo", "-pix_fmt", "rgb24", "-",
        ], timeout: .seconds(180))
        guard result.succeeded else { throw HarnessError("ffmpeg could not decode \(file): \(result.stderr)") }
        let frameBytes = crop.width * crop.height * 3
        let data = [UInt8](result.standardOutput)
        return stride(from: 0, to: data.count - frameBytes + 1, by: frameBytes).map {
            RGBImage(width: crop.width, height: crop.height, pixels: Array(data[$0..<($0 + frameBytes)]))
        }
    }

    /// Every frame scaled to `width` × `height` whatever its size (a size change mid-stream
    /// reconfigures the scale), in order. All frames are held in memory: keep the size small.
    public static func allFrames(in file: String, scaledTo width: Int, _ height: Int) async throws -> [RGBImage] {
        let result = try await ProcessRunner.run("ffmpeg", arguments: [
            "-nostdin", "-v", "error", "-i", file, "-map", "0:v:0", "-vf", "scale=\(width):\(height)", "-fps_mode", "passthrough",
            "-f", "rawvideo", "-pix_fmt", "rgb24", "-",
        ], timeout: .seconds(180))
        guard result.succeeded else { throw HarnessError("ffmpeg could not decode \(file): \(result.stderr)") }
        let frameBytes = width * height * 3
        let data = [UInt8](result.standardOutput)
        return stride(from: 0, to: data.count - frameBytes + 1, by: frameBytes).map {
            RGBImage(width: width, height: height, pixels: Array(data[$0..<($0 + frameBytes)]))
        }
    }

    private static func decodePPM(file: String, arguments: [String]) async throws -> [RGBImage] {
        let result = try await ProcessRunner.run("ffmpeg", arguments: ppmArguments(arguments), timeout: .seconds(120))
        guard result.succeeded else { throw HarnessError("ffmpeg could not decode \(file): \(result.stderr)") }
        return try parsePPMs([UInt8](result.standardOutput))
    }

    private static func ppmArguments(_ arguments: [String]) -> [String] {
        ["-nostdin", "-v", "error"] + arguments + ["-c:v", "ppm", "-f", "image2pipe", "-"]
    }

    /// Splits concatenated binary PPM (P6, maxval 255) pictures.
    static func parsePPMs(_ bytes: [UInt8]) throws -> [RGBImage] {
        var images: [RGBImage] = []
        var i = 0
        func token() throws -> String {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0a || bytes[i] == 0x0d || bytes[i] == 0x09 { i += 1 }
            let start = i
            while i < bytes.count, !(bytes[i] == 0x20 || bytes[i] == 0x0a || bytes[i] == 0x0d || bytes[i] == 0x09) { i += 1 }
            guard i > start else { throw HarnessError("truncated PPM header") }
            return String(decoding: bytes[start..<i], as: UTF8.self)
        }
        while i < bytes.count {
            guard try token() == "P6", let width = Int(try token()), let height = Int(try token()),
                  try token() == "255" else { throw HarnessError("not a P6 PPM from ffmpeg") }
            i += 1  // one whitespace after maxval
            let count = width * height * 3
            guard i + count <= bytes.count else { throw HarnessError("truncated PPM data") }
            images.append(RGBImage(width: width, height: height, pixels: Array(bytes[i..<(i + count)])))
            i += count
        }
        return images
    }
}
