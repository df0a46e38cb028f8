import CFFmpegShim
#if canImport(Glibc)
import Glibc
#endif

/// An FFmpeg return code (`AVERROR(e)` and friends) as a Swift value.
package struct AVErrorCode: RawRepresentable, Sendable, Equatable, CustomStringConvertible {
    package var rawValue: Int32
    package init(rawValue: Int32) { self.rawValue = rawValue }

    package static let again = AVErrorCode(rawValue: ork_averror(EAGAIN))
    package static let endOfFile = AVErrorCode(rawValue: ork_averror_eof())

    /// FFmpeg's own text for the code.
    package var description: String {
        var buffer = [CChar](repeating: 0, count: 256)
        ork_av_strerror(rawValue, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True for the errors that mean "the disk is full" (ENOSPC, and EFBIG/EDQUOT quotas).
    package var isDiskFull: Bool {
        [ENOSPC, EFBIG, EDQUOT].contains { rawValue == ork_averror($0) }
    }
}

/// A failed FFmpeg call: what we were doing, and FFmpeg's own code and text. The one FFmpeg error
/// of the recorder and the broadcast service; each turns it into its own words for a person.
public struct FFmpegError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let code: Int32
    public let text: String

    package init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
        self.text = AVErrorCode(rawValue: code).description
    }

    package init(_ operation: String, message: String) {
        self.operation = operation
        self.code = 0
        self.text = message
    }

    package var avErrorCode: AVErrorCode { AVErrorCode(rawValue: code) }

    public var description: String { "\(operation) failed: \(text) (\(code))" }
}

/// Checks an FFmpeg return code: the code when it is not an error, else throws.
@discardableResult
package func check(_ operation: @autoclosure () -> String, _ code: Int32) throws(FFmpegError) -> Int32 {
    guard code >= 0 else { throw FFmpegError(operation(), code: code) }
    return code
}

/// `AV_NOPTS_VALUE`: a packet or frame without a timestamp (INT64_MIN in FFmpeg 5.1; a macro of a
/// cast, which Swift does not import).
package let noTimestamp = Int64.min
