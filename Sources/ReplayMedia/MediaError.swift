import CFFmpeg
import CReplayShim
#if canImport(Glibc)
import Glibc
#endif

/// A failure of the media pipeline, with what a person can do about it.
public struct MediaError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case diskFull, writeFailed, encoderUnavailable, encoderFailed, outputExists, outputNotWritable
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// An FFmpeg return code (`AVERROR(e)` and friends) as a Swift value.
package struct AVErrorCode: RawRepresentable, Sendable, Equatable, CustomStringConvertible {
    package var rawValue: Int32
    package init(rawValue: Int32) { self.rawValue = rawValue }

    package static let again = AVErrorCode(rawValue: ork_averror(EAGAIN))
    package static let endOfFile = AVErrorCode(rawValue: ork_averror_eof())
    package static let noSpace = AVErrorCode(rawValue: ork_averror(ENOSPC))

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
