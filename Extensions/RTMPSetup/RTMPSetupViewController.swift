import Foundation
import OpenReplayKit
import ReplayGtk

/// The RTMP/SRT extension's setup window (GTK 4, WM_CLASS `openreplaykit-rtmp-setup`): the ingest's
/// **Server URL** (rtmp://, rtmps:// or srt://) and **Stream key**, prefilled from the extension's
/// app group (`org.openreplaykit.rtmp`, the shared keychain's role) and kept there when the person
/// starts, so that the next broadcast asks nothing new. **Start Broadcast** (Return) completes the
/// request with setup info `url` and `key`, which the upload extension reads in
/// `broadcastStarted(withSetupInfo:)`; **Cancel** (Escape, closing the window) cancels the broadcast.
final class RTMPSetupViewController: RPBroadcastSetupViewController {
    static let urlKey = "url"
    static let streamKeyKey = "key"

    override func viewDidLoad() {
        // On the main thread (the main actor's), which GTK's loop takes until the person is done.
        do throws(Gtk.StartError) {
            try Gtk.start(display: nil, programName: "openreplaykit-rtmp-setup")
        } catch {
            extensionContext?.cancelRequest(withError: NSError(domain: "org.openreplaykit.rtmp", code: 2, userInfo: [
                NSLocalizedFailureReasonErrorKey: "the RTMP setup window cannot open: \(error.description). Give the settings with --setup url=… --setup key=… instead.",
            ]))
            return
        }
        var application = ("", "")
        loadBroadcastingApplicationInfo { bundleID, displayName, _ in application = (bundleID, displayName) }
        let window = RTMPSetupWindow(applicationName: application.1.isEmpty ? application.0 : application.1,
                                     saved: Self.savedSettings()) { [self] settings in
            if let settings {
                Self.save(settings)
                userDidFinishSetup(broadcastURL: nil, setupInfo: [Self.urlKey: settings.url as NSString,
                                                                  Self.streamKeyKey: settings.key as NSString])
            } else {
                userDidCancelSetup()
            }
        }
        window.show()
        Gtk.run()
    }

    /// The group the manifest names (given by replayd), else the extension's usual one.
    static var group: RPAppGroup? {
        try? RPAppGroup(identifier: ProcessInfo.processInfo.environment["ORK_APP_GROUP"] ?? "org.openreplaykit.rtmp")
    }

    static func savedSettings() -> RTMPSettings {
        let group = group
        return RTMPSettings(url: (try? group?.string(forKey: urlKey)) ?? "", key: (try? group?.string(forKey: streamKeyKey)) ?? "")
    }

    static func save(_ settings: RTMPSettings) {
        do {
            guard let group else { return }
            try group.set(settings.url, forKey: urlKey)
            try group.set(settings.key, forKey: streamKeyKey)
        } catch {
            FileHandle.standardError.write(Data("org.openreplaykit.rtmp.setup: the settings are not kept for next time: \(error)\n".utf8))
        }
    }
}

struct RTMPSettings: Equatable {
    var url: String
    var key: String

    /// Why these settings cannot start a broadcast, nil when they can.
    var problem: String? {
        let trimmed = url.trimmingCharacters(in: .whitespaces)
        guard let parsed = URL(string: trimmed), let scheme = parsed.scheme?.lowercased(),
              ["rtmp", "rtmps", "srt"].contains(scheme), let host = parsed.host, !host.isEmpty else {
            return "Enter the server's address, starting with rtmp://, rtmps:// or srt://."
        }
        if scheme != "srt", key.trimmingCharacters(in: .whitespaces).isEmpty {
            return "Enter the stream key your service gave you."
        }
        return nil
    }
}

/// The window itself: two fields, a line for what is wrong, Cancel and Start Broadcast.
@MainActor
final class RTMPSetupWindow {
    private let window = Window(title: "RTMP Broadcast", width: 460)
    private let urlField: Entry
    private let keyField: Entry
    private let problemLabel = Label("", wraps: true)
    private let cancelButton = Button("Cancel")
    private let startButton = Button("Start Broadcast")
    private let done: @MainActor (RTMPSettings?) -> Void
    private var answered = false

    init(applicationName: String, saved: RTMPSettings, done: @escaping @MainActor (RTMPSettings?) -> Void) {
        self.done = done
        urlField = Entry(text: saved.url, placeholder: "rtmp://live.example.com/app")
        keyField = Entry(text: saved.key, placeholder: "the stream key from your service")
        keyField.isSecret = true
        window.isResizable = false

        let column = Box(.vertical, spacing: 10)
        column.setMargins(24)
        let title = Label("Broadcast with RTMP")
        title.addStyleClass("title-2")
        title.justify(.center)
        column.append(title)
        let hint = Label(applicationName.isEmpty ? "Send the screen to an RTMP or SRT server."
                                                 : "Send the screen, \(applicationName) in front, to an RTMP or SRT server.", wraps: true)
        hint.justify(.center)
        hint.addStyleClass("dim-label")
        column.append(hint)

        let urlLabel = Label("Server URL")
        urlLabel.justify(.left)
        column.append(urlLabel)
        column.append(urlField)
        let keyLabel = Label("Stream key")
        keyLabel.justify(.left)
        column.append(keyLabel)
        column.append(keyField)
        problemLabel.justify(.left)
        problemLabel.addStyleClass("error")
        column.append(problemLabel)

        let buttons = Box(.horizontal, spacing: 12)
        buttons.isHomogeneous = true
        buttons.append(cancelButton)
        startButton.addStyleClass("suggested-action")
        buttons.append(startButton)
        column.append(buttons)
        window.setChild(column)
        connect()
    }

    private func connect() {
        cancelButton.onClick { [weak self] in self?.finish(start: false) }
        startButton.onClick { [weak self] in self?.finish(start: true) }
        urlField.onChange { [weak self] in self?.problemLabel.text = "" }
        keyField.onChange { [weak self] in self?.problemLabel.text = "" }
        window.onKeyPress(beforeChildren: true) { [weak self] key, _ in
            switch key {
            case .returnKey, .keypadEnter:
                self?.finish(start: true)
                return true
            case .escape:
                self?.finish(start: false)
                return true
            default:
                return false
            }
        }
        window.onCloseRequest { [weak self] in
            self?.finish(start: false)
            return false
        }
        window.staysAboveOnceMapped()
    }

    func show() {
        // The first field still empty has the focus.
        window.setFocus(!urlField.text.isEmpty && keyField.text.isEmpty ? keyField : urlField)
        window.present()
    }

    private func finish(start: Bool) {
        guard !answered else { return }
        let settings = RTMPSettings(url: urlField.text.trimmingCharacters(in: .whitespaces), key: keyField.text.trimmingCharacters(in: .whitespaces))
        if start, let problem = settings.problem {
            problemLabel.text = problem
            return
        }
        answered = true
        window.destroy()
        Gtk.quit()
        done(start ? settings : nil)
    }
}
