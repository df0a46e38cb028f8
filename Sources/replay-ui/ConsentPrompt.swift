import Foundation
import ReplayGtk
import ReplayIPC

/// The consent prompt, worded as iOS's: "Allow “NAME” to record the screen?" (for an app's broadcast,
/// the pairing: "Allow “NAME” to broadcast itself to “SERVICE”?"), with the app's icon,
/// what it means, and **Don't Allow** / **Allow**. Return allows and Escape denies whichever button
/// has the focus (a key handler that sees keys before the buttons do); closing the window denies.
/// The focus starts on Don't Allow, the safe choice for Space.
@MainActor
final class ConsentPrompt {
    private let window: Window
    private let deny = Button("Don’t Allow")
    private let allow = Button("Allow")
    private var answered = false

    init(appName: String, iconPath: String?, microphone: Bool, serviceName: String? = nil) {
        let question: String
        if let serviceName {
            question = microphone
                ? "Allow “\(appName)” to broadcast itself and the microphone to “\(serviceName)”?"
                : "Allow “\(appName)” to broadcast itself to “\(serviceName)”?"
        } else {
            question = microphone
                ? "Allow “\(appName)” to record the screen and the microphone?"
                : "Allow “\(appName)” to record the screen?"
        }
        window = Window(title: question, width: 420)
        window.isResizable = false

        let column = Box(.vertical, spacing: 12)
        column.setMargins(24)
        column.addStyleClass("consent")

        let icon: Image
        if let iconPath, FileManager.default.isReadableFile(atPath: iconPath) {
            icon = Image(file: iconPath, pixelSize: 64)
        } else {
            icon = Image(iconName: "media-record", pixelSize: 64)
        }
        icon.align(horizontal: .center)
        column.append(icon)

        let title = Label(question, wraps: true)
        title.justify(.center)
        title.addStyleClass("consent-title")
        column.append(title)

        let what: String
        if let serviceName {
            // The pairing of an app and a service: asked at every broadcast, never remembered.
            what = (microphone
                ? "“\(serviceName)” will get the windows and sound of “\(appName)”, and what your microphone hears, live: never what other apps show or play."
                : "“\(serviceName)” will get the windows and sound of “\(appName)”, live: never what other apps show or play.")
                + "\nYou are asked each time “\(appName)” starts a broadcast."
        } else {
            what = (microphone
                ? "“\(appName)” will get its own windows and sound, and what your microphone hears: never what other apps show or play."
                : "“\(appName)” will get its own windows and sound: never what other apps show or play.")
                + "\nYour answer holds for 8 minutes."
        }
        let body = Label(what, wraps: true)
        body.justify(.center)
        column.append(body)

        let buttons = Box(.horizontal, spacing: 12)
        buttons.isHomogeneous = true
        buttons.setMargins(0)
        allow.addStyleClass("suggested-action")
        buttons.append(deny)
        buttons.append(allow)
        buttons.align(horizontal: .fill)
        column.append(buttons)
        window.setChild(column)

        deny.onClick { [weak self] in self?.finish(allowed: false) }
        allow.onClick { [weak self] in self?.finish(allowed: true) }
        window.onKeyPress(beforeChildren: true) { [weak self] key, _ in
            switch key {
            case .returnKey, .keypadEnter: self?.finish(allowed: true); return true
            case .escape: self?.finish(allowed: false); return true
            default: return false
            }
        }
        window.onCloseRequest { [weak self] in
            self?.finish(allowed: false)
            return false
        }
        window.staysAboveOnceMapped()
    }

    func show() {
        window.setFocus(deny)
        window.present()
    }

    private func finish(allowed: Bool) {
        guard !answered else { return }
        answered = true
        Answer.write(SystemWindowAnswer.Consent(answer: allowed ? .allow : .deny))
        window.destroy()
        Gtk.quit()
    }
}
