package import ReplayMedia
package import ReplayIPC
import CYUV
import Synchronization

/// The writer of a frame ring, replayd's side of in-app capture: each picture the capture makes
/// goes straight from the capture's I420 canvas into a free slot's NV12 (libyuv `I420ToNV12`, the
/// one copy a frame costs), is marked ready and wakes the app; with no slot free (the app holds or
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
        let (y, u, v) = picture.planes
        let (ys, us, vs) = picture.strides
        _ = I420ToNV12(y, Int32(ys), u, Int32(us), v, Int32(vs),
                       slot.luma, Int32(slot.lumaStride), slot.chroma, Int32(slot.chromaStride),
                       Int32(layout.width), Int32(layout.height))
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
