import ArgumentParser
import ReplayIPC
import Foundation
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

struct Record: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record the screen (and the system sound, and the microphone with --mic) to an MP4 file.",
        discussion: """
            The recording runs until --duration has passed, `replay stop` (from any terminal), \
            Ctrl-C, SIGTERM, or a click on the red indicator at the top-right of the screen; the \
            file is finished cleanly in each case, and its path is printed on stdout (and on \
            stderr how many frames were dropped, if any). On a terminal a status line shows the \
            elapsed time, file size, frame rate, dropped frames and the microphone. A second \
            Ctrl-C leaves at once (replayd still finishes the file).

            The default file is "Screen Recording YYYY-MM-DD at HH.MM.SS.mp4" in your Videos \
            folder: $XDG_VIDEOS_DIR, else the XDG_VIDEOS_DIR line of ~/.config/user-dirs.dirs (what \
            desktops write, e.g. ~/Filme), else ~/Videos; a name already taken gets (2), (3) and so on. \
            The file is fragmented MP4 (H.264 + AAC): even if replayd is killed it plays, missing \
            at most the last second. Without a PulseAudio server the recording is video only (and \
            says so); with --mic it is refused.

            Quality: medium (default) is libx264's veryfast preset, what OBS uses for screen \
            content; low is ultrafast (least CPU, bigger files); high is faster with a lower CRF \
            (sharper text, about 1.5x the CPU of medium).

            Examples:
              replay record                        # whole screen and sound
              replay record --duration 30 -o talk.mp4
              replay record --mic --separate-audio-tracks
              replay record --mic --no-system-audio   # microphone only
              replay record --display :1 --region 1280x720+100+50 --fps 60
              replay record --quality low --encoder x264
              REC=$(replay record --duration 5) && ffprobe "$REC"
            """)

    @Option(name: [.customShort("o"), .customLong("output")],
            help: ArgumentHelp("The movie file (must not exist; MP4 whatever its extension). Default: Screen Recording <date> at <time>.mp4 in your Videos folder (see above).", valueName: "file"),
            completion: .file(extensions: ["mp4"]))
    var output: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Stop by itself after this many seconds (decimals allowed).", valueName: "seconds"))
    var duration: Double?

    @Flag(help: "Also record the microphone (the default PulseAudio source).")
    var mic = false

    @Flag(name: .customLong("no-system-audio"), help: "Leave out what the computer plays (the default sink's monitor).")
    var noSystemAudio = false

    @Option(help: ArgumentHelp("The X display to record, such as :0. Default: the session's: on Wayland (WAYLAND_DISPLAY set) the desktop's screen-cast portal, which asks which screen to share the first time; else $DISPLAY.", valueName: "name"))
    var display: String?

    @Option(help: ArgumentHelp("Record only this part of the screen, as WxH+X+Y (e.g. 1280x720+0+0). An odd width or height loses its last column or row (H.264 needs even sizes).", valueName: "WxH+X+Y"))
    var region: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Frames per second, 1 to 120.", valueName: "N"))
    var fps: Int = 30

    @Option(help: ArgumentHelp("low, medium or high (see Quality above).", valueName: "level"))
    var quality: String = Quality.medium.rawValue

    @Option(help: ArgumentHelp("auto (VA-API where it works, else x264), x264 or vaapi.", valueName: "name"))
    var encoder: String = EncoderChoice.auto.rawValue

    @Flag(name: .customLong("separate-audio-tracks"), help: "Keep system sound and microphone on two audio tracks instead of one mix (first the system sound, then the microphone, each named so).")
    var separateAudioTracks = false

    // MARK: validation

    var resolvedDisplay: String? {
        if let display, !display.isEmpty { return display }
        return DesktopSession.current()?.displayName
    }

    func validate() throws {
        var parsedRegion: Region?
        if let region {
            guard let parsed = Region(geometry: region) else {
                throw ValidationError("--region \"\(region)\" is not WxH+X+Y: write for example 1280x720+0+0 (width x height + left + top, in pixels).")
            }
            parsedRegion = parsed
        }
        do throws(ReplayError) {
            try RecordingOptions.check(framesPerSecond: fps, durationSeconds: duration, region: parsedRegion, display: resolvedDisplay)
        } catch {
            throw ValidationError(error.message)
        }
        guard Quality(rawValue: quality) != nil else {
            throw ValidationError("unknown --quality \"\(quality)\": use low, medium or high.")
        }
        guard EncoderChoice(rawValue: encoder) != nil else {
            throw ValidationError("unknown --encoder \"\(encoder)\": use auto, x264 or vaapi.")
        }
        if let output, output.isEmpty || output.hasSuffix("/") {
            throw ValidationError("-o needs a file name, not a folder: write for example -o ~/Videos/demo.mp4.")
        }
    }

    // MARK: run

    func run() async throws {
        try await reportingErrors {
            let options = RecordingOptions(
                outputPath: try OutputPath.resolve(output),
                durationSeconds: duration, microphone: mic, systemAudio: !noSystemAudio, audioRequired: mic,
                display: resolvedDisplay!, region: region.flatMap(Region.init(geometry:)), framesPerSecond: fps,
                quality: Quality(rawValue: quality)!, encoder: EncoderChoice(rawValue: encoder)!,
                separateAudioTracks: separateAudioTracks)
            // From now on Ctrl-C, SIGTERM and SIGHUP ask replayd to stop instead of killing us.
            let signals = SignalEvents([SIGINT, SIGTERM, SIGHUP])
            let outcome = try await Daemon.withConnection(start: true) { connection in
                try await record(options, connection: connection, signals: signals)
            }
            withExtendedLifetime(signals) {}
            guard let (final, error) = outcome else { return }
            if let final {
                printOutput(final.outputPath)
                if final.framesDropped > 0 {
                    printError("replay: \(final.framesDropped) of \(final.framesWritten + final.framesDropped) frames were dropped: "
                        + "the machine was too busy to capture or encode them all. A lower --fps, a --region or --quality low costs less.")
                }
            } else if FileManager.default.fileExists(atPath: options.outputPath) {
                printOutput(options.outputPath)
            }
            if let error { throw fail(error.message) }
        }
    }

    private func record(_ options: RecordingOptions, connection: ControlConnection,
                        signals: SignalEvents) async throws -> (SessionStatus?, ReplayError?) {
        let started = try await connection.request(.startRecording(options)).status
        for warning in started?.warnings ?? [] { printError("replay: warning: \(Format.service(warning))") }
        let line = StatusLine(enabled: isatty(2) == 1)
        if let started { line.show(started) }

        let signalStream = signals.stream
        return await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var count = 0
                for await signal in signalStream {
                    count += 1
                    if count == 1 {
                        line.note("stopping (\(SignalEvents.name(signal))): finishing the file…")
                        _ = try? await connection.request(.stopRecording)
                    } else {
                        line.clear()
                        printError("replay: leaving now; replayd finishes \(options.outputPath) by itself (see `replay status`).")
                        Glibc.exit(130)
                    }
                }
            }
            var result: (SessionStatus?, ReplayError?) = (nil, ReplayError(.daemonUnavailable,
                "replayd stopped during the recording (its log: \(ControlPaths.forCurrentUser().logFile), or `journalctl --user -u replayd` when systemd runs it). The file holds what was written until then."))
            // The events this command knows; others (from a newer replayd) are ignored.
            for await event in connection.events {
                if let update = event.decode(StatusEvent.self) {
                    line.show(update.status)
                } else if let ended = event.decode(SessionEndedEvent.self) {
                    result = (ended.status, ended.error)
                    break
                } else if let goodbye = event.decode(GoodbyeEvent.self) {
                    result = (nil, goodbye.error)
                    break
                }
            }
            group.cancelAll()
            line.clear()
            // What the end adds to the start's warnings ("stopped by the person from the desktop's …").
            for warning in result.0?.warnings ?? [] where !(started?.warnings ?? []).contains(warning) {
                printError("replay: \(Format.service(warning))")
            }
            return result
        }
    }
}

