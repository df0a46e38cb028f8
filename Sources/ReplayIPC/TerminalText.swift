/// Text from elsewhere (a broadcast service's info and errors, a viewer's chat, an app's name) made
/// safe to print on the person's terminal: an escape sequence could move the cursor, rewrite earlier
/// lines or set the window title, and a newline could forge a line `replay` never printed.
public enum TerminalText {
    /// `text` with every control character written as a visible escape (`\e`, `\r`, `\u{9B}`…):
    /// C0, DEL, C1, and the bidirectional overrides that reorder what the eye reads. With
    /// `keepingLines`, newlines and tabs stay (text of our own, several lines long).
    public static func escaped(_ text: String, keepingLines: Bool = false) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if keepingLines && (scalar == "\n" || scalar == "\t") {
                out.unicodeScalars.append(scalar)
                continue
            }
            switch scalar.value {
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0x1B: out += "\\e"
            case 0x00...0x1F, 0x7F...0x9F, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069:
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
