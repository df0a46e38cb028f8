internal import CFFmpeg
internal import CReplayShim

/// An error from FFmpeg: what we were doing, and FFmpeg's own code and text.
public struct FFmpegError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let code: Int32
    public let text: String

    init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
        var buffer = [CChar](repeating: 0, count: 256)
        ork_av_strerror(code, &buffer, buffer.count)
        self.text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    init(_ operation: String, message: String) {
        self.operation = operation
        self.code = 0
        self.text = message
    }

    public var description: String { "\(operation) failed: \(text) (\(code))" }
}

/// Checks an FFmpeg return code.
@discardableResult
func check(_ operation: @autoclosure () -> String, _ code: Int32) throws(FFmpegError) -> Int32 {
    guard code >= 0 else { throw FFmpegError(operation(), code: code) }
    return code
}
