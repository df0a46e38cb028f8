import Foundation
import ReplayIPC
import Synchronization

/// The ring of the app's running in-app capture (one per process, as the recorder is).
private let activeCapture = Mutex<SampleBufferRing?>(nil)

/// One sample of the app's in-app capture, for the `AsyncSequence` form.
public struct RPCaptureSample: Sendable {
    public let sampleBuffer: CMSampleBuffer
    public let bufferType: RPSampleBufferType
}

extension RPScreenRecorder {
    // MARK: in-app capture

    /// Whether the app's in-app capture runs.
    public var isCapturing: Bool { activeCapture.withLock { $0 != nil } }

    /// Starts in-app capture: the app's own pictures (NV12, `kCVPixelFormatType_420YpCbCr8BiPlanarFullRange`),
    /// its own sound (`.audioApp`) and the microphone when `isMicrophoneEnabled` (`.audioMic`) come to
    /// `handler`, on a thread of the library's, in time order, on the session clock. Pictures arrive
    /// in place in shared memory (no copy); a handler that keeps buffers or takes long makes replayd
    /// drop whole pictures rather than wait. The first start asks the person, as `startRecording`.
    public func startCapture(handler: @escaping @Sendable (CMSampleBuffer, RPSampleBufferType) -> Void) async throws {
        try await startCapture(handler: handler, ended: {})
    }

    /// Starts in-app capture; `ended` is called on the delivery thread once the last sample went out.
    private func startCapture(handler: @escaping @Sendable (CMSampleBuffer, RPSampleBufferType) -> Void,
                              ended: @escaping @Sendable () -> Void) async throws {
        guard let display else { throw RPRecordingError(.failedToStart, "this app has no X display (DISPLAY is not set): there is nothing of it to capture.") }
        if isCapturing { throw RPRecordingError(.attemptToStartInRecordingState, "this app is already capturing: stop it first.") }
        let answer = try await link.request(AppStartCaptureRequest(options: AppSessionOptions(display: display, microphone: isMicrophoneEnabled)),
                                            starting: true)
        let ring: SampleBufferRing
        do throws(ReplayError) {
            let (memory, signal) = try await RingHandover.receiveOffThePool(from: answer.ringSocket)
            ring = try SampleBufferRing(memory: memory, signal: signal)
        } catch {
            _ = try? await link.request(AppStopCaptureRequest())
            throw RPRecordingError(.failedToStartCaptureStack, "cannot receive the capture's frame ring from replayd: \(error.message)")
        }
        activeCapture.withLock { $0 = ring }
        ring.start(handler: handler, ended: {
            activeCapture.withLock { if $0 === ring { $0 = nil } }
            ended()
        })
    }

    /// iOS's form: `captureHandler` gets each sample (its error argument is always nil: an error that
    /// ends the capture goes to the delegate, as for a recording), `completionHandler` the start's outcome.
    public func startCapture(handler captureHandler: ((CMSampleBuffer, RPSampleBufferType, (any Error)?) -> Void)?,
                             completionHandler: (((any Error)?) -> Void)? = nil) {
        let captureHandler = HandedOver(captureHandler)
        let completionHandler = HandedOver(completionHandler)
        Task {
            do {
                try await startCapture { buffer, type in captureHandler.value?(buffer, type, nil) }
                completionHandler.value?(nil)
            } catch {
                completionHandler.value?(error)
            }
        }
    }

    /// The `AsyncSequence` form: starts in-app capture and gives its samples as a stream, which ends
    /// when the capture stops. A consumer that falls behind gets the newest samples (the older ones
    /// are let go, and their pictures' slots with them).
    public func startCapture(bufferingNewest limit: Int = 8) async throws -> AsyncStream<RPCaptureSample> {
        let (stream, continuation) = AsyncStream<RPCaptureSample>.makeStream(bufferingPolicy: .bufferingNewest(limit))
        do {
            try await startCapture(handler: { buffer, type in
                continuation.yield(RPCaptureSample(sampleBuffer: buffer, bufferType: type))
            }, ended: { continuation.finish() })
        } catch {
            continuation.finish()
            throw error
        }
        return stream
    }

    /// Stops in-app capture; the handler gets no sample after this returns.
    public func stopCapture() async throws {
        guard let ring = activeCapture.withLock({ $0 }) else {
            throw RPRecordingError(.attemptToStopNonRecording, "this app is not capturing: call startCapture first.")
        }
        ring.stop()
        activeCapture.withLock { if $0 === ring { $0 = nil } }
        _ = try await link.request(AppStopCaptureRequest())
    }

    public func stopCapture(handler: (((any Error)?) -> Void)? = nil) {
        let handler = HandedOver(handler)
        Task {
            do {
                try await stopCapture()
                handler.value?(nil)
            } catch {
                handler.value?(error)
            }
        }
    }
}
