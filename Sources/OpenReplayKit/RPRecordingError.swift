public import Foundation
import ReplayIPC

/// ReplayKit's error domain: `NSError.domain` of every error this library gives.
public let RPRecordingErrorDomain = "com.apple.ReplayKit.RPRecordingErrorDomain"

/// ReplayKit's error codes, with iOS's raw values (`NSError.code`).
public enum RPRecordingErrorCode: Int, Sendable, CaseIterable {
    case unknown = -5800
    case userDeclined = -5801
    case disabled = -5802
    case failedToStart = -5803
    case failed = -5804
    case insufficientStorage = -5805
    case interrupted = -5806
    case contentResize = -5807
    case broadcastInvalidSession = -5808
    case systemDormancy = -5809
    case entitlements = -5810
    case activePhoneCall = -5811
    case failedToSave = -5812
    case carPlay = -5813
    case failedApplicationConnectionInvalid = -5814
    case failedApplicationConnectionInterrupted = -5815
    case failedNoMatchingApplicationContext = -5816
    case failedMediaServicesFailure = -5817
    case videoMixingFailure = -5818
    case broadcastSetupFailed = -5819
    case failedToObtainURL = -5820
    case failedIncorrectTimeStamps = -5821
    case failedToProcessFirstSample = -5822
    case failedAssetWriterFailedToSave = -5823
    case failedNoAssetWriter = -5824
    case failedAssetWriterInWrongState = -5825
    case failedAssetWriterExportFailed = -5826
    case failedToRemoveFile = -5827
    case failedAssetWriterExportCanceled = -5828
    case attemptToStopNonRecording = -5829
    case attemptToStartInRecordingState = -5830
    case photoFailure = -5831
    case recordingInvalidSession = -5832
    case failedToStartCaptureStack = -5833
    case invalidParameter = -5834
    case filePermissions = -5835
    case exportClipToURLInProgress = -5836
    case codecNotSupported = -5837
}

/// An error of this library: a ReplayKit code and what happened, in words. It bridges to `NSError`
/// with `RPRecordingErrorDomain`, `code` = the code's raw value, and the words as
/// `localizedDescription`:
///
/// ```swift
/// let error = error as NSError   // error.domain == RPRecordingErrorDomain, error.code == -5801
/// ```
public struct RPRecordingError: Error, CustomNSError, LocalizedError, CustomStringConvertible, Sendable, Equatable {
    public var code: RPRecordingErrorCode
    /// What happened and what to do (replayd's words, or the library's).
    public var message: String

    public init(_ code: RPRecordingErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public static var errorDomain: String { RPRecordingErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: message] }
    public var errorDescription: String? { message }
    public var description: String { "\(code) (\(code.rawValue)): \(message)" }
}

extension RPRecordingError {
    /// replayd's error as ReplayKit's: the closest code, replayd's words.
    init(_ error: ReplayError, starting: Bool = false) {
        let code: RPRecordingErrorCode = switch error.code {
        case .userDeclined: .userDeclined
        case .interrupted: .interrupted
        case .invalidParameter, .badRequest, .regionOutsideScreen: .invalidParameter
        case .sessionActive: .attemptToStartInRecordingState
        case .noSession: starting ? .failedToStart : .attemptToStopNonRecording
        case .exportInProgress: .exportClipToURLInProgress
        case .outputNotWritable: .filePermissions
        case .outputExists, .writeFailed: .failedToSave
        case .diskFull: .insufficientStorage
        case .noDisplay, .unknownDisplay, .unavailable, .unavailableOnThisDesktop: .failedToStart
        case .captureFailed, .encoderUnavailable, .unknownEncoder: .failedToStartCaptureStack
        case .noAudioServer: .failedMediaServicesFailure
        case .daemonUnavailable, .protocolMismatch, .permissionDenied: .failedApplicationConnectionInvalid
        case .shuttingDown: .failedApplicationConnectionInterrupted
        case .unknownService: .broadcastSetupFailed
        case .extensionFailed: .failed
        default: .unknown
        }
        self.init(code, error.message)
    }
}
