import Foundation
import Testing
@testable import ReplayIPC

/// replay-ui's answers to replayd, byte for byte as replay-ui writes them (sorted keys, no nil keys).
@Suite struct SystemWindowAnswerTests {
    static func line(_ answer: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(answer), as: UTF8.self)
    }

    @Test func eachWindowsAnswerOnTheWire() throws {
        #expect(try Self.line(SystemWindowAnswer.Consent(answer: .allow)) == #"{"answer":"allow"}"#)
        #expect(try Self.line(SystemWindowAnswer.Preview(action: .saved, path: "/home/a/Videos/x.mp4")) == #"{"action":"saved","path":"/home/a/Videos/x.mp4"}"#)
        #expect(try Self.line(SystemWindowAnswer.Preview(action: .cancelled)) == #"{"action":"cancelled"}"#)
        #expect(try Self.line(SystemWindowAnswer.Picker(action: .start, identifier: "org.x", microphone: false)) == #"{"action":"start","identifier":"org.x","microphone":false}"#)
        #expect(try Self.line(SystemWindowAnswer.Picker(action: .cancelled)) == #"{"action":"cancelled"}"#)
    }

    @Test func anUnknownActionDoesNotDecode() {
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(SystemWindowAnswer.Picker.self, from: Data(#"{"action":"explode"}"#.utf8)) }
    }
}
