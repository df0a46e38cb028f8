import ArgumentParser
import ReplayIPC
#if canImport(Glibc)
import Glibc
#endif

/// `replay privacy`: what the person allowed apps to record, and forgetting it.
struct Privacy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "See and forget the answers you gave apps that asked to record themselves.",
        discussion: """
            When an app starts recording itself (through the OpenReplayKit library) for the first \
            time, replayd asks you: Allow or Don't Allow. The answer holds for 8 minutes for that \
            program, then you are asked again. These commands show the answers held now, and forget \
            them so that the next start asks again. Answers live in replayd's memory only.

            On Wayland the desktop's own dialog asks which screen your recordings and broadcasts \
            share, and replayd keeps that choice (the portal's restore token, in \
            $XDG_STATE_HOME/openreplaykit/, readable by you only) so that later ones start without \
            asking. `replay privacy reset` with no app forgets it too.

            Examples:
              replay privacy list
              replay privacy reset               # forget every answer
              replay privacy reset sketchpad     # one app: its name, program name or path
            """,
        subcommands: [List.self, Reset.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the answers held now.")

        func run() async throws {
            try await reportingErrors {
                let apps = try await Daemon.withConnection(start: false) { connection in
                    try await connection.request(PrivacyListRequest()).apps
                } ?? []
                guard !apps.isEmpty else {
                    printOutput("no app has asked in the last 8 minutes")
                    return
                }
                for app in apps {
                    let verdict = app.answer == "allow" ? "allowed" : "not allowed"
                    printOutput("\(app.name) (\(app.executable)): \(verdict), asks again in \(Format.duration(app.remainingSeconds))")
                }
            }
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Forget the answers (for one app, or all): the next start asks again.")

        @Argument(help: ArgumentHelp("The app: the name the prompt showed, its program's name or its path. Default: every app.", valueName: "app"))
        var app: String?

        func run() async throws {
            try await reportingErrors {
                let removed = try await Daemon.withConnection(start: false) { connection in
                    try await connection.request(PrivacyResetRequest(app: app)).removed
                } ?? []
                var forgotScreen = false
                if app == nil {
                    let token = StatePaths.portalRestoreToken()
                    forgotScreen = unlink(token) == 0
                    if forgotScreen { printOutput("forgot the screen you chose to share (the desktop asks again next time)") }
                }
                if removed.isEmpty, !forgotScreen {
                    printOutput(app.map { "no answer held for \($0)" } ?? "no answer held")
                }
                for entry in removed { printOutput("forgot \(entry.name) (\(entry.executable))") }
            }
        }
    }
}
