import Foundation
package import ReplayIPC
import ReplayMedia
#if canImport(Glibc)
import Glibc
#endif

/// The system windows replayd shows: the consent prompt, the recording preview and the broadcast
/// picker. Each is a
/// `replay-ui` process (GTK 4) that replayd starts on the person's display and whose one answer it
/// reads back, so that no app can draw over, answer or close them itself.
///
/// The contract with `replay-ui` (docs/ARCHITECTURE.md): it writes exactly one JSON object, on one
/// line, to its standard output (a 0600 file in replayd's private folder, never a pipe) and exits 0:
/// - `replay-ui consent --display D --app-name NAME [--app-icon PNG] [--microphone] [--service NAME]`:
///   `{"answer":"allow"}` or `{"answer":"deny"}` (closing the window denies); with `--service` it is the
///   pairing prompt of an app's broadcast, naming the app and the service;
/// - `replay-ui preview --display D --file MOVIE --save-folder DIR`:
///   `{"action":"saved","path":P}`, `{"action":"shared","path":P}` or `{"action":"cancelled"}`;
/// - `replay-ui picker --display D --services FILE [--microphone] [--no-microphone-button]`, FILE a JSON list of
///   `{"identifier":…,"displayName":…,"iconPath":…|null}` (a 0600 file in replayd's private folder):
///   `{"action":"start","identifier":ID,"microphone":true|false}` (ID one of FILE's) or
///   `{"action":"cancelled"}` (Escape, Cancel, closing the window; an empty list offers only Cancel).
package enum SystemWindows {
    package typealias ConsentAnswer = SystemWindowAnswer.Consent.Answer

    /// What the consent prompt names: the app (its `.desktop` entry's name and icon, else its
    /// executable's name) and what it asks for.
    package struct ConsentRequest: Sendable, Equatable {
        package var display: String
        package var appName: String
        package var appIconPath: String?
        package var microphone: Bool
        /// The broadcast service's name when the app asks to broadcast (the pairing prompt), else nil.
        package var serviceName: String?
        package init(display: String, appName: String, appIconPath: String? = nil, microphone: Bool, serviceName: String? = nil) {
            self.display = display
            self.appName = appName
            self.appIconPath = appIconPath
            self.microphone = microphone
            self.serviceName = serviceName
        }
    }

    /// What the person did in the preview.
    package enum PreviewOutcome: Sendable, Equatable {
        case saved(path: String)
        case shared(path: String)
        case cancelled
    }

    /// A broadcast service the picker offers: an installed upload extension's identifier, name and icon.
    package struct PickerService: Sendable, Equatable, Codable {
        package var identifier: String
        package var displayName: String
        /// A PNG; nil (or unreadable) shows a generic icon.
        package var iconPath: String?
        package init(identifier: String, displayName: String, iconPath: String? = nil) {
            self.identifier = identifier
            self.displayName = displayName
            self.iconPath = iconPath
        }

        private enum CodingKeys: String, CodingKey { case identifier, displayName, iconPath }
        /// `iconPath` is written as `null` when absent: the contract's shape, whatever the encoder's default.
        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(identifier, forKey: .identifier)
            try container.encode(displayName, forKey: .displayName)
            try container.encode(iconPath, forKey: .iconPath)
        }
    }

    /// What the person chose in the picker.
    package struct PickerChoice: Sendable, Equatable {
        package var identifier: String
        package var microphone: Bool
        package init(identifier: String, microphone: Bool) {
            self.identifier = identifier
            self.microphone = microphone
        }
    }

    /// Shows the consent prompt and waits for the person's answer.
    package static func askConsent(_ request: ConsentRequest, paths: ControlPaths) async throws(ReplayError) -> ConsentAnswer {
        var arguments = ["consent", "--display", request.display, "--app-name", request.appName]
        if let icon = request.appIconPath { arguments += ["--app-icon", icon] }
        if request.microphone { arguments.append("--microphone") }
        if let service = request.serviceName { arguments += ["--service", service] }
        return try await run(arguments, paths: paths, as: SystemWindowAnswer.Consent.self).answer
    }

    /// Shows the preview of `file` and waits until the person saves, shares or cancels it.
    package static func preview(file: String, saveFolder: String, display: String,
                                paths: ControlPaths) async throws(ReplayError) -> PreviewOutcome {
        let outcome = try await run(["preview", "--display", display, "--file", file, "--save-folder", saveFolder],
                                    paths: paths, as: SystemWindowAnswer.Preview.self)
        switch (outcome.action, outcome.path) {
        case (.saved, let path?): return .saved(path: path)
        case (.shared, let path?): return .shared(path: path)
        case (.cancelled, _): return .cancelled
        default: throw ReplayError(.internal, "replay-ui answered \"\(outcome.action)\" without the file's path")
        }
    }

    /// Shows the broadcast picker with `services` (in this order, the first selected) and the microphone
    /// check box set to `microphone` (hidden when not `showsMicrophoneButton`), and waits for the
    /// person: their choice, or nil when they cancel.
    package static func pickService(_ services: [PickerService], microphone: Bool, showsMicrophoneButton: Bool = true, display: String,
                                    paths: ControlPaths) async throws(ReplayError) -> PickerChoice? {
        try paths.prepareDirectory()
        let servicesFile = paths.directory + "/picker-\(UUID().uuidString).json"
        defer { unlink(servicesFile) }
        do {
            let data = try JSONEncoder().encode(services)
            let descriptor = open(servicesFile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw ReplayError(.internal, "cannot create \(servicesFile): \(String(cString: strerror(errno)))") }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            try handle.write(contentsOf: data)
        } catch let error as ReplayError {
            throw error
        } catch {
            throw ReplayError(.internal, "cannot write the picker's list of services to \(servicesFile): \(error)")
        }
        var arguments = ["picker", "--display", display, "--services", servicesFile]
        if microphone { arguments.append("--microphone") }
        if !showsMicrophoneButton { arguments.append("--no-microphone-button") }
        let outcome = try await run(arguments, paths: paths, as: SystemWindowAnswer.Picker.self)
        switch (outcome.action, outcome.identifier) {
        case (.start, let identifier?) where services.contains(where: { $0.identifier == identifier }):
            return PickerChoice(identifier: identifier, microphone: outcome.microphone ?? false)
        case (.cancelled, _): return nil
        default: throw ReplayError(.internal, "replay-ui answered \"\(outcome.action)\" with a service not offered (\(outcome.identifier ?? "none"))")
        }
    }

    /// `replay-ui` beside replayd's own executable (an installed or built tree), else on `PATH`.
    package static func executable() -> String? {
        DaemonLauncher.besideCurrentExecutable(named: "replay-ui") ?? Spawn.executable(named: "replay-ui")
    }

    private static func run<Answer: Decodable>(_ arguments: [String], paths: ControlPaths,
                                               as type: Answer.Type) async throws(ReplayError) -> Answer {
        guard let executable = executable() else {
            throw ReplayError(.internal, "replay-ui, which shows replayd's system windows, is not installed beside replayd or on PATH. Reinstall OpenReplayKit (`make install`).")
        }
        try paths.prepareDirectory()
        guard !Task.isCancelled else {
            throw ReplayError(.shuttingDown, "replayd is shutting down: the \(arguments[0]) window was not shown.")
        }
        let answerFile = paths.directory + "/ui-\(UUID().uuidString).json"
        defer { unlink(answerFile) }
        let pid = try Spawn.start(executable, arguments: arguments, standardOutput: .file(answerFile, append: false),
                                  standardError: .file(paths.logFile, append: true), group: .newProcessGroup)
        // The window stays up as long as the person takes: wait for it on a thread of its own. Its
        // asker cancelled (replayd shuts down, the client left), the window is closed (killed).
        let status = await ChildProcess.waitForExit(pid, threadName: "replay-ui-wait")
        let text = (try? String(contentsOfFile: answerFile, encoding: .utf8)) ?? ""
        guard status == 0, let line = text.split(separator: "\n").last,
              let answer = try? JSONDecoder().decode(Answer.self, from: Data(line.utf8)) else {
            throw ReplayError(.internal, "replay-ui \(arguments[0]) ended without an answer (wait status \(status)). replayd's log: \(paths.logFile).")
        }
        return answer
    }
}
