public import Logging

/// What may be written to a log: control characters escaped (a value cannot forge a line), and stream
/// keys redacted wherever they appear (in a path, a URL, an error).
public enum LogText {
    /// `value` with control characters as `\n`, `\r`, `\t`, `\0` or `\u{XX}`, backslashes doubled, and every
    /// stream key (`live_` and 32 hex digits) cut to `live_…`.
    public static func sanitize(_ value: String) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for scalar in redactingKeys(value).unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\0": out += "\\0"
            case "\\": out += "\\\\"
            default:
                if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
                    || scalar == "\u{2028}" || scalar == "\u{2029}" {
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    static func redactingKeys(_ value: String) -> String {
        guard value.contains("live_") else { return value }
        return value.replacing(/live_[0-9a-fA-F]{8,}/) { _ in "live_…" }
    }

    static func sanitize(_ value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .string(let s): .string(sanitize(s))
        case .stringConvertible(let s): .string(sanitize(s.description))
        case .array(let a): .array(a.map(sanitize))
        case .dictionary(let d): .dictionary(d.mapValues(sanitize))
        }
    }
}

/// A log handler that passes every message and metadata value through `LogText.sanitize` before the
/// wrapped handler writes it.
public struct SanitizingLogHandler: LogHandler {
    public var wrapped: any LogHandler

    public init(wrapping handler: any LogHandler) { wrapped = handler }

    public var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    public var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue.mapValues(LogText.sanitize) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue.map(LogText.sanitize) }
    }

    public func log(event: LogEvent) {
        var event = event
        event.message = "\(LogText.sanitize(event.message.description))"
        event.metadata = event.metadata?.mapValues(LogText.sanitize)
        wrapped.log(event: event)
    }
}
