package import ReplayIPC

/// How replayd asks which broadcast service to start (`replay broadcast` without `--service`,
/// `RPBroadcastActivityViewController.load(handler:)`).
package enum ServicePicker: Sendable, Equatable {
    /// The system window (`replay-ui picker`), on the display the broadcast is for.
    case systemWindow
    /// Always this choice (nil: the person cancelled), without a window: for tests of replayd only
    /// (in-process, or a debug build's `replayd --picker-answer-for-tests`; a release build has no such option).
    case fixed(SystemWindows.PickerChoice?)

    /// A test answer as `--picker-answer-for-tests` spells it: `cancel`, `ID`, or `ID,microphone`.
    package init?(testAnswer: String) {
        if testAnswer == "cancel" {
            self = .fixed(nil)
            return
        }
        let parts = testAnswer.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard let identifier = parts.first, !identifier.isEmpty, parts.count <= 2,
              parts.count == 1 || parts[1] == "microphone" else { return nil }
        self = .fixed(SystemWindows.PickerChoice(identifier: identifier, microphone: parts.count == 2))
    }

    /// Asks the person (or answers as the test said) which of `services` to broadcast to: nil when
    /// they cancel. A fixed answer naming a service that is not offered is an error, as replay-ui's would be.
    package func pick(_ services: [SystemWindows.PickerService], microphone: Bool, showsMicrophoneButton: Bool = true, display: String,
                      paths: ControlPaths) async throws(ReplayError) -> SystemWindows.PickerChoice? {
        switch self {
        case .systemWindow:
            return try await SystemWindows.pickService(services, microphone: microphone, showsMicrophoneButton: showsMicrophoneButton,
                                                       display: display, paths: paths)
        case .fixed(nil):
            return nil
        case .fixed(let choice?):
            guard services.contains(where: { $0.identifier == choice.identifier }) else {
                throw ReplayError(.internal, "the picker's test answer \(choice.identifier) is not among the services offered (\(services.map(\.identifier).joined(separator: ", ")))")
            }
            return choice
        }
    }
}
