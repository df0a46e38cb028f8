import ArgumentParser
import ReplayIPC
import Foundation

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what is recording: file, elapsed time, frames, drops, microphone; the broadcast (service, URL, service info); the clip buffer and its memory; apps recording themselves.",
        discussion: """
            When nothing is recording it prints "nothing is recording" and exits with status 0 \
            (with --json: {"state":"idle"}). It never starts replayd.

            Examples:
              replay status
              replay status --json | jq -r .outputPath
            """)

    @Flag(help: "Print the status as one JSON object (the protocol's SessionStatus).")
    var json = false

    func run() async throws {
        try await reportingErrors {
            let answer: (SessionStatus?, [SessionStatus])? = try await Daemon.withConnection(start: false) { connection in
                let status = try await connection.request(.status).status
                // Other sessions (the clip buffer, apps'): a replayd without them answers bad-request.
                let others = (try? await connection.request(SessionsRequest()).sessions) ?? []
                return (status, others.filter { $0.kind != .recording })
            }
            let others = answer?.1 ?? []
            if !json {
                for other in others { printOutput(Self.describeOther(other)) }
            }
            // With nothing recording, the broadcast (if one runs) is what `--json` prints.
            guard let status = answer?.0 ?? (json ? others.first { $0.kind == .broadcast } : nil) else {
                if json || others.isEmpty { printOutput(json ? #"{"state":"idle"}"# : "nothing is recording") }
                return
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                printOutput(String(decoding: try encoder.encode(status), as: UTF8.self))
            } else {
                printOutput(Self.describe(status))
            }
        }
    }

    /// One line for a clip buffer or an app's session.
    static func describeOther(_ s: SessionStatus) -> String {
        if s.kind == .broadcast {
            var lines = ["\(s.paused == true ? "broadcast paused" : s.state == .running ? "broadcasting" : s.state.rawValue) to \(s.service ?? "?"), display \(s.display), \(Format.duration(s.elapsedSeconds)) (session \(s.id))"]
            lines.append("  broadcast URL: \(s.broadcastURL.map(Format.service) ?? "not given yet")")
            if let info = s.serviceInfo, !info.isEmpty { lines.append("  service info: " + Format.serviceInfo(info)) }
            if let dropped = s.extensionFramesDropped, dropped > 0 { lines.append("  \(dropped) pictures dropped (the extension was not ready)") }
            return lines.joined(separator: "\n")
        }
        if s.kind == .clip {
            return "clip buffer: keeping the last \(Format.duration(s.clipSeconds ?? 0)) of display \(s.display), holding \(Format.duration(s.bufferedSeconds ?? 0)) in \(Format.bytes(s.bytesWritten)) of memory (session \(s.id))"
        }
        let what = s.kind == .appClip ? "buffering clips" : s.kind == .appRecording ? "recording itself"
            : s.kind == .appBroadcast ? "broadcasting itself to \(s.service ?? "?")\(s.paused == true ? " (paused)" : "")" : s.kind.rawValue
        return "app pid \(s.clientPID): \(what) on display \(s.display), \(Format.duration(s.elapsedSeconds)) (session \(s.id))"
    }

    static func describe(_ s: SessionStatus) -> String {
        var lines = ["\(s.state == .running ? "recording" : s.state.rawValue) to \(s.outputPath)"]
        var video = "  display \(s.display)"
        if s.width > 0 { video += ", \(s.width)x\(s.height)" }
        video += " at \(s.framesPerSecond) fps"
        if !s.encoder.isEmpty { video += ", \(s.encoder)" }
        lines.append(video)
        lines.append("  elapsed \(Format.duration(s.elapsedSeconds)), \(s.framesWritten) frames written, \(s.framesDropped) dropped, \(Format.bytes(s.bytesWritten))")
        let mic = s.microphoneRecorded ? "microphone \(s.microphoneOn ? "on" : "off (muted)")" : "no microphone"
        lines.append("  \(mic), \(s.systemAudioRecorded ? "system audio recorded" : "no system audio")")
        lines.append("  session \(s.id), started by pid \(s.clientPID)")
        for warning in s.warnings { lines.append("  warning: \(Format.service(warning))") }
        return lines.joined(separator: "\n")
    }
}

enum Format {
    /// Text a service, an extension or a viewer wrote, on one line whatever it holds.
    static func service(_ text: String) -> String { TerminalText.escaped(text) }

    /// A service's info (`updateServiceInfo`: chat, viewers…) as `key=value, …`, sorted, one line.
    static func serviceInfo(_ info: [String: String]) -> String {
        info.sorted { $0.key < $1.key }.map { "\(service($0.key))=\(service($0.value))" }.joined(separator: ", ")
    }

    /// `m:ss`, or `h:mm:ss` from an hour on.
    static func duration(_ seconds: Double) -> String {
        let s = max(0, Int(seconds))
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return s >= 3600 ? "\(s / 3600):\(two(s / 60 % 60)):\(two(s % 60))" : "\(s / 60):\(two(s % 60))"
    }

    static func bytes(_ count: Int64) -> String {
        let value = Double(count)
        if value >= 1e9 { return String(format: "%.2f GB", value / 1e9) }
        if value >= 1e6 { return String(format: "%.1f MB", value / 1e6) }
        if value >= 1e3 { return String(format: "%.0f kB", value / 1e3) }
        return "\(count) B"
    }
}
