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
            replayd starts `replay-ui consent` to ask the person whether an app may record, \
            `replay-ui preview` to let them trim, save, share or discard an app's recording, and \
            `replay-ui picker` to let them choose a broadcast service. Each prints one JSON line on \
            standard output and exits 0.
            """,
        subcommands: [Consent.self, Preview.self, Picker.self])
}

struct Picker: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lets the person choose a broadcast service (and the microphone), or cancel.",
        discussion: """
            Prints {"action":"start","identifier":ID,"microphone":true|false} or {"action":"cancelled"}. \
            Up and Down choose a service, Return starts, Escape and closing the window cancel, Space \
            toggles the microphone. FILE is a JSON list of {"identifier":…,"displayName":…,"iconPath":…|null}; \
            an empty list shows that no service is installed. The window's WM_CLASS is openreplaykit-picker.
            """)

    @Option(help: "The X11 display to show the picker on (default: $DISPLAY).")
    var display: String?

    @Option(help: ArgumentHelp("The services to offer: a JSON list of {identifier, displayName, iconPath}.", valueName: "file"))
    var services: String

    @Flag(help: "The microphone is on when the picker opens.")
    var microphone = false

    @Flag(help: "Hide the microphone switch (the microphone stays as --microphone set it).")
    var noMicrophoneButton = false

    func validate() throws {
        _ = try Self.read(services)
    }

    static func read(_ path: String) throws -> [PickerService] {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read the services file \(path)") }
        do {
            return try JSONDecoder().decode([PickerService].self, from: data)
        } catch {
            throw ValidationError("the services file \(path) is not a JSON list of {identifier, displayName, iconPath}: \(error)")
        }
    }

    func run() throws {
        let offered = try Self.read(services)
        try MainActor.assumeIsolated {
            try startGtk(display: display, programName: "openreplaykit-picker")
            let window = PickerWindow(services: offered, microphone: microphone, showsMicrophoneButton: !noMicrophoneButton)
            window.show()
            Gtk.run()
        }
    }
}

struct Consent: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Asks whether an app may record the screen (and the microphone).",
        discussion: """
            Prints {"answer":"allow"} or {"answer":"deny"}. Return allows, Escape and closing the \
            window deny. With --service it is the pairing prompt of an app's broadcast: it names the \
            app and the service. The window's WM_CLASS is openreplaykit-consent.
            """)

    @Option(help: "The display to show the prompt on: an X11 display, or wayland:NAME for a Wayland one (default: $DISPLAY).")
    var display: String?

    @Option(help: "The app's name, as the person knows it.")
    var appName: String

    @Option(help: "A PNG of the app's icon.")
    var appIcon: String?

    @Flag(help: "The app asks for the microphone too.")
    var microphone = false

    @Option(help: "The broadcast service the app asks to broadcast to (the pairing prompt).")
    var service: String?

    func validate() throws {
        if let service, service.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--service must not be empty") }
        guard !appName.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--app-name must not be empty") }
    }

    func run() throws {
        try MainActor.assumeIsolated {
            try startGtk(display: display, programName: "openreplaykit-consent")
            let prompt = ConsentPrompt(appName: appName, iconPath: appIcon, microphone: microphone, serviceName: service)
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

/// The one answer on standard output, in the types replayd decodes (`SystemWindowAnswer`).
enum Answer {
    static func write(_ answer: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(answer)) ?? Data("{}".utf8)
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

enum Style {
    static let css = """
        .consent { padding: 8px; }
        .consent-title { font-size: 15pt; font-weight: bold; }
        .preview-picture { background-color: black; }
        .trim-label { min-width: 4em; }
        .picker-list { border: 1px solid #c0bfbc; border-radius: 6px; }
        .picker-name { font-weight: bold; }
        .picker-identifier { font-size: 9pt; }
        """
}
