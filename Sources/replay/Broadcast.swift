import ArgumentParser
import ReplayIPC
import Foundation
#if canImport(Glibc)
import Glibc
#endif

struct Broadcast: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Broadcast the screen (and its sound, and the microphone with --mic) live through a broadcast service.",
        discussion: """
            A broadcast service is an upload extension (`replay services` lists them): replayd \
            starts it, hands it the screen's pictures and sound, and it encodes and uploads them. \
            The broadcast runs until `replay stop`, Ctrl-C, SIGTERM, or the extension ends it; \
            the broadcast URL is printed on stdout as soon as the service gives one, and when the \
            broadcast ends in an error its reason is printed on stderr and the exit status is 1. \
            The extension is told which application has the focus each time it changes. \
            `replay broadcast pause` and `replay broadcast resume` (from another terminal) pause it.

            Without --service, replayd shows the picker: a window listing the installed services \
            with a microphone switch (arrow keys and Return choose, Escape cancels).

            A service with a setup extension (`replay services` says "setup: ID") first shows \
            its own window (sign-in, server, stream key); closing it, or Ctrl-C, cancels the \
            broadcast. --setup passes the service's settings where no setup window is wanted \
            (scripts, tests): each KEY=VALUE arrives in broadcastStarted(withSetupInfo:) as a \
            string, and the setup extension is not asked. A password or a stream key does not \
            belong on the command line, which every user of the machine can read while replay \
            runs: give it with --setup-file, from a file of KEY=VALUE lines or from standard input.

            Examples:
              replay broadcast --service org.openreplaykit.rtmp --setup url=rtmp://localhost/live --setup-file ~/.config/stream-key
              printf 'key=%s\\n' "$KEY" | replay broadcast --service org.openreplaykit.rtmp --setup url=rtmp://localhost/live --setup-file -
              replay broadcast --service org.openreplaykit.rtmp --mic --title "Friday build"
              replay status                 # the service, URL and service info
              replay stop
            """,
        subcommands: [Start.self, Pause.self, Resume.self],
        defaultSubcommand: Start.self)

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "start", abstract: "Start a broadcast (the default).")

        @Option(help: ArgumentHelp("The service's identifier (see `replay services`). Without it, the picker window asks.", valueName: "id"))
        var service: String?

        @Flag(help: "Also send the microphone (the default PulseAudio source).")
        var mic = false

        @Option(help: ArgumentHelp("The broadcast's title (given to the service as setup info `title`).", valueName: "text"))
        var title: String?

        @Option(name: .customLong("setup"), parsing: .singleValue,
                help: ArgumentHelp("A setting for the service, KEY=VALUE (repeat for several).", valueName: "KEY=VALUE"))
        var setup: [String] = []

        @Option(name: .customLong("setup-file"),
                help: ArgumentHelp("Settings for the service from a file of KEY=VALUE lines (# starts a comment), or - for standard input: the place for a password or a stream key. --setup wins over the file.",
                                   valueName: "file"))
        var setupFile: String?

        @Option(help: ArgumentHelp("The X display to broadcast, such as :0. Default: $DISPLAY.", valueName: "name"))
        var display: String?

        @Option(parsing: .unconditional, help: ArgumentHelp("Frames per second, 1 to 120.", valueName: "N"))
        var fps: Int = 30

        var resolvedDisplay: String? {
            if let display, !display.isEmpty { return display }
            return DesktopSession.current()?.displayName
        }

        /// The file's settings, then the command line's over them.
        func setupInfo() throws(ReplayError) -> [String: String] {
            var info = try setupFile.map(SetupFile.read) ?? [:]
            for pair in setup {
                guard let equals = pair.firstIndex(of: "=") else { continue }
                info[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
            }
            return info
        }

        func validate() throws {
            for pair in setup {
                guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                    throw ValidationError("--setup \"\(pair)\" is not KEY=VALUE: write for example --setup url=rtmp://localhost/live.")
                }
                let key = String(pair[..<equals])
                if SetupFile.looksSecret(key) {
                    printError("replay: warning: --setup \(key)=… can be read by every user of this machine while replay runs (ps, /proc). Put it in a file for --setup-file FILE, or give it on standard input with --setup-file -.")
                }
            }
            do throws(ReplayError) {
                try RecordingOptions.check(framesPerSecond: fps, durationSeconds: nil, region: nil, display: resolvedDisplay)
            } catch {
                throw ValidationError(error.message)
            }
        }

        func run() async throws {
            try await reportingErrors {
                let options = BroadcastOptions(service: service, display: resolvedDisplay!, microphone: mic, framesPerSecond: fps,
                                               title: title, setupInfo: try setupInfo())
                let signals = SignalEvents([SIGINT, SIGTERM, SIGHUP])
                let outcome = try await Daemon.withConnection(start: true) { connection in
                    try await broadcast(options, connection: connection, signals: signals)
                }
                withExtendedLifetime(signals) {}
                if let error = outcome ?? nil { throw fail(error.message) }
            }
        }

        private func broadcast(_ options: BroadcastOptions, connection: ControlConnection, signals: SignalEvents) async throws -> ReplayError? {
            let signalStream = signals.stream
            return try await withThrowingTaskGroup(of: Void.self) { group in
                // Listening from the start: Ctrl-C while the picker or a setup window is open cancels the start too.
                group.addTask {
                    var count = 0
                    for await signal in signalStream {
                        count += 1
                        if count == 1 {
                            printError("replay: finishing the broadcast (\(SignalEvents.name(signal)))…")
                            // On a connection of its own: this one's requests are answered in order, and
                            // its start may still wait for the setup window.
                            _ = try? await Daemon.withConnection(start: false) { try await $0.request(StopBroadcastRequest()) }
                        } else {
                            Glibc.exit(130)
                        }
                    }
                }
                defer { group.cancelAll() }
                let started = try await connection.request(StartBroadcastRequest(options: options)).status
                for warning in started?.warnings ?? [] { printError("replay: warning: \(Format.service(warning))") }
                printError("replay: broadcasting to \(Format.service(started?.service ?? options.service ?? "?")) (replay stop ends it)")
                var printedURL = started?.broadcastURL
                if let printedURL { printOutput(Format.service(printedURL)) }
                var lastInfo = started?.serviceInfo
                var result: ReplayError? = ReplayError(.daemonUnavailable,
                    "replayd stopped during the broadcast (its log: \(ControlPaths.forCurrentUser().logFile)).")
                for await event in connection.events {
                    if let update = event.decode(BroadcastUpdatedEvent.self) {
                        if let url = update.broadcastURL, url != printedURL {
                            printedURL = url
                            printOutput(Format.service(url))
                        }
                        if let info = update.serviceInfo, info != lastInfo {
                            lastInfo = info
                            printError("replay: service: " + Format.serviceInfo(info))
                        }
                    } else if let ended = event.decode(SessionEndedEvent.self), ended.status.kind == .broadcast {
                        result = ended.error
                        if let dropped = ended.status.extensionFramesDropped, dropped > 0 {
                            printError("replay: \(dropped) pictures were dropped because the extension was not ready for them.")
                        }
                        break
                    } else if let goodbye = event.decode(GoodbyeEvent.self) {
                        result = goodbye.error
                        break
                    }
                }
                return result
            }
        }
    }

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pause the running broadcast (the service gets nothing until resume).")
        func run() async throws {
            try await reportingErrors {
                let answered: SessionStatus?? = try await Daemon.withConnection(start: false) { try await $0.request(PauseBroadcastRequest()).status }
                if answered == nil { throw fail("no broadcast is running.") }
            }
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume the paused broadcast.")
        func run() async throws {
            try await reportingErrors {
                let answered: SessionStatus?? = try await Daemon.withConnection(start: false) { try await $0.request(ResumeBroadcastRequest()).status }
                if answered == nil { throw fail("no broadcast is running.") }
            }
        }
    }
}

