import ArgumentParser
import ReplayIPC

struct Mic: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mute or unmute the microphone of the running recording.",
        discussion: """
            The microphone track keeps its timing: while muted it records silence. Only a \
            recording started with `replay record --mic` has a microphone track; without one, or \
            with nothing recording, `replay mic` says so and exits 1.

            Examples:
              replay mic off
              replay mic on
            """)

    enum Setting: String, ExpressibleByArgument, CaseIterable {
        case on, off
    }

    @Argument(help: "on or off.")
    var setting: Setting

    func run() async throws {
        try await reportingErrors {
            let status: SessionStatus?? = try await Daemon.withConnection(start: false) { connection in
                try await connection.request(.setMicrophone(on: setting == .on)).status
            }
            guard status != nil else {
                throw fail("nothing is recording: start a recording with `replay record --mic`.")
            }
            printError("replay: microphone \(setting.rawValue).")
        }
    }
}
