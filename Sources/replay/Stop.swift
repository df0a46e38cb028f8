import ArgumentParser
import ReplayIPC

struct Stop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop the running recording and wait until its file is finished (or, when nothing records, the broadcast).",
        discussion: """
            Works from any terminal. Prints the path of the finished file. When nothing is \
            recording it says so on stderr and exits with status 0.

            Examples:
              replay stop
              open "$(replay stop)"        # stop, then open the movie
            """)

    func run() async throws {
        try await reportingErrors {
            let outcome: SessionStatus?? = try await Daemon.withConnection(start: false) { connection in
                do {
                    return try await connection.request(.stopRecording).status
                } catch let error as ReplayError where error.code == .noSession {
                    // No recording: the broadcast, if one runs.
                    do {
                        return try await connection.request(StopBroadcastRequest()).status
                    } catch let error as ReplayError where error.code == .noSession || error.code == .badRequest {
                        return nil
                    }
                }
            }
            guard let status = outcome ?? nil else {
                printError("replay: nothing is recording or broadcasting.")
                return
            }
            if status.kind == .broadcast {
                printError("replay: the broadcast to \(status.service ?? "?") ended after \(Format.duration(status.elapsedSeconds)).")
            } else {
                printOutput(status.outputPath)
            }
            if let error = status.error { throw fail(error.message) }
        }
    }
}
