import Foundation

/// A JSON value, as it crossed the socket: what a request, a response or an event carries beside
/// its envelope, kept as it came so that each side decodes only what it knows and ignores the rest.
public enum JSONValue: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int64.self) { self = .integer(value) }
        else if let value = try? container.decode(Double.self) { self = .double(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

/// The fields of a request, a response or an event beyond its envelope (`type`, `id`, `method`,
/// `event`): on the wire they sit in the same JSON object. A receiver decodes the type it knows
/// from them (`decode`); fields it does not know are ignored, so that fields can be added without
/// a new protocol version.
public struct ControlPayload: Sendable, Equatable {
    public private(set) var fields: [String: JSONValue]

    public init(fields: [String: JSONValue] = [:]) {
        self.fields = fields
    }

    /// The fields `value` encodes to (it must encode as a JSON object).
    public init(_ value: some Encodable) throws(ControlCodecError) {
        do {
            let data = try ControlJSON.encoder.encode(value)
            fields = try ControlJSON.decoder.decode([String: JSONValue].self, from: data)
        } catch {
            throw ControlCodecError(.malformedMessage, "cannot encode \(type(of: value)) as a message's fields: \(error)")
        }
    }

    /// Decodes `type` from the fields; unknown fields are ignored.
    public func decode<Value: Decodable>(_ type: Value.Type) throws(ControlCodecError) -> Value {
        do {
            let data = try ControlJSON.encoder.encode(fields)
            return try ControlJSON.decoder.decode(Value.self, from: data)
        } catch {
            throw ControlCodecError(.malformedMessage, ControlJSON.describe(error))
        }
    }

    public static let empty = ControlPayload()
}

/// The JSON settings of the protocol: keys sorted, `/` not escaped (docs/PROTOCOL.md).
enum ControlJSON {
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    static var decoder: JSONDecoder { JSONDecoder() }

    /// A decoding error in a sentence: what was missing or of the wrong type, never Swift's dump.
    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): return context.debugDescription
        case DecodingError.keyNotFound(let key, let context):
            let path = (context.codingPath + [key]).map(\.stringValue).joined(separator: ".")
            return "missing \"\(path)\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return "wrong type at \"\(path)\""
        case let error as ControlCodecError: return error.message
        default: return "\(error)"
        }
    }
}
