import ArgumentParser
import Foundation
import ReplayGtk

/// `replay-ui`: the system windows replayd shows on the person's display, each in a process of
/// its own that no app can draw over, answer or close. Each writes exactly one JSON object on one
/// line to its standard output and exits 0 (docs/ARCHITECTURE.md, "The system windows").
@main
struct ReplayUI: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-ui",
        abstract: "OpenReplayKit's system windows (started by replayd, not by people).",
        discussion: """
            replayd starts `replay-ui consent` to ask the person whether an app may record, and \
            `replay-ui preview` to let them trim, save, share or discard an app's recording. Each \
            prints one JSON line on standard output and exits 0.
            """,
        subcommands: [Consent.self, Preview.self])
}

struct Consent: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Asks whether an app may record the screen (and the microphone).",
        discussion: """
            Prints {"answer":"allow"} or {"answer":"deny"}. Return allows, Escape and closing the \
            window deny. The window's WM_CLASS is openreplaykit-consent.
            """)

    @Option(help: "The X11 display to show the prompt on (default: $DISPLAY).")
    var display: String?

    @Option(help: "The app's name, as the person knows it.")
    var appName: String

    @Option(help: "A PNG of the app's icon.")
    var appIcon: String?

    @Flag(help: "The app asks for the microphone too.")
    var microphone = false

    func validate() throws {
        guard !appName.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--app-name must not be empty") }
    }

    func run() throws {
        try MainActor.assumeIsolated {
            try startGtk(display: display, programName: "openreplaykit-consent")
            let prompt = ConsentPrompt(appName: appName, iconPath: appIcon, microphone: microphone)
            prompt.show()
            Gtk.run()
        }
    }
}

struct Preview: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Plays a recording and lets the person trim, save, share or discard it.",
        discussion: """
            Prints {"action":"saved","path":P}, {"action":"shared","path":P} or {"action":"cancelled"}. \
            Save (Ctrl+S) puts the movie, trimmed, in the save folder, named as `replay record` names \
            recordings; Share… saves it where the person chooses; Cancel (Escape) deletes it. In every \
            case the file given with --file is gone afterwards. The window's WM_CLASS is openreplaykit-preview.
            """)

    @Option(help: "The X11 display to show the preview on (default: $DISPLAY).")
    var display: String?

    @Option(help: "The recording (an MP4).")
    var file: String

    @Option(help: "The folder Save puts the movie in (the person's Videos folder).")
    var saveFolder: String

    func validate() throws {
        guard FileManager.default.isReadableFile(atPath: file) else { throw ValidationError("cannot read the recording \(file)") }
    }

    func run() throws {
        try MainActor.assumeIsolated {
            try startGtk(display: display, programName: "openreplaykit-preview")
            let window = try PreviewWindow(file: absolute(file), saveFolder: absolute(saveFolder))
            window.show()
            Gtk.run()
        }
    }
}

@MainActor
private func startGtk(display: String?, programName: String) throws {
    do {
        try Gtk.start(display: display, programName: programName)
    } catch {
        throw ValidationError("\(error.description): check --display and that the X server lets you connect (xhost, XAUTHORITY)")
    }
    Gtk.addStyleSheet(Style.css)
}

private func absolute(_ path: String) -> String {
    let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    return (full as NSString).standardizingPath
}

/// The one answer on standard output.
enum Answer {
    static func write(_ object: [String: String]) {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

enum Style {
    static let css = """
        .consent { padding: 8px; }
        .consent-title { font-size: 15pt; font-weight: bold; }
        .preview-picture { background-color: black; }
        .trim-label { min-width: 4em; }
        """
}
