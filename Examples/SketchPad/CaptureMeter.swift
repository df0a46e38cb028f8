import OpenReplayKit
import Synchronization

/// What SketchPad's in-app capture has received, read as iOS sample-handling code reads it: the
/// handler (on the library's delivery thread) counts pictures and measures each sound buffer's
/// peak; the window reads a snapshot ten times a second.
final class CaptureMeter: Sendable {
    struct Snapshot: Sendable {
        var frames = 0
        var width = 0, height = 0
        /// The loudest sample since the last snapshot, 0...1, of the app's sound and of the microphone.
        var appLevel: Float = 0
        var micLevel: Float = 0
    }

    private let state = Mutex(Snapshot())

    func reset() { state.withLock { $0 = Snapshot() } }

    /// The capture handler's body.
    func add(_ buffer: CMSampleBuffer, _ type: RPSampleBufferType) {
        switch type {
        case .video:
            guard let pixels = CMSampleBufferGetImageBuffer(buffer) else { return }
            let width = CVPixelBufferGetWidth(pixels), height = CVPixelBufferGetHeight(pixels)
            state.withLock { state in
                state.frames += 1
                state.width = width
                state.height = height
            }
        case .audioApp, .audioMic:
            let peak = Self.peak(of: buffer)
            state.withLock { state in
                if type == .audioApp { state.appLevel = max(state.appLevel, peak) } else { state.micLevel = max(state.micLevel, peak) }
            }
        }
    }

    /// The counts and the levels since the last call (the levels start again from 0).
    func take() -> Snapshot {
        state.withLock { state in
            let snapshot = state
            state.appLevel = 0
            state.micLevel = 0
            return snapshot
        }
    }

    /// The largest magnitude of the buffer's 32-bit float samples.
    private static func peak(of buffer: CMSampleBuffer) -> Float {
        guard let data = CMSampleBufferGetDataBuffer(buffer) else { return 0 }
        var length = 0
        var pointer: UnsafeMutablePointer<CChar>?
        guard CMBlockBufferGetDataPointer(data, atOffset: 0, lengthAtOffsetOut: nil, totalLengthOut: &length, dataPointerOut: &pointer) == kCMBlockBufferNoErr,
              let pointer else { return 0 }
        var peak: Float = 0
        pointer.withMemoryRebound(to: Float.self, capacity: length / 4) { floats in
            for index in 0..<(length / 4) { peak = max(peak, abs(floats[index])) }
        }
        return peak
    }
}
