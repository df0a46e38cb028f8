// The C face of OpenReplayKit (libopenreplaykit.so): each function of `openreplaykit.h` exported
// with `@_cdecl` over the Swift library's public API. The header's own types (imported from the
// COpenReplayKit target) are the functions' signatures, so the two cannot drift apart.
//
// Every call returns at once; completions run on a task of the library's (never the caller's
// thread), samples on the ring's delivery thread, as the header says.
public import COpenReplayKit
import Foundation
import OpenReplayKit
import Synchronization

/// A C callback with its `user_data`, carried to a thread of the library's.
///
/// `@unchecked Sendable`: the function pointer is immutable code; `user_data` is the caller's, and
/// the header tells the caller that it is handed back on the library's threads (keeping it valid
/// and thread-safe there is the caller's contract, as with every C callback API).
struct CCompletion: @unchecked Sendable {
    let function: ork_completion_fn?
    let userData: UnsafeMutableRawPointer?

    /// Calls it with 0 (nil) or the error's ReplayKit code and words.
    func callAsFunction(_ error: (any Error)?) {
        guard let function else { return }
        guard let error else { return function(0, nil, userData) }
        let (code, message) = CCompletion.codeAndMessage(error)
        message.withCString { function(code, $0, userData) }
    }

    static func codeAndMessage(_ error: any Error) -> (Int32, String) {
        if let error = error as? RPRecordingError { return (Int32(error.code.rawValue), error.message) }
        let error = error as NSError
        return (Int32(truncatingIfNeeded: error.domain == RPRecordingErrorDomain ? error.code : RPRecordingErrorCode.unknown.rawValue),
                error.localizedDescription)
    }
}

/// A sample callback with its `user_data` (`@unchecked Sendable` as `CCompletion`).
struct CSampleHandler: @unchecked Sendable {
    let function: ork_sample_fn
    let userData: UnsafeMutableRawPointer?

    /// Describes the buffer in an `ork_sample` on the stack and calls the function; the pointers
    /// are valid while the buffer lives, which is past the call.
    func callAsFunction(_ buffer: CMSampleBuffer, _ type: RPSampleBufferType) {
        var sample = ork_sample()
        let time = CMSampleBufferGetPresentationTimeStamp(buffer)
        sample.pts_ns = time.timescale == 1_000_000_000 ? time.value : Int64(time.seconds * 1e9)
        sample.pts_seconds = time.seconds
        switch type {
        case .video:
            guard let pixels = CMSampleBufferGetImageBuffer(buffer) else { return }
            CVPixelBufferLockBaseAddress(pixels, .readOnly)
            defer { CVPixelBufferUnlockBaseAddress(pixels, .readOnly) }
            sample.type = ORK_SAMPLE_VIDEO
            sample.width = Int32(CVPixelBufferGetWidth(pixels))
            sample.height = Int32(CVPixelBufferGetHeight(pixels))
            sample.planes = (CVPixelBufferGetBaseAddressOfPlane(pixels, 0).map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) },
                             CVPixelBufferGetBaseAddressOfPlane(pixels, 1).map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) })
            sample.strides = (Int32(CVPixelBufferGetBytesPerRowOfPlane(pixels, 0)), Int32(CVPixelBufferGetBytesPerRowOfPlane(pixels, 1)))
            function(&sample, userData)
        case .audioApp, .audioMic:
            guard let block = CMSampleBufferGetDataBuffer(buffer),
                  let format = CMSampleBufferGetFormatDescription(buffer),
                  let description = CMAudioFormatDescriptionGetStreamBasicDescription(format)?.pointee else { return }
            var bytes: UnsafeMutablePointer<CChar>?
            guard CMBlockBufferGetDataPointer(block, atOffset: 0, lengthAtOffsetOut: nil, totalLengthOut: nil,
                                              dataPointerOut: &bytes) == kCMBlockBufferNoErr else { return }
            sample.type = type == .audioMic ? ORK_SAMPLE_AUDIO_MIC : ORK_SAMPLE_AUDIO_APP
            sample.pcm = bytes.map { UnsafeRawPointer($0).assumingMemoryBound(to: Float.self) }
            sample.frames = Int32(CMSampleBufferGetNumSamples(buffer))
            sample.channels = Int32(description.mChannelsPerFrame)
            sample.sample_rate = Int32(description.mSampleRate)
            withExtendedLifetime(block) { function(&sample, userData) }
        }
    }
}

