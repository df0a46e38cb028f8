import CGtk

/// A key, as GDK's keyval.
public struct Key: Hashable, Sendable {
    public let value: UInt32
    public init(_ value: UInt32) { self.value = value }

    public static let returnKey = Key(UInt32(GDK_KEY_Return))
    public static let keypadEnter = Key(UInt32(GDK_KEY_KP_Enter))
    public static let escape = Key(UInt32(GDK_KEY_Escape))
    public static let space = Key(UInt32(GDK_KEY_space))
    public static let left = Key(UInt32(GDK_KEY_Left))
    public static let right = Key(UInt32(GDK_KEY_Right))
    public static let up = Key(UInt32(GDK_KEY_Up))
    public static let down = Key(UInt32(GDK_KEY_Down))
    public static let keypadUp = Key(UInt32(GDK_KEY_KP_Up))
    public static let keypadDown = Key(UInt32(GDK_KEY_KP_Down))
    public static let keypadSpace = Key(UInt32(GDK_KEY_KP_Space))

    /// A letter key, either case (`Key.letter("s")`).
    public static func letter(_ character: Character) -> Set<Key> {
        let lower = String(character).lowercased().unicodeScalars.first!.value
        let upper = String(character).uppercased().unicodeScalars.first!.value
        return [Key(lower), Key(upper)]
    }
}

/// The modifier keys held with a key.
public struct KeyModifiers: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    // GDK 4's GDK_SHIFT_MASK, GDK_CONTROL_MASK and GDK_ALT_MASK (CGtkShim asserts these values).
    public static let shift = KeyModifiers(rawValue: 1 << 0)
    public static let control = KeyModifiers(rawValue: 1 << 2)
    public static let alt = KeyModifiers(rawValue: 1 << 3)
}
