import Foundation
import NIOCore

/// Real bytes captured on loopback between ffmpeg 5.1 (publishing testsrc 160x120 + sine, libx264 + aac,
/// 1 s, to `rtmp://…/live/testkey`) and nginx-rtmp, through a recording TCP proxy.
enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// ffmpeg → server: C0 C1, C2, then the chunk stream.
    static let ffmpegPublish: ByteBuffer = load("ffmpeg-publish.c2s.bin")
    /// nginx-rtmp → ffmpeg: S0 S1 S2, then the chunk stream.
    static let nginxAnswer: ByteBuffer = load("nginx-rtmp.s2c.bin")

    static func load(_ name: String) -> ByteBuffer {
        let data = try! Data(contentsOf: directory.appendingPathComponent(name))
        return ByteBuffer(bytes: data)
    }

    /// The publish capture's chunk stream (after C0, C1 and C2).
    static var ffmpegChunkStream: ByteBuffer {
        var b = ffmpegPublish
        b.moveReaderIndex(forwardBy: 1 + 2 * 1536)
        return b
    }
}

/// A small deterministic generator (SplitMix64) for fuzzing with a fixed seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