/// The delegate that forwards the system's end of a recording to `ork_set_recording_stopped_callback`'s function.
final class StoppedCallbackDelegate: RPScreenRecorderDelegate, Sendable {
    let callback: CCompletion

    init(_ callback: CCompletion) {
        self.callback = callback
    }

    func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWith previewViewController: RPPreviewViewController?,
                        error: (any Error)?) {
        callback(error ?? RPRecordingError(.unknown, "the system ended the recording"))
    }
}

/// The delegate that forwards the end of a broadcast the app did not finish to `ork_set_broadcast_ended_callback`'s function.
final class BroadcastEndedDelegate: RPBroadcastControllerDelegate, Sendable {
    let callback: CCompletion

    init(_ callback: CCompletion) {
        self.callback = callback
    }

    func broadcastController(_ broadcastController: RPBroadcastController, didFinishWithError error: (any Error)?) {
        callback(error ?? RPRecordingError(.unknown, "the system ended the broadcast"))
    }
}

/// What the C API keeps between calls: the delegate (the recorder holds it weakly) and the
/// `isCaptured` watchers, each a task over `RPScreen.main.capturedChanges` that calls its function
/// only while its token is still here.
private struct CAPIState {
    var delegate: StoppedCallbackDelegate?
    /// The app's broadcast (one per process) and the delegate that forwards its end.
    var broadcast: RPBroadcastController?
    var broadcastDelegate: BroadcastEndedDelegate?
    var nextWatchToken: Int64 = 1
    var watchers: [Int64: Task<Void, Never>] = [:]
}

private let capiState = Mutex(CAPIState())

private var recorder: RPScreenRecorder { RPScreenRecorder.shared() }

/// A C string as Swift's (nil for NULL).
private func string(_ pointer: UnsafePointer<CChar>?) -> String? {
    pointer.map { String(cString: $0) }
}

// MARK: errors

/// C strings, one per code: `ork_error_name` hands out pointers into them.
///
/// `nonisolated(unsafe)`: written once by its initializer (Swift runs a global's initializer once,
/// thread-safely), then only read; the strings are never written or freed.
nonisolated(unsafe) private let errorNames: [Int32: UnsafePointer<CChar>] = {
    var names: [Int32: UnsafePointer<CChar>] = [0: UnsafePointer(strdup("ok")!)]
    for code in RPRecordingErrorCode.allCases { names[Int32(code.rawValue)] = UnsafePointer(strdup("\(code)")!) }
    return names
}()

@_cdecl("ork_error_name")
public func ork_error_name(_ code: Int32) -> UnsafePointer<CChar> {
    errorNames[code] ?? errorNames[Int32(RPRecordingErrorCode.unknown.rawValue)]!
}

// MARK: the recorder

@_cdecl("ork_is_available")
public func ork_is_available() -> Bool { recorder.isAvailable }

@_cdecl("ork_is_recording")
public func ork_is_recording() -> Bool { recorder.isRecording }

@_cdecl("ork_is_microphone_enabled")
public func ork_is_microphone_enabled() -> Bool { recorder.isMicrophoneEnabled }

@_cdecl("ork_set_microphone_enabled")
public func ork_set_microphone_enabled(_ enabled: Bool) { recorder.isMicrophoneEnabled = enabled }

@_cdecl("ork_start_recording")
public func ork_start_recording(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    recorder.startRecording { completion($0) }
}

@_cdecl("ork_stop_recording_to_file")
public func ork_stop_recording_to_file(_ path: UnsafePointer<CChar>?, _ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    guard let path = string(path), !path.isEmpty else {
        Task { completion(RPRecordingError(.failedToObtainURL, "ork_stop_recording_to_file needs a path (it was NULL or empty).")) }
        return
    }
    recorder.stopRecording(withOutput: URL(fileURLWithPath: path)) { completion($0) }
}

