import ArgumentParser
import ReplayIPC
import Foundation

/// `replay clip`: the person's instant replay, the last seconds of the screen kept in memory.
struct Clip: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Keep the last seconds of the screen in memory and save them on demand (instant replay).",
        discussion: """
            `replay clip start` makes replayd keep the last N seconds (at most 60) of the screen and \
            the system sound, encoded (a few MB, never raw pictures: `replay status` shows how much); \
            `replay clip save` writes them to an MP4 while the buffer goes on; `replay clip stop` \
            forgets them. A saved clip starts at a keyframe, so it can be up to 2 s longer than asked.

            Examples:
              replay clip start --seconds 30
              replay clip save                     # the whole buffer, to your Videos folder
              replay clip save --seconds 10 -o last-goal.mp4
              replay clip stop
            """,
        subcommands: [Start.self, Save.self, Stop.self])

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start keeping the last seconds of the screen.")

        @Option(parsing: .unconditional, help: ArgumentHelp("How many seconds to keep, 1 to 60.", valueName: "N"))
        var seconds: Double = 30

        @Flag(help: "Also keep the microphone.")
        var mic = false

        @Option(help: ArgumentHelp("The X display, such as :0. Default: the session's (Wayland's when WAYLAND_DISPLAY is set, else $DISPLAY).", valueName: "name"))
        var display: String?

        var resolvedDisplay: String? {
            if let display, !display.isEmpty { return display }
            return DesktopSession.current()?.displayName
        }

        func validate() throws {
            guard seconds >= 1, seconds <= ClipStartRequest.maximumSeconds else {
                throw ValidationError("--seconds must be between 1 and \(Int(ClipStartRequest.maximumSeconds)), not \(seconds).")
            }
            guard resolvedDisplay != nil else {
                throw ValidationError("no display: neither WAYLAND_DISPLAY nor DISPLAY is set. Run it in your desktop session, or pass --display (for example --display :0).")
            }
        }

        func run() async throws {
            try await reportingErrors {
                let folder = VideosFolder.path(environment: ProcessInfo.processInfo.environment)
                let options = RecordingOptions(outputPath: folder.hasPrefix("/") ? folder : "/", microphone: mic,
                                               audioRequired: mic, display: resolvedDisplay!)
                _ = try await Daemon.withConnection(start: true) { connection in
                    try await connection.request(ClipStartRequest(options: options, seconds: seconds))
                }
                printOutput("keeping the last \(Format.duration(seconds)) of display \(resolvedDisplay!): `replay clip save` writes them")
            }
        }
    }

    struct Save: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Save the last seconds to an MP4 (the buffer goes on); prints its path.")

        @Option(parsing: .unconditional, help: ArgumentHelp("How many of the kept seconds to save. Default: all of them.", valueName: "N"))
        var seconds: Double?

        @Option(name: [.customShort("o"), .customLong("output")],
                help: ArgumentHelp("The file (must not exist). Default: Screen Recording <date> at <time>.mp4 in your Videos folder.", valueName: "file"),
                completion: .file(extensions: ["mp4"]))
        var output: String?

        func validate() throws {
            if let seconds, !(seconds > 0 && seconds <= ClipStartRequest.maximumSeconds) {
                throw ValidationError("--seconds must be between 1 and \(Int(ClipStartRequest.maximumSeconds)), not \(seconds).")
            }
        }

        func run() async throws {
            try await reportingErrors {
                let path = try OutputPath.resolve(output)
                guard let clip = try await Daemon.withConnection(start: false, { connection in
                    try await connection.request(ClipSaveRequest(outputPath: path, seconds: seconds))
                }) else {
                    throw fail("no clip buffer is running: start one with `replay clip start`.")
                }
                printOutput(clip.path)
            }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop keeping the last seconds (what was kept is forgotten).")

        func run() async throws {
            try await reportingErrors {
                let stopped = try await Daemon.withConnection(start: false) { connection in
                    do {
                        return try await connection.request(ClipStopRequest()).status != nil
                    } catch let error as ReplayError where error.code == .noSession {
                        return false
                    }
                } ?? false
                if !stopped { printError("replay: no clip buffer is running.") }
            }
        }
    }
}
