/// What replay-ui answers replayd on its standard output: one JSON line per window, one type each, the
/// same types on both sides (replay-ui encodes them, replayd decodes them). Keys absent when nil.
package enum SystemWindowAnswer {
    /// `replay-ui consent`: `{"answer":"allow"}` or `{"answer":"deny"}` (closing the window denies).
    package struct Consent: Codable, Sendable, Equatable {
        package enum Answer: String, Codable, Sendable, Equatable { case allow, deny }
        package var answer: Answer
        package init(answer: Answer) { self.answer = answer }
    }

    /// `replay-ui preview`: `{"action":"saved","path":P}`, `{"action":"shared","path":P}` or `{"action":"cancelled"}`.
    package struct Preview: Codable, Sendable, Equatable {
        package enum Action: String, Codable, Sendable, Equatable { case saved, shared, cancelled }
        package var action: Action
        package var path: String?
        package init(action: Action, path: String? = nil) {
            self.action = action
            self.path = path
        }
    }

    /// `replay-ui picker`: `{"action":"start","identifier":ID,"microphone":B}` or `{"action":"cancelled"}`.
    package struct Picker: Codable, Sendable, Equatable {
        package enum Action: String, Codable, Sendable, Equatable { case start, cancelled }
        package var action: Action
        package var identifier: String?
        package var microphone: Bool?
        package init(action: Action, identifier: String? = nil, microphone: Bool? = nil) {
            self.action = action
            self.identifier = identifier
            self.microphone = microphone
        }
    }
}