@_cdecl("ork_stop_recording_and_preview")
public func ork_stop_recording_and_preview(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    recorder.stopRecording { preview, error in
        preview?.present()
        completion(error)
    }
}

@_cdecl("ork_discard_recording")
public func ork_discard_recording(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    recorder.discardRecording { completion(nil) }
}

@_cdecl("ork_set_recording_stopped_callback")
public func ork_set_recording_stopped_callback(_ callback: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let delegate = callback.map { StoppedCallbackDelegate(CCompletion(function: $0, userData: userData)) }
    capiState.withLock { $0.delegate = delegate }
    recorder.delegate = delegate
}

// MARK: in-app capture

@_cdecl("ork_start_capture")
public func ork_start_capture(_ onSample: ork_sample_fn?, _ sampleUserData: UnsafeMutableRawPointer?,
                              _ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    guard let onSample else {
        Task { completion(RPRecordingError(.invalidParameter, "ork_start_capture needs a sample callback (it was NULL).")) }
        return
    }
    let handler = CSampleHandler(function: onSample, userData: sampleUserData)
    recorder.startCapture(handler: { buffer, type, _ in handler(buffer, type) }, completionHandler: { completion($0) })
}

@_cdecl("ork_stop_capture")
public func ork_stop_capture(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    recorder.stopCapture { completion($0) }
}

@_cdecl("ork_is_capturing")
public func ork_is_capturing() -> Bool { recorder.isCapturing }

// MARK: clip buffering

@_cdecl("ork_start_clip_buffering")
public func ork_start_clip_buffering(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    recorder.startClipBuffering { completion($0) }
}

@_cdecl("ork_stop_clip_buffering")
public func ork_stop_clip_buffering(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    recorder.stopClipBuffering { completion($0) }
}

@_cdecl("ork_export_clip")
public func ork_export_clip(_ path: UnsafePointer<CChar>?, _ seconds: Double, _ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    guard let path = string(path), !path.isEmpty else {
        Task { completion(RPRecordingError(.failedToObtainURL, "ork_export_clip needs a path (it was NULL or empty).")) }
        return
    }
    recorder.exportClip(to: URL(fileURLWithPath: path), duration: seconds) { completion($0) }
}

// MARK: the screen

@_cdecl("ork_screen_is_captured")
public func ork_screen_is_captured() -> Bool { RPScreen.main.isCaptured }

/// An `isCaptured` watcher (`@unchecked Sendable` as `CCompletion`).
private struct CCapturedWatcher: @unchecked Sendable {
    let function: ork_captured_fn
    let userData: UnsafeMutableRawPointer?
}

@_cdecl("ork_watch_captured")
public func ork_watch_captured(_ callback: ork_captured_fn?, _ userData: UnsafeMutableRawPointer?) -> Int64 {
    guard let callback else { return 0 }
    let watcher = CCapturedWatcher(function: callback, userData: userData)
    let changes = RPScreen.main.capturedChanges
    return capiState.withLock { state in
        let token = state.nextWatchToken
        state.nextWatchToken += 1
        state.watchers[token] = Task {
            for await captured in changes {
                guard capiState.withLock({ $0.watchers[token] != nil }) else { break }
                watcher.function(captured, watcher.userData)
            }
        }
        return token
    }
}

@_cdecl("ork_unwatch_captured")
public func ork_unwatch_captured(_ token: Int64) {
    capiState.withLock { $0.watchers.removeValue(forKey: token) }?.cancel()
}

// MARK: content protection

