import Foundation
import ReplayGtk
import ReplayIPC

/// One broadcast service the picker offers: an installed upload extension, as the `--services` file
/// lists it (`SystemWindows.PickerService` writes it).
struct PickerService: Decodable {
    var identifier: String
    var displayName: String
    var iconPath: String?
}

/// The broadcast picker, iOS's `RPBroadcastActivityViewController` sheet as a system window: each
/// service's icon and name in a list, a **Microphone** check box, **Cancel** and **Start Broadcast**.
/// Up and Down move the selection wherever the focus is, Return starts with the selected service, Escape
/// cancels (a key handler that sees keys before the buttons do); Space toggles the microphone unless a
/// button has the focus (then it presses that button); a click selects a row. Closing the window cancels.
/// With no service installed the window says so and offers only Cancel.
@MainActor
final class PickerWindow {
    private let services: [PickerService]
    private let window: Window
    private let list = ListBox()
    private let microphoneCheck = CheckButton("Microphone")
    private let cancelButton = Button("Cancel")
    private let startButton = Button("Start Broadcast")
    private var answered = false
    /// False when the app's picker view hides the switch (`showsMicrophoneButton`): Space does nothing then.
    private var microphoneShown = true

    init(services: [PickerService], microphone: Bool, showsMicrophoneButton: Bool = true) {
        self.services = services
        microphoneShown = showsMicrophoneButton
        window = Window(title: "Screen Broadcast", width: 420)
        window.isResizable = false

        let column = Box(.vertical, spacing: 12)
        column.setMargins(24)
        column.addStyleClass("picker")

        let title = Label("Screen Broadcast")
        title.addStyleClass("consent-title")
        title.justify(.center)
        column.append(title)

        let buttons = Box(.horizontal, spacing: 12)
        buttons.isHomogeneous = true
        buttons.append(cancelButton)

        if services.isEmpty {
            let none = Label("No broadcast services are installed.\nInstall a broadcast extension, then try again.", wraps: true)
            none.justify(.center)
            column.append(none)
        } else {
            let hint = Label("Choose where to broadcast your screen.", wraps: true)
            hint.justify(.center)
            hint.addStyleClass("dim-label")
            column.append(hint)

            for service in services { list.append(Self.row(for: service)) }
            list.addStyleClass("rich-list")
            list.addStyleClass("picker-list")
            list.select(at: 0)
            column.append(ScrolledWindow(list, maximumHeight: 320))

            microphoneCheck.isActive = microphone
            microphoneCheck.setTooltip("Also broadcast what your microphone hears (Space)")
            if showsMicrophoneButton { column.append(microphoneCheck) }

            startButton.addStyleClass("suggested-action")
            buttons.append(startButton)
        }
        column.append(buttons)
        window.setChild(column)
        connect()
    }

    /// The service's icon (its PNG, else a generic one) beside its name and, smaller, its identifier.
    private static func row(for service: PickerService) -> Widget {
        let row = Box(.horizontal, spacing: 12)
        row.setMargins(6)
        let icon: Image
        if let path = service.iconPath, FileManager.default.isReadableFile(atPath: path) {
            icon = Image(file: path, pixelSize: 40)
        } else {
            icon = Image(iconName: "network-transmit", pixelSize: 40)
        }
        row.append(icon)
        let text = Box(.vertical, spacing: 2)
        let name = Label(service.displayName)
        name.justify(.left)
        name.addStyleClass("picker-name")
        text.append(name)
        let identifier = Label(service.identifier)
        identifier.justify(.left)
        identifier.addStyleClass("dim-label")
        identifier.addStyleClass("picker-identifier")
        text.append(identifier)
        text.align(vertical: .center)
        row.append(text)
        return row
    }

    private func connect() {
        cancelButton.onClick { [weak self] in self?.finish(start: false) }
        startButton.onClick { [weak self] in self?.finish(start: true) }
        window.onKeyPress(beforeChildren: true) { [weak self] key, _ in
            guard let self else { return false }
            switch key {
            case .returnKey, .keypadEnter:
                // With no service, Return can only cancel (as the one button does).
                self.finish(start: !self.services.isEmpty)
                return true
            case .escape:
                self.finish(start: false)
                return true
            case .up, .keypadUp:
                self.moveSelection(by: -1)
                return true
            case .down, .keypadDown:
                self.moveSelection(by: 1)
                return true
            case .space, .keypadSpace:
                // A focused button takes its Space (a press), the check box its own (a toggle).
                if self.services.isEmpty || !self.microphoneShown || self.cancelButton.hasFocus || self.startButton.hasFocus || self.microphoneCheck.hasFocus {
                    return false
                }
                self.microphoneCheck.isActive.toggle()
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
        if let first = list.row(at: 0) {
            window.setFocus(first)
        } else {
            window.setFocus(cancelButton)
        }
        window.present()
    }

    private func moveSelection(by step: Int) {
        guard list.count > 0 else { return }
        let index = min(max(0, (list.selectedIndex ?? 0) + step), list.count - 1)
        list.select(at: index)
        // The focus follows the selection when it is in the list (GTK draws the focus ring there).
        if let row = list.row(at: index), !(cancelButton.hasFocus || startButton.hasFocus || microphoneCheck.hasFocus) {
            row.grabFocus()
        }
    }

    private func finish(start: Bool) {
        guard !answered else { return }
        if start {
            guard let index = list.selectedIndex, services.indices.contains(index) else { return }
            answered = true
            Answer.write(SystemWindowAnswer.Picker(action: .start, identifier: services[index].identifier, microphone: microphoneCheck.isActive))
        } else {
            answered = true
            Answer.write(SystemWindowAnswer.Picker(action: .cancelled))
        }
        window.destroy()
        Gtk.quit()
    }
}
