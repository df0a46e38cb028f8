public import NIOCore

/// An AMF0 value (Action Message Format, version 0), the encoding of RTMP command and data messages.
///
/// Only the types encoders send in practice are modelled; `undefined` decodes as `.null`, and a
/// reference, a typed object, XML or a date is a decoding error (ffmpeg, OBS and Larix never send them
/// in a publish session).
public enum AMF0Value: Sendable, Hashable {
    case number(Double)
    case boolean(Bool)
    case string(String)
    /// An anonymous object: ordered properties.
    case object([(String, AMF0Value)])
    case null
    /// An associative ("ECMA") array, as `@setDataFrame`/`onMetaData` carries.
    case ecmaArray([(String, AMF0Value)])
    case strictArray([AMF0Value])

    public static func == (lhs: AMF0Value, rhs: AMF0Value) -> Bool {
        switch (lhs, rhs) {
        case let (.number(a), .number(b)): return a == b || (a.isNaN && b.isNaN)
        case let (.boolean(a), .boolean(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case (.null, .null): return true
        case let (.object(a), .object(b)), let (.ecmaArray(a), .ecmaArray(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case let (.strictArray(a), .strictArray(b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .number(let n): hasher.combine(0); hasher.combine(n)
        case .boolean(let b): hasher.combine(1); hasher.combine(b)
        case .string(let s): hasher.combine(2); hasher.combine(s)
        case .object(let p): hasher.combine(3); hasher.combine(p.count); for (k, v) in p { hasher.combine(k); hasher.combine(v) }
        case .null: hasher.combine(5)
        case .ecmaArray(let p): hasher.combine(8); hasher.combine(p.count); for (k, v) in p { hasher.combine(k); hasher.combine(v) }
        case .strictArray(let a): hasher.combine(10); hasher.combine(a)
        }
    }

    /// The value of a property of an object or ECMA array (first match), else nil.
    public subscript(key: String) -> AMF0Value? {
        switch self {
        case .object(let p), .ecmaArray(let p): return p.first { $0.0 == key }?.1
        default: return nil
        }
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var numberValue: Double? { if case .number(let n) = self { return n }; return nil }
}

/// What went wrong while decoding AMF0.
public struct AMF0Error: Error, Hashable, CustomStringConvertible {
    public enum Code: Hashable, Sendable { case truncated, unsupportedType(UInt8), tooDeep, invalidUTF8 }
    public let code: Code
    public var description: String { "AMF0: \(code)" }
}

/// AMF0 decoding and encoding over `ByteBuffer`.
public enum AMF0 {
    /// Nesting limit: protects the decoder's stack from hostile input.
    static let maximumDepth = 32

    /// Decodes every value until the buffer is empty.
    public static func decodeAll(_ buffer: ByteBuffer) throws(AMF0Error) -> [AMF0Value] {
        var buffer = buffer
        var values: [AMF0Value] = []
        while buffer.readableBytes > 0 { values.append(try decode(&buffer)) }
        return values
    }

    /// Decodes one value, moving the reader index past it.
    public static func decode(_ buffer: inout ByteBuffer) throws(AMF0Error) -> AMF0Value {
        try decode(&buffer, depth: 0)
    }

    private static func decode(_ buffer: inout ByteBuffer, depth: Int) throws(AMF0Error) -> AMF0Value {
        guard depth < maximumDepth else { throw AMF0Error(code: .tooDeep) }
        guard let marker = buffer.readInteger(as: UInt8.self) else { throw AMF0Error(code: .truncated) }
        switch marker {
        case 0x00:
            guard let bits = buffer.readInteger(as: UInt64.self) else { throw AMF0Error(code: .truncated) }
            return .number(Double(bitPattern: bits))
        case 0x01:
            guard let b = buffer.readInteger(as: UInt8.self) else { throw AMF0Error(code: .truncated) }
            return .boolean(b != 0)
        case 0x02:
            return .string(try readShortString(&buffer))
        case 0x03:
            return .object(try readProperties(&buffer, depth: depth))
        case 0x05, 0x06:
            return .null
        case 0x08:
            guard buffer.readInteger(as: UInt32.self) != nil else { throw AMF0Error(code: .truncated) }
            return .ecmaArray(try readProperties(&buffer, depth: depth))
        case 0x0A:
            guard let count = buffer.readInteger(as: UInt32.self) else { throw AMF0Error(code: .truncated) }
            // Each element takes at least one byte: a count beyond what is left is a lie.
            guard Int(count) <= buffer.readableBytes else { throw AMF0Error(code: .truncated) }
            var items: [AMF0Value] = []
            items.reserveCapacity(Int(count))
            for _ in 0..<count { items.append(try decode(&buffer, depth: depth + 1)) }
            return .strictArray(items)
        case 0x0C:
            guard let length = buffer.readInteger(as: UInt32.self) else { throw AMF0Error(code: .truncated) }
            return .string(try readUTF8(&buffer, length: Int(length)))
        default:
            throw AMF0Error(code: .unsupportedType(marker))
        }
    }

    private static func readShortString(_ buffer: inout ByteBuffer) throws(AMF0Error) -> String {
        guard let length = buffer.readInteger(as: UInt16.self) else { throw AMF0Error(code: .truncated) }
        return try readUTF8(&buffer, length: Int(length))
    }

    private static func readUTF8(_ buffer: inout ByteBuffer, length: Int) throws(AMF0Error) -> String {
        guard let bytes = buffer.readBytes(length: length) else { throw AMF0Error(code: .truncated) }
        guard let s = String(validating: bytes, as: UTF8.self) else { throw AMF0Error(code: .invalidUTF8) }
        return s
    }

    private static func readProperties(_ buffer: inout ByteBuffer, depth: Int) throws(AMF0Error) -> [(String, AMF0Value)] {
        var properties: [(String, AMF0Value)] = []
        while true {
            let key = try readShortString(&buffer)
            if key.isEmpty, buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) == 0x09 {
                buffer.moveReaderIndex(forwardBy: 1)
                return properties
            }
            properties.append((key, try decode(&buffer, depth: depth + 1)))
        }
    }

    /// Appends the encoding of `value`.
    public static func encode(_ value: AMF0Value, into buffer: inout ByteBuffer) {
        switch value {
        case .number(let n):
            buffer.writeInteger(UInt8(0x00)); buffer.writeInteger(n.bitPattern)
        case .boolean(let b):
            buffer.writeInteger(UInt8(0x01)); buffer.writeInteger(UInt8(b ? 1 : 0))
        case .string(let s):
            let utf8 = s.utf8.count
            if utf8 <= Int(UInt16.max) {
                buffer.writeInteger(UInt8(0x02)); buffer.writeInteger(UInt16(utf8)); buffer.writeString(s)
            } else {
                buffer.writeInteger(UInt8(0x0C)); buffer.writeInteger(UInt32(utf8)); buffer.writeString(s)
            }
        case .object(let p):
            buffer.writeInteger(UInt8(0x03)); writeProperties(p, into: &buffer)
        case .null:
            buffer.writeInteger(UInt8(0x05))
        case .ecmaArray(let p):
            buffer.writeInteger(UInt8(0x08)); buffer.writeInteger(UInt32(p.count)); writeProperties(p, into: &buffer)
        case .strictArray(let items):
            buffer.writeInteger(UInt8(0x0A)); buffer.writeInteger(UInt32(items.count))
            for item in items { encode(item, into: &buffer) }
        }
    }

    /// The encoding of a sequence of values.
    public static func encode(_ values: [AMF0Value], allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 128)
        for value in values { encode(value, into: &buffer) }
        return buffer
    }

    private static func writeProperties(_ properties: [(String, AMF0Value)], into buffer: inout ByteBuffer) {
        for (key, value) in properties {
            let bytes = Array(key.utf8.prefix(Int(UInt16.max)))
            buffer.writeInteger(UInt16(bytes.count)); buffer.writeBytes(bytes)
            encode(value, into: &buffer)
        }
        buffer.writeInteger(UInt16(0)); buffer.writeInteger(UInt8(0x09))
    }
}
