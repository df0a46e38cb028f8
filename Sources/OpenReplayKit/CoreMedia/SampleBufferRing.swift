package import ReplayIPC
#if canImport(Glibc)
import Glibc
#endif

/// The app's end of a frame ring, as sample buffers: maps the ring replayd handed over (its memory
/// and its eventfd, received once over the control socket with `DescriptorPassing`), waits on a
/// thread of its own, and calls the handler with a `CMSampleBuffer` for each picture (in place in its
/// slot, no copy) and each chunk of sound, in time order, until replayd closes the ring or `stop()`.
/// A slot goes back to replayd when the last reference to its buffer goes (usually as the handler
/// returns); an app that keeps buffers or takes long holds slots, and replayd drops new pictures,
/// counted in `counters`, rather than wait for it. Pictures take the size the screen has as they are
/// taken (a resolution change mid-capture is followed: `CVPixelBufferGetWidth`/`Height` say it); when
/// they outgrow the ring, replayd hands over a larger one and delivery goes on there.
package final class SampleBufferRing: Sendable {
    private let reader: FrameRingReader

    /// Takes ownership of both descriptors (closed with the ring, or now if it cannot be read).
    package init(memory: Int32, signal: Int32) throws(ReplayError) {
        reader = try FrameRingReader(memory: memory, signal: signal)
    }

    /// The largest picture the first ring holds (each picture says its own size).
    package var width: Int { reader.layout.width }
    package var height: Int { reader.layout.height }
    /// The ring's counters (of every ring read, when it grew): pictures written and dropped, audio chunks written and dropped.
    package var counters: FrameRingCounters { reader.counters }

    /// Starts delivering on the thread `name`; `ended` is called there once nothing more will come.
    package func start(named name: String = "openreplaykit-capture",
                       handler: @escaping @Sendable (CMSampleBuffer, RPSampleBufferType) -> Void,
                       ended: @escaping @Sendable () -> Void = {}) {
        reader.start(named: name, handler: { delivery in
            let buffer = CMSampleBuffer(delivery)
            handler(buffer, buffer.sampleBufferType)
        }, failed: { Self.report($0) }, ended: ended)
    }

    /// Delivers on the calling thread (which this blocks) until the ring closes or `stop()`.
    package func run(handler: (CMSampleBuffer, RPSampleBufferType) -> Void) {
        reader.run({ delivery in
            let buffer = CMSampleBuffer(delivery)
            handler(buffer, buffer.sampleBufferType)
        }, failed: { Self.report($0) })
    }

    /// Why delivery ended early, on standard error (the SDK has no logger of the app's).
    private static func report(_ error: ReplayError) {
        let line = "openreplaykit: the capture ends: \(error.message)\n"
        let bytes = Array(line.utf8)
        bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
    }

    /// Ends delivery after the buffer in hand; safe from any thread, the handler's included.
    package func stop() {
        reader.stop()
    }
}
