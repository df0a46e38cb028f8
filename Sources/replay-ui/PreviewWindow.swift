import Foundation
import ReplayGtk
import ReplayIPC
import ReplayMedia
#if canImport(Glibc)
import Glibc
#endif

/// The recording's preview: plays it with sound, a timeline (the playhead) and two trim handles
/// (Start, End: sliders that the mouse drags and the arrow keys move, 0.1 s a press, 1 s with
/// Page Up/Down), **Cancel** (Escape: the recording is deleted), **Share…** (a file chooser) and
/// **Save** (Ctrl+S: into the save folder, named as `replay record` names recordings).
///
/// A trimmed movie is cut without re-encoding (`MovieTrim`: from the keyframe at or before the
/// start); an untrimmed one is moved as it is.
@MainActor
final class PreviewWindow {
    private let file: String
    private let saveFolder: String
    private let duration: Double
    private let window: Window
    private let media: MediaFile
    private let playButton = Button("Pause")
    private let playhead: Scale
    private let positionLabel = Label("0:00")
    private let startHandle: Scale
    private let endHandle: Scale
    private let startLabel = Label()
    private let endLabel = Label()
    private let status = Label("Trim with Start and End: drag them, or the arrow keys.", wraps: false)
    private let cancelButton = Button("Cancel")
    private let shareButton = Button("Share…")
    private let saveButton = Button("Save")
    private var shareDialog: SaveFileDialog?
    private var finished = false
    /// The shortest cut Save accepts, in seconds.
    private let shortest = 0.5
    private static let step = 0.1

    init(file: String, saveFolder: String) throws {
        self.file = file
        self.saveFolder = saveFolder
        do {
            duration = try MovieTrim.duration(of: file)
        } catch {
            throw PreviewError("cannot read the recording: \(error.description)")
        }
        guard duration > 0 else { throw PreviewError("the recording \(file) is empty") }

        window = Window(title: "Preview: \((file as NSString).lastPathComponent)", width: 800, height: 600)
        media = MediaFile(path: file)
        playhead = Scale(from: 0, to: duration, step: Self.step)
        startHandle = Scale(from: 0, to: duration, step: Self.step)
        endHandle = Scale(from: 0, to: duration, step: Self.step)
        endHandle.value = duration
        endHandle.isInverted = false
        startHandle.highlightsOrigin = false
        layOut()
        connect()
        updateLabels()
    }

    func show() {
        window.setFocus(startHandle)
        window.present()
        media.play()
    }

    private func layOut() {
        let column = Box(.vertical, spacing: 8)
        column.setMargins(12)

        let picture = Picture(media: media)
        picture.expand(horizontally: true, vertically: true)
        picture.addStyleClass("preview-picture")
        column.append(picture)

        let transport = Box(.horizontal, spacing: 8)
        playButton.setSize(width: 80, height: -1)
        transport.append(playButton)
        playhead.expand(horizontally: true)
        playhead.setTooltip("The playhead: drag to look at another moment")
        transport.append(playhead)
        positionLabel.useTabularDigits()
        transport.append(positionLabel)
        column.append(transport)

        let trim = Box(.horizontal, spacing: 8)
        let startTitle = Label("Start")
        startTitle.addStyleClass("trim-label")
        trim.append(startTitle)
        startHandle.expand(horizontally: true)
        startHandle.setTooltip("Where the saved movie starts (arrow keys: 0.1 s)")
        trim.append(startHandle)
        startLabel.useTabularDigits()
        trim.append(startLabel)
        let endTitle = Label("End")
        endTitle.addStyleClass("trim-label")
        trim.append(endTitle)
        endHandle.expand(horizontally: true)
        endHandle.setTooltip("Where the saved movie ends (arrow keys: 0.1 s)")
        trim.append(endHandle)
        endLabel.useTabularDigits()
        trim.append(endLabel)
        column.append(trim)

        let actions = Box(.horizontal, spacing: 8)
        status.expand(horizontally: true)
        status.justify(.left)
        status.addStyleClass("dim-label")
        actions.append(status)
        actions.append(cancelButton)
        actions.append(shareButton)
        saveButton.addStyleClass("suggested-action")
        actions.append(saveButton)
        column.append(actions)
        window.setChild(column)
    }

    private func connect() {
        playButton.onClick { [weak self] in self?.togglePlayback() }
        cancelButton.onClick { [weak self] in self?.cancel() }
        saveButton.onClick { [weak self] in self?.save() }
        shareButton.onClick { [weak self] in self?.share() }
        window.onKeyPress(beforeChildren: true) { [weak self] key, modifiers in
            guard let self else { return false }
            if key == .escape, self.shareDialog == nil { self.cancel(); return true }
            if Key.letter("s").contains(key), modifiers.contains(.control) { self.save(); return true }
            return false
        }
        window.onCloseRequest { [weak self] in
            self?.cancel()
            return false
        }
        playhead.onChangeByPerson { [weak self] value in
            self?.media.seek(to: value)
            return false
        }
        startHandle.onChangeByPerson { [weak self] value in
            guard let self else { return true }
            self.startHandle.value = min(max(0, Self.onGrid(value)), self.endHandle.value - self.shortest)
            self.trimChanged(showing: self.startHandle.value)
            return true
        }
        endHandle.onChangeByPerson { [weak self] value in
            guard let self else { return true }
            let wanted = value >= self.duration - Self.step / 2 ? self.duration : Self.onGrid(value)
            self.endHandle.value = max(min(self.duration, wanted), self.startHandle.value + self.shortest)
            self.trimChanged(showing: max(self.startHandle.value, self.endHandle.value - 1))
            return true
        }
        media.onChange(of: "timestamp") { [weak self] in self?.playbackMoved() }
        media.onChange(of: "playing") { [weak self] in self?.updateLabels() }
        media.onChange(of: "ended") { [weak self] in self?.updateLabels() }
        media.onChange(of: "error") { [weak self] in
            guard let self, let message = self.media.errorMessage else { return }
            self.status.text = "Cannot play the recording (\(message)); you can still trim and save it."
        }
    }

