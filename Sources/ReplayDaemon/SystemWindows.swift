import Foundation
package import ReplayIPC
import ReplayMedia
#if canImport(Glibc)
import Glibc
#endif

/// The system windows replayd shows: the consent prompt and the recording preview. Each is a
/// `replay-ui` process (GTK 4) that replayd starts on the person's display and whose one answer it
/// reads back, so that no app can draw over, answer or close them itself.
///
/// The contract with `replay-ui` (docs/ARCHITECTURE.md): it writes exactly one JSON object, on one
/// line, to its standard output (a 0600 file in replayd's private folder, never a pipe) and exits 0:
/// - `replay-ui consent --display D --app-name NAME [--app-icon PNG] [--microphone]`:
///   `{"answer":"allow"}` or `{"answer":"deny"}` (closing the window denies);
/// - `replay-ui preview --display D --file MOVIE --save-folder DIR`:
///   `{"action":"saved","path":P}`, `{"action":"shared","path":P}` or `{"action":"cancelled"}`.
package enum SystemWindows {
    package enum ConsentAnswer: String, Sendable, Equatable, Decodable {
        case allow, deny
    }

    /// What the consent prompt names: the app (its `.desktop` entry's name and icon, else its
    /// executable's name) and what it asks for.
    package struct ConsentRequest: Sendable, Equatable {
        package var display: String
        package var appName: String
        package var appIconPath: String?
        package var microphone: Bool
        package init(display: String, appName: String, appIconPath: String? = nil, microphone: Bool) {
            self.display = display
            self.appName = appName
            self.appIconPath = appIconPath
            self.microphone = microphone
        }
    }

    /// What the person did in the preview.
    package enum PreviewOutcome: Sendable, Equatable {
        case saved(path: String)
        case shared(path: String)
        case cancelled
    }

    /// Shows the consent prompt and waits for the person's answer.
    package static func askConsent(_ request: ConsentRequest, paths: ControlPaths) async throws(ReplayError) -> ConsentAnswer {
        var arguments = ["consent", "--display", request.display, "--app-name", request.appName]
        if let icon = request.appIconPath { arguments += ["--app-icon", icon] }
        if request.microphone { arguments.append("--microphone") }
        struct Answer: Decodable { var answer: ConsentAnswer }
        return try await run(arguments, paths: paths, as: Answer.self).answer
    }

    /// Shows the preview of `file` and waits until the person saves, shares or cancels it.
    package static func preview(file: String, saveFolder: String, display: String,
                                paths: ControlPaths) async throws(ReplayError) -> PreviewOutcome {
        struct Outcome: Decodable {
            var action: String
            var path: String?
        }
        let outcome = try await run(["preview", "--display", display, "--file", file, "--save-folder", saveFolder],
                                    paths: paths, as: Outcome.self)
        switch (outcome.action, outcome.path) {
        case ("saved", let path?): return .saved(path: path)
        case ("shared", let path?): return .shared(path: path)
        case ("cancelled", _): return .cancelled
        default: throw ReplayError(.internal, "replay-ui answered an unknown preview action \"\(outcome.action)\"")
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
        let answerFile = paths.directory + "/ui-\(UUID().uuidString).json"
        defer { unlink(answerFile) }
        let pid = try Spawn.start(executable, arguments: arguments, standardOutput: .file(answerFile, append: false),
                                  standardError: .file(paths.logFile, append: true), group: .newProcessGroup)
        // The window stays up as long as the person takes: wait for it on a thread of its own.
        let status = await DedicatedThread.run(named: "replay-ui-wait") { () -> Int32 in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return status
        }
        let text = (try? String(contentsOfFile: answerFile, encoding: .utf8)) ?? ""
        guard status == 0, let line = text.split(separator: "\n").last,
              let answer = try? JSONDecoder().decode(Answer.self, from: Data(line.utf8)) else {
            throw ReplayError(.internal, "replay-ui \(arguments[0]) ended without an answer (wait status \(status)). replayd's log: \(paths.logFile).")
        }
        return answer
    }
}