// MARK: - the output file

enum OutputPath {
    /// An absolute path that does not exist yet in a writable folder. The default: in the Videos
    /// folder (`VideosFolder`: `$XDG_VIDEOS_DIR`, else the one in `user-dirs.dirs`, else `~/Videos`,
    /// created when missing), named for the time, with " (2)", " (3)"… added when a recording of
    /// the same second is there already.
    static func resolve(_ given: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                        now: Date = Date()) throws(ReplayError) -> String {
        var path: String
        if let given {
            path = absolute(given)
        } else {
            let folder = absolute(VideosFolder.path(environment: environment))
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            } catch {
                let reason = error.localizedDescription.trimmingCharacters(in: CharacterSet(charactersIn: ". "))
                throw ReplayError(.outputNotWritable, "cannot create your Videos folder \(folder): \(reason). Pass -o with a file in a folder you can write to, or set XDG_VIDEOS_DIR.")
            }
            path = VideosFolder.unusedRecordingPath(in: folder, at: now)
        }
        let folder = (path as NSString).deletingLastPathComponent
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            throw ReplayError(.outputExists, isFolder.boolValue
                ? "\(path) is a folder: pass -o with a file name inside it."
                : "\(path) already exists: choose another name with -o, or remove it first.")
        }
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw ReplayError(.outputNotWritable, "the folder \(folder) does not exist: create it (mkdir -p \"\(folder)\") or choose another -o.")
        }
        guard access(folder, W_OK | X_OK) == 0 else {
            throw ReplayError(.outputNotWritable, "cannot write in \(folder) (\(String(cString: strerror(errno)))): choose another -o.")
        }
        return path
    }

    static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        return (full as NSString).standardizingPath
    }
}

