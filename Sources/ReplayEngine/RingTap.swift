package import ReplayMedia
package import ReplayIPC
import Synchronization

/// The writer of a frame ring, replayd's side of in-app capture: each picture the capture makes
/// goes straight from the capture's I420 canvas (video range, the encoder's) into a free slot's NV12
/// in full range (`FullRangeNV12`, the one copy a frame costs), is marked ready and wakes the app; with no slot free (the app holds or
/// has not yet taken every one) the picture is dropped whole and counted in the ring. Sound goes to
/// the ring's audio chunks, tagged app or microphone. Never blocks the capture or audio thread.
///
/// Hand `descriptors` to the app once (`DescriptorPassing`); `close()` when the session ends.
package final class RingTap: FrameTap, AudioTap {
    package let writer: FrameRingWriter
    /// While set (a paused broadcast), nothing goes into the ring.
    private let paused = Atomic<Bool>(false)

    /// A ring for pictures of `width` × `height` (the capture's output size).
    package init(width: Int, height: Int, slotCount: Int = 5, name: String = "openreplaykit-ring") throws(ReplayError) {
        writer = try FrameRingWriter(layout: FrameRingLayout(width: width, height: height, slotCount: slotCount), name: name)
    }

    /// The ring's memory and eventfd, in the order `FrameRingReader` takes them.
    package var descriptors: [Int32] { writer.descriptors }

    package var counters: FrameRingCounters { writer.counters }

    /// Pauses or resumes what goes into the ring (a broadcast's pause: the extension gets nothing meanwhile).
    package func setPaused(_ on: Bool) { paused.store(on, ordering: .relaxed) }

    package func receive(_ picture: VideoFrame, tick: Int64, time: Int64) {
        guard !paused.load(ordering: .relaxed) else { return }
        let layout = writer.layout
        // The capture's size is fixed for a session, so the ring is made to it; no free slot is counted by beginFrame.
        guard picture.width == layout.width, picture.height == layout.height, let slot = writer.beginFrame() else { return }
        FullRangeNV12.copy(picture, toLuma: slot.luma, stride: slot.lumaStride, chroma: slot.chroma, stride: slot.chromaStride)
        writer.publish(slot, time: time, tick: tick)
    }

    package func receive(audio samples: UnsafeBufferPointer<Float>, from source: TappedAudioSource, time: Int64) {
        guard !paused.load(ordering: .relaxed) else { return }
        writer.writeAudio(samples, kind: source == .microphone ? .microphone : .app, time: time)
    }

    /// The session is over: the app delivers what is ready and its capture ends.
    package func close() {
        writer.close()
    }
}

/// The capture's canvas (I420, BT.601 video range: libyuv `ARGBToI420`, what the encoder takes) to
/// NV12 in full range, what ReplayKit's '420f' pictures carry: the same BT.601 matrix, levels
/// stretched while the planes are copied and the chroma interleaved, Y' = (Y - 16) × 255 / 219 and
/// C' = (C - 128) × 255 / 224 + 128, rounded and clamped to 0…255. Black is Y 0, white Y 255, the
/// greys' chroma 128; pure green (BT.601 full range) Y 149, Cb 44, Cr 21.
///
/// Two bytes a look-up (128 KB tables): two luma pixels, or a Cb and a Cr into their NV12 pair. A
/// 1080p picture, buffers warm, on the quiet 2-core machine (2026-11-24): 0.8–0.9 ms in a release
/// build (a byte at a time 0.85 ms; libyuv's `ARGBToJ420` and `MergeUVPlane`, from a BGRA picture
/// the tap is not given, 0.55 ms; the video-range `I420ToNV12` this replaced 0.14 ms); in a debug
/// build (the tests') 4 ms, where a byte at a time took 32. `replay-ring bench`: see BENCHMARKS.
package enum FullRangeNV12 {
    /// Video-range luma (16…235) to full range.
    package static let luma: [UInt8] = table { (Double($0) - 16) * 255 / 219 }
    /// Video-range chroma (16…240 about 128) to full range.
    package static let chroma: [UInt8] = table { (Double($0) - 128) * 255 / 224 + 128 }
    /// Two bytes at once, as a UInt16 in memory order: two luma pixels; a Cb (low byte) and a Cr (high byte).
    private static let lumaPairs: [UInt16] = (0..<65_536).map { UInt16(luma[$0 & 255]) | UInt16(luma[$0 >> 8]) << 8 }
    private static let chromaPairs: [UInt16] = (0..<65_536).map { UInt16(chroma[$0 & 255]) | UInt16(chroma[$0 >> 8]) << 8 }

    private static func table(_ level: (Int) -> Double) -> [UInt8] {
        (0..<256).map { UInt8(max(0, min(255, level($0).rounded()))) }
    }

    /// Copies `picture` (its whole size, even as the capture makes it; planes and rows 2-byte aligned,
    /// as libav's and the ring's are) into NV12 planes of the same size.
    package static func copy(_ picture: VideoFrame, toLuma lumaPlane: UnsafeMutablePointer<UInt8>, stride lumaStride: Int,
                             chroma chromaPlane: UnsafeMutablePointer<UInt8>, stride chromaStride: Int) {
        precondition(picture.width % 2 == 0 && picture.height % 2 == 0, "an even picture")
        let (y, u, v) = picture.planes
        let (ys, us, vs) = picture.strides
        let pairsPerRow = picture.width / 2
        // Typed pointers and while loops: a debug build (the tests') stays within a few milliseconds.
        lumaPairs.withUnsafeBufferPointer { pairs in
            let table = pairs.baseAddress!
            for row in 0..<picture.height {
                var source = UnsafeRawPointer(y + row * ys).assumingMemoryBound(to: UInt16.self)
                var target = UnsafeMutableRawPointer(lumaPlane + row * lumaStride).assumingMemoryBound(to: UInt16.self)
                let end = source + pairsPerRow
                while source < end {
                    target.pointee = table[Int(source.pointee)]
                    source += 1
                    target += 1
                }
            }
        }
        chromaPairs.withUnsafeBufferPointer { pairs in
            let table = pairs.baseAddress!
            for row in 0..<picture.height / 2 {
                var cb = UnsafePointer(u + row * us), cr = UnsafePointer(v + row * vs)
                var target = UnsafeMutableRawPointer(chromaPlane + row * chromaStride).assumingMemoryBound(to: UInt16.self)
                let end = cb + pairsPerRow
                while cb < end {
                    target.pointee = table[Int(cb.pointee) | Int(cr.pointee) << 8]
                    cb += 1
                    cr += 1
                    target += 1
                }
            }
        }
    }
}