/// `--setup-file`: a service's settings, a password among them, kept off the command line.
enum SetupFile {
    /// KEY=VALUE lines from `path` (`-`: standard input); blank lines and `#` comments skipped.
    static func read(_ path: String) throws(ReplayError) -> [String: String] {
        let text: String
        if path == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            var info = stat()
            guard stat(path, &info) == 0, let contents = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw ReplayError(.badRequest, "cannot read --setup-file \(path): \(String(cString: strerror(errno))).")
            }
            if info.st_mode & 0o077 != 0 {
                printError("replay: warning: \(path) can be read by other users; `chmod 600 \(path)` keeps its secrets yours.")
            }
            text = contents
        }
        var settings: [String: String] = [:]
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard let equals = trimmed.firstIndex(of: "="), equals != trimmed.startIndex else {
                throw ReplayError(.badRequest, "--setup-file \(path == "-" ? "(standard input)" : path), line \(number + 1), is not KEY=VALUE: write for example password=… on a line of its own.")
            }
            settings[String(trimmed[..<equals])] = String(trimmed[trimmed.index(after: equals)...])
        }
        return settings
    }

    /// A key whose value is likely a secret: it belongs in a file, not on the command line.
    static func looksSecret(_ key: String) -> Bool {
        let key = key.lowercased()
        return ["password", "passwd", "secret", "token"].contains { key.contains($0) } || key.hasSuffix("key")
    }
}