// MARK: - the live status line

/// One line on stderr, redrawn in place, only on a terminal.
final class StatusLine: Sendable {
    private let enabled: Bool
    /// (elapsed seconds, frames written) of the last ~2 s: the frame rate is measured over them.
    private let samples = Mutex<[(elapsed: Double, frames: Int)]>([])

    init(enabled: Bool) { self.enabled = enabled }

    func show(_ s: SessionStatus) {
        guard enabled else { return }
        let fps: Double = samples.withLock { samples in
            samples.append((s.elapsedSeconds, s.framesWritten))
            samples.removeAll { s.elapsedSeconds - $0.elapsed > 2.1 }
            guard let first = samples.first, s.elapsedSeconds - first.elapsed >= 0.4 else { return 0 }
            return Double(s.framesWritten - first.frames) / (s.elapsedSeconds - first.elapsed)
        }
        let mic = s.microphoneRecorded ? (s.microphoneOn ? "mic on" : "mic off") : "no mic"
        let state = s.state == .running ? "\u{1B}[31m●\u{1B}[0m REC" : s.state.rawValue
        write("\(state) \(Format.duration(s.elapsedSeconds))  \(Format.bytes(s.bytesWritten))  \(String(format: "%.1f", fps)) fps  \(s.framesDropped) dropped  \(mic)")
    }

    func note(_ text: String) {
        if enabled { write(text) } else { printError("replay: \(text)") }
    }

    func clear() {
        guard enabled else { return }
        var text = "\r\u{1B}[2K"
        text.withUTF8 { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }

    private func write(_ text: String) {
        var line = "\r\u{1B}[2K" + text
        line.withUTF8 { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

// MARK: - signals

/// Turns signals into an async sequence (they no longer kill the process while this lives).
final class SignalEvents {
    let stream: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    init(_ signals: [Int32]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        self.stream = stream
        self.sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
    }

    deinit {
        for source in sources { source.cancel() }
    }

    static func name(_ number: Int32) -> String {
        switch number {
        case SIGINT: "Ctrl-C"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(number)"
        }
    }
}
