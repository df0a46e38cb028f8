import ArgumentParser
import ReplayIPC
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `replay toggle`: what a launcher, a keyboard shortcut or the desktop entry runs.
struct Toggle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop the running recording, or start one and return at once (for a launcher or a shortcut).",
        discussion: """
            Made for what has no terminal: the "Screen Recording" desktop entry and a keyboard \
            shortcut run it. It never waits for a recording to end: a started recording runs in \
            replayd until the next `replay toggle`, `replay stop` or a click on the red indicator, \
            and goes to the default file (see `replay record --help`) of the whole screen of \
            $DISPLAY with the system sound (and the microphone with --mic). It prints the file's \
            path; with --notify it also shows what happened (and any error) as a desktop \
            notification, when notify-send is installed. Errors also go to stderr and exit with \
            status 1.

            Examples:
              replay toggle                 # start, or stop what runs
              replay toggle --mic --notify  # what the desktop entry runs
              replay toggle --start         # only start (nothing if a recording runs)
            """)

    enum Action: String, EnumerableFlag {
        case toggle, start, stop

        static func help(for value: Action) -> ArgumentHelp? {
            switch value {
            case .toggle: "Stop the running recording, else start one (the default)."
            case .start: "Only start: when a recording runs already, say so and leave it."
            case .stop: "Only stop: like `replay stop`, without waiting in a terminal."
            }
        }
    }

    @Flag(exclusivity: .exclusive)
    var action: Action = .toggle

    @Flag(help: "Also record the microphone (the default PulseAudio source) when starting.")
    var mic = false

    @Flag(help: "Also tell the outcome as a desktop notification (notify-send), for launchers without a terminal.")
    var notify = false

    @Option(help: ArgumentHelp("The X display to record, such as :0. Default: $DISPLAY.", valueName: "name"))
    var display: String?

    func run() async throws {
        do {
            let running: SessionStatus?? = try await Daemon.withConnection(start: false) { connection in
                try await connection.request(.status).status
            }
            let current = (running ?? nil).flatMap { [.starting, .running, .stopping].contains($0.state) ? $0 : nil }
            switch (action, current) {
            case (.toggle, .some), (.stop, .some):
                try await stop()
            case (.stop, .none):
                tell("Nothing is recording.", body: nil, stream: 2)
            case (.start, .some(let status)):
                tell("A recording is running already.", body: status.outputPath, stream: 2)
            case (.toggle, .none), (.start, .none):
                try await start()
            }
        } catch let error as ReplayError {
            tell("Screen recording failed", body: error.message, stream: 2, urgent: true)
            throw ExitCode(1)
        }
    }

    private func start() async throws {
        let display = display ?? DesktopSession.current()?.displayName ?? ""
        try RecordingOptions.check(framesPerSecond: 30, durationSeconds: nil, region: nil, display: display)
        let options = RecordingOptions(
            outputPath: try OutputPath.resolve(nil), microphone: mic, systemAudio: true, audioRequired: mic,
            display: display, region: nil, framesPerSecond: 30, quality: .medium, encoder: .auto,
            separateAudioTracks: false)
        let started: SessionStatus?? = try await Daemon.withConnection(start: true) { connection in
            try await connection.request(.startRecording(options)).status
        }
        let status = started ?? nil
        let warnings = status?.warnings ?? []
        for warning in warnings { printError("replay: warning: \(Format.service(warning))") }
        printOutput(options.outputPath)
        tell("Recording the screen", body: ([(options.outputPath as NSString).lastPathComponent] + warnings).joined(separator: "\n"))
    }

    private func stop() async throws {
        let final: SessionStatus?? = try await Daemon.withConnection(start: false) { connection in
            try await connection.request(.stopRecording).status
        }
        guard let status = final ?? nil else { return }
        printOutput(status.outputPath)
        if let error = status.error { throw error }
        tell("Screen recording saved", body: status.outputPath)
    }

    /// On stderr (when `stream` is 2) and, with --notify, as a desktop notification.
    private func tell(_ title: String, body: String?, stream: Int32 = 0, urgent: Bool = false) {
        if stream == 2 { printError("replay: \(title)\(body.map { ": \($0)" } ?? "")") }
        guard notify, let notifySend = Spawn.executable(named: "notify-send") else { return }
        let arguments = ["--app-name=Screen Recording", "--icon=org.openreplaykit.ScreenRecording",
                         "--urgency=\(urgent ? "critical" : "normal")", title] + (body.map { [$0] } ?? [])
        do throws(ReplayError) {
            let pid = try Spawn.start(notifySend, arguments: arguments, standardOutput: .file("/dev/null", append: true),
                                      standardError: .standardOutput, group: .newProcessGroup)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        } catch {
            printError("replay: could not run notify-send: \(error.message)")
        }
    }
}