    // MARK: playback within the trim

    private func togglePlayback() {
        if media.isPlaying {
            media.pause()
        } else {
            if media.hasEnded || media.position >= endHandle.value - 0.05 || media.position < startHandle.value {
                media.seek(to: startHandle.value)
            }
            media.play()
        }
        updateLabels()
    }

    private func playbackMoved() {
        let position = media.position
        playhead.value = position
        if media.isPlaying, position >= endHandle.value {
            media.pause()
            media.seek(to: startHandle.value)
        }
        updateLabels()
    }

    private func trimChanged(showing time: Double) {
        if media.isPlaying { media.pause() }
        media.seek(to: time)
        updateLabels()
    }

    private func updateLabels() {
        playButton.label = media.isPlaying ? "Pause" : "Play"
        positionLabel.text = "\(Self.clock(media.position)) / \(Self.clock(duration))"
        startLabel.text = Self.clock(startHandle.value, tenths: true)
        endLabel.text = Self.clock(endHandle.value, tenths: true)
        playhead.clearMarks()
        if isTrimmed {
            playhead.addMark(at: startHandle.value)
            playhead.addMark(at: endHandle.value)
        }
    }

    /// `M:SS`, or `M:SS.t` with tenths.
    static func clock(_ seconds: Double, tenths: Bool = false) -> String {
        let count = Int((max(0, seconds) * (tenths ? 10 : 1)).rounded(tenths ? .toNearestOrAwayFromZero : .down))
        let perMinute = tenths ? 600 : 60
        let rest = count % perMinute
        let secondsPart = tenths ? rest / 10 : rest
        return "\(count / perMinute):" + (secondsPart < 10 ? "0" : "") + "\(secondsPart)" + (tenths ? ".\(rest % 10)" : "")
    }

    /// A handle's value on the 0.1 s grid its keys move on (ten presses of 0.1 s are 1.0 s, not 0.9999).
    static func onGrid(_ value: Double) -> Double { (value / step).rounded() * step }

    // MARK: the three ways out

    private var isTrimmed: Bool {
        startHandle.value > 0.05 || endHandle.value < duration - 0.05
    }

    private func save() {
        guard !finished else { return }
        do {
            try FileManager.default.createDirectory(atPath: saveFolder, withIntermediateDirectories: true)
        } catch {
            status.text = "Cannot create \(saveFolder): \(error.localizedDescription)"
            return
        }
        export(to: VideosFolder.unusedRecordingPath(in: saveFolder, at: Date()), action: .saved)
    }

    private func share() {
        guard !finished, shareDialog == nil else { return }
        media.pause()
        let dialog = SaveFileDialog(title: "Share the Recording", parent: window,
                                    suggestedName: VideosFolder.recordingName(at: Date()),
                                    folder: ProcessInfo.processInfo.environment["HOME"])
        shareDialog = dialog
        dialog.show { [weak self] path in
            guard let self else { return }
            self.shareDialog = nil
            if let path { self.export(to: path, action: .shared) }
        }
    }

    private func cancel() {
        guard !finished else { return }
        finished = true
        media.pause()
        unlink(file)
        Answer.write(SystemWindowAnswer.Preview(action: .cancelled))
        close()
    }

    /// Writes the kept part to `path` (the whole file moved when nothing is trimmed), then answers.
    private func export(to path: String, action: SystemWindowAnswer.Preview.Action) {
        media.pause()
        window.isSensitive = false
        status.text = "Saving…"
        Gtk.drainEvents()
        do {
            if isTrimmed {
                _ = try MovieTrim.trim(file, to: path, from: startHandle.value, to: endHandle.value)
                unlink(file)
            } else {
                try Self.move(file, to: path)
            }
        } catch {
            window.isSensitive = true
            status.text = "Could not save: \(error)"
            FileHandle.standardError.write(Data("replay-ui preview: could not write \(path): \(error)\n".utf8))
            return
        }
        finished = true
        Answer.write(SystemWindowAnswer.Preview(action: action, path: path))
        close()
    }

    /// Renames, or copies then removes across file systems.
    static func move(_ source: String, to destination: String) throws {
        if rename(source, destination) == 0 { return }
        guard errno == EXDEV else { throw PreviewError("cannot move the recording to \(destination): \(String(cString: strerror(errno)))") }
        try FileManager.default.copyItem(atPath: source, toPath: destination)
        unlink(source)
    }

    private func close() {
        window.destroy()
        Gtk.quit()
    }
}

struct PreviewError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