@_cdecl("ork_protect_window")
public func ork_protect_window(_ window: UInt32, _ protect: Bool, _ display: UnsafePointer<CChar>?,
                               _ message: UnsafeMutablePointer<CChar>?, _ messageSize: Int32) -> Int32 {
    do {
        try RPContentProtection.protect(window: window, protected: protect, display: string(display))
        if let message, messageSize > 0 { message[0] = 0 }
        return 0
    } catch {
        let (code, words) = CCompletion.codeAndMessage(error)
        if let message, messageSize > 0 {
            let bytes = Array(words.utf8.prefix(Int(messageSize) - 1))
            for (index, byte) in bytes.enumerated() { message[index] = CChar(bitPattern: byte) }
            message[bytes.count] = 0
        }
        return code
    }
}

@_cdecl("ork_protect_audio")
public func ork_protect_audio() { RPContentProtection.protectAudio() }

// MARK: broadcasting

@_cdecl("ork_start_broadcast")
public func ork_start_broadcast(_ preferredExtension: UnsafePointer<CChar>?, _ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    let preferred = string(preferredExtension)
    Task {
        do {
            let picker = try await RPBroadcastActivityViewController.load(withPreferredExtension: preferred)
            let controller = try await picker.presentAndWait()
            let delegate = capiState.withLock { state in
                state.broadcast = controller
                return state.broadcastDelegate
            }
            controller.delegate = delegate
            try await controller.startBroadcast()
            completion(nil)
        } catch {
            completion(error)
        }
    }
}

/// Runs `body` on the app's broadcast, or fails with `attemptToStopNonRecording` when there is none.
private func withBroadcast(_ completion: CCompletion, _ body: @escaping @Sendable (RPBroadcastController) async throws -> Void) {
    Task {
        guard let controller = capiState.withLock({ $0.broadcast }) else {
            return completion(RPRecordingError(.attemptToStopNonRecording, "this app is not broadcasting: call ork_start_broadcast first."))
        }
        do {
            try await body(controller)
            completion(nil)
        } catch {
            completion(error)
        }
    }
}

@_cdecl("ork_pause_broadcast")
public func ork_pause_broadcast(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    withBroadcast(CCompletion(function: completion, userData: userData)) { try await $0.pauseBroadcast() }
}

@_cdecl("ork_resume_broadcast")
public func ork_resume_broadcast(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    withBroadcast(CCompletion(function: completion, userData: userData)) { try await $0.resumeBroadcast() }
}

@_cdecl("ork_finish_broadcast")
public func ork_finish_broadcast(_ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    withBroadcast(CCompletion(function: completion, userData: userData)) { try await $0.finishBroadcast() }
}

@_cdecl("ork_is_broadcasting")
public func ork_is_broadcasting() -> Bool { capiState.withLock { $0.broadcast }?.isBroadcasting ?? false }

@_cdecl("ork_is_broadcast_paused")
public func ork_is_broadcast_paused() -> Bool { capiState.withLock { $0.broadcast }?.isPaused ?? false }

@_cdecl("ork_broadcast_url")
public func ork_broadcast_url(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32) -> Int32 {
    let url = Array((capiState.withLock { $0.broadcast }?.broadcastURL?.absoluteString ?? "").utf8)
    if let buffer, size > 0 {
        let count = min(url.count, Int(size) - 1)
        for index in 0..<count { buffer[index] = CChar(bitPattern: url[index]) }
        buffer[count] = 0
    }
    return Int32(url.count)
}

@_cdecl("ork_set_broadcast_ended_callback")
public func ork_set_broadcast_ended_callback(_ callback: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let delegate = callback.map { BroadcastEndedDelegate(CCompletion(function: $0, userData: userData)) }
    let controller = capiState.withLock { state in
        state.broadcastDelegate = delegate
        return state.broadcast
    }
    controller?.delegate = delegate
}

@_cdecl("ork_show_system_broadcast_picker")
public func ork_show_system_broadcast_picker(_ preferredExtension: UnsafePointer<CChar>?, _ showsMicrophoneButton: Bool,
                                             _ completion: ork_completion_fn?, _ userData: UnsafeMutableRawPointer?) {
    let completion = CCompletion(function: completion, userData: userData)
    let picker = RPSystemBroadcastPickerView()
    picker.preferredExtension = string(preferredExtension)
    picker.showsMicrophoneButton = showsMicrophoneButton
    picker.showPicker { completion($0) }
}
