import ArgumentParser
import ReplayIPC
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `replay`: the Control Center on the command line.
@main
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Record the screen of this Linux desktop (OpenReplayKit's Control Center).",
        discussion: """
            A recording belongs to replayd, the per-user daemon, which `replay` starts when it is \
            not running. While a recording runs, a red dot with the elapsed time shows at the \
            top-right of the recorded screen (it is left out of the movie); click it to stop.

            Examples:
              replay record                 # until Ctrl-C or `replay stop`
              replay record --duration 10 -o demo.mp4
              replay record --mic --region 1280x720+0+0 --fps 60
              replay status                 # from another terminal
              replay mic off                # the mic track goes on, silent
              replay stop                   # finishes the file, prints it
              replay toggle --notify        # start, or stop what runs (for a shortcut)
              replay clip start --seconds 30 && replay clip save   # instant replay
              replay privacy list           # apps you allowed to record themselves
              replay extension new MyStream # a new broadcast extension package
              replay doctor                 # what works on this desktop (X11, GNOME, KDE, sway)
            """,
        version: Daemon.version,
        subcommands: [Record.self, Broadcast.self, Stop.self, Status.self, Mic.self, Toggle.self, Clip.self, Privacy.self, Services.self, ExtensionCommand.self, Doctor.self])
}

// MARK: - talking to replayd

enum Daemon {
    static let version = "0.1"
    static let software = "replay \(version)"

    /// Runs `body` connected to replayd, starting replayd first when `start` is true and it is
    /// not running. Nil when it is not running and `start` is false.
    static func withConnection<Result: Sendable>(
        start: Bool, _ body: (ControlConnection) async throws -> Result
    ) async throws -> Result? {
        // A replayd that goes away mid-write is an error to report, not a silent death.
        signal(SIGPIPE, SIG_IGN)
        let paths = ControlPaths.forCurrentUser()
        var attempt = 0
        while true {
            if start {
                try await DaemonLauncher.ensureRunning(paths: paths, executable: DaemonLauncher.besideCurrentExecutable())
            } else if !DaemonLauncher.isListening(socketPath: paths.socket) {
                return nil
            }
            do {
                return try await ControlConnection.withConnection(socketPath: paths.socket, software: software, body)
            } catch let error as ReplayError where error.code == .shuttingDown && attempt < 20 {
                // We met a replayd on its way out (idle exit): it did nothing; wait for it to go.
                attempt += 1
                try await Task.sleep(for: .milliseconds(250))
            }
        }
    }
}

/// Prints `message` on stderr as `replay: message` and exits with `code`.
func fail(_ message: String, code: Int32 = 1) -> ExitCode {
    printError("replay: \(TerminalText.escaped(message))")
    return ExitCode(code)
}

/// Every line replay prints goes through these two: no control character but the line breaks of
/// our own text reaches the terminal (service text is escaped whole, line breaks too, where it is
/// put in: `Format.service`).
func printError(_ text: String) {
    var line = TerminalText.escaped(text, keepingLines: true) + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// One line on stdout, written at once (a path a script reads).
func printOutput(_ text: String) {
    var line = TerminalText.escaped(text, keepingLines: true) + "\n"
    line.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
}

/// Runs a command body and turns a `ReplayError` into its message and exit status 1.
func reportingErrors<Result>(_ body: () async throws -> Result) async throws -> Result {
    do {
        return try await body()
    } catch let error as ReplayError {
        throw fail(error.message)
    }
}
