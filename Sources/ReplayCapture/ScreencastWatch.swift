import CPipeWire
package import Logging
import Synchronization

/// Whether anyone reads one of the compositor's screen-cast streams now (replayd, a browser sharing
/// the screen, OBS): PipeWire's graph, watched on PipeWire's own thread. It lets `isCaptured` be
/// true on Wayland for capture that does not go through replayd. Nil where PipeWire does not run
/// (an X11 desktop without it): then only replayd's own sessions count.
package final class ScreencastWatch: Sendable {
    /// True when the first consumer appears, false when the last one goes; the first value at once.
    package let changes: AsyncStream<Bool>
    /// The C watch; closed once, in `close()` or `deinit`.
    private let watch: Mutex<OpaquePointer?>
    private let box: Unmanaged<Box>

    private final class Box: Sendable {
        let continuation: AsyncStream<Bool>.Continuation
        init(_ continuation: AsyncStream<Bool>.Continuation) { self.continuation = continuation }
    }

    package init?(logger: Logger) {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(8))
        let box = Unmanaged.passRetained(Box(continuation))
        var message = [CChar](repeating: 0, count: 256)
        let changed: ork_pw_watch_changed = { context, captured in
            Unmanaged<Box>.fromOpaque(context!).takeUnretainedValue().continuation.yield(captured != 0)
        }
        guard let pointer = ork_pw_watch_open(changed, box.toOpaque(), &message, message.count) else {
            logger.debug("no screen-cast watch: \(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
            box.release()
            return nil
        }
        self.changes = stream
        self.watch = Mutex(pointer)
        self.box = box
    }

    /// Stops watching and ends `changes`. Idempotent.
    package func close() {
        watch.withLock { pointer in
            ork_pw_watch_close(pointer)
            pointer = nil
        }
        box.takeUnretainedValue().continuation.finish()
    }

    deinit {
        close()
        box.release()
    }
}
