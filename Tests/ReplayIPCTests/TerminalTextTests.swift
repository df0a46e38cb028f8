import Testing
import ReplayIPC

@Suite("Service text printed on the person's terminal")
struct TerminalTextTests {
    @Test func escapeSequencesAreShownNotObeyed() {
        #expect(TerminalText.escaped("hi\u{1B}[2J\u{1B}]0;owned\u{7}") == #"hi\e[2J\e]0;owned\u{7}"#)
        // C1's CSI, DEL, and a right-to-left override that would reorder the line as read.
        #expect(TerminalText.escaped("a\u{9B}31mb\u{7F}c\u{202E}d") == #"a\u{9B}31mb\u{7F}c\u{202E}d"#)
    }

    @Test func aNewlineCannotForgeALine() {
        #expect(TerminalText.escaped("ok\nreplay: broadcast ended\r") == #"ok\nreplay: broadcast ended\r"#)
        #expect(TerminalText.escaped("two\nlines\tand a tab\u{1B}", keepingLines: true) == "two\nlines\tand a tab\\e")
    }

    @Test func ordinaryTextIsUntouched() {
        let text = "Zoë's stream — 日本語 👋 https://example.com/b/1?x=1"
        #expect(TerminalText.escaped(text) == text)
    }
}
