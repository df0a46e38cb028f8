import ArgumentParser
import Foundation
import ReplayGtk

/// SketchPad: a small GTK 4 app that records, captures and protects itself with OpenReplayKit, as
/// an iOS app does with ReplayKit. Draw with the mouse (each stroke plays a tone); Record / Stop
/// shows the system preview; Capture shows the app's own live pictures and sound levels; Clip keeps
/// the last 15 s in memory and saves them; Protected blanks the window in every recording.
@main
struct SketchPad: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sketchpad",
        abstract: "OpenReplayKit's example app: draw, record yourself, capture yourself, keep a clip.",
        discussion: """
            Keys: Ctrl+R Record, Ctrl+T Stop, Ctrl+K Capture on/off, Ctrl+L Clip (start the buffer, then \
            save the last 15 s), Ctrl+P Protected. What happens is also printed, one line an event \
            ("sketchpad: saved PATH"), for scripts.
            """)

    @Option(help: "The X11 display (default: $DISPLAY).")
    var display: String?

    @Option(help: "The pitch of a stroke's tone, in Hz.")
    var tone: Double = 660

    @Option(help: "Where Clip saves (default: $XDG_VIDEOS_DIR, else ~/Videos).")
    var clipFolder: String?

    func validate() throws {
        guard tone >= 50 && tone <= 12_000 else { throw ValidationError("--tone must be between 50 and 12000 Hz") }
    }

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let folder = clipFolder ?? environment["XDG_VIDEOS_DIR"] ?? (NSHomeDirectory() + "/Videos")
        let player = StrokeTone(frequency: tone)
        player.start()
        try MainActor.assumeIsolated {
            do {
                try Gtk.start(display: display, programName: "sketchpad")
            } catch {
                throw ValidationError("\(error): check --display and that the X server lets you connect")
            }
            Gtk.addStyleSheet(SketchWindow.css)
            let window = SketchWindow(tone: player, clipFolder: folder)
            window.show()
            Gtk.run()
        }
        player.stop()
    }
}

/// One line on standard output per event, unbuffered (scripts and tests follow them).
func announce(_ line: String) {
    FileHandle.standardOutput.write(Data("sketchpad: \(line)\n".utf8))
}
