import Foundation
import OpenReplayKit
import ReplayGtk

/// SketchPad's window: the buttons, the canvas, the capture meters and a status line. OpenReplayKit's
/// completion handlers come on the library's threads; each hands its result to GTK's main thread
/// with `Gtk.post`, where every widget lives.
@MainActor
final class SketchWindow {
    static let css = """
        .sketch-canvas { border: 1px solid #999; }
        .sketch-status { padding: 2px 4px; }
        """
    /// The canvas and the ink, as the recording should show them.
    static let paper = (red: 1.0, green: 1.0, blue: 1.0)
    static let ink = (red: 0.10, green: 0.25, blue: 0.85)

    private let recorder = RPScreenRecorder.shared()
    private let tone: StrokeTone
    private let clipFolder: String
    private let meter = CaptureMeter()
    private let previewListener = PreviewListener()

    private let window = Window(title: "SketchPad", width: 860, height: 640)
    private let recordButton = Button("Record")
    private let stopButton = Button("Stop")
    private let captureButton = Button("Capture")
    private let clipButton = Button("Clip")
    private let protectedCheck = CheckButton("Protected")
    private let statusLabel = Label("Draw with the mouse. Record, Capture or Clip to see yourself as OpenReplayKit does.")
    private let captureLabel = Label("Capture: off")
    private let appLevel = LevelBar()
    private let micLevel = LevelBar()
    private var canvas: DrawingArea!

    private var strokes: [[(x: Double, y: Double)]] = []
    private var clipBuffering = false

    init(tone: StrokeTone, clipFolder: String) {
        self.tone = tone
        self.clipFolder = clipFolder
        canvas = DrawingArea(width: 820, height: 480) { [unowned self] canvas, width, height in
            self.paint(canvas, width: width, height: height)
        }
        layOut()
        connect()
    }

    func show() {
        window.present()
        announce("ready")
    }

    private func layOut() {
        let buttons = Box(.horizontal, spacing: 8)
        for button in [recordButton, stopButton, captureButton, clipButton] { buttons.append(button) }
        buttons.append(protectedCheck)
        stopButton.isSensitive = false
        recordButton.setTooltip("Record yourself (Ctrl+R); Stop (Ctrl+T) shows the preview")
        captureButton.setTooltip("Receive your own pictures and sound (Ctrl+K)")
        clipButton.setTooltip("Keep the last 15 s in memory; press again to save them (Ctrl+L)")
        protectedCheck.setTooltip("Blank this window in every recording (Ctrl+P)")

        canvas.addStyleClass("sketch-canvas")
        canvas.expand(horizontally: true, vertically: true)

        let meters = Box(.horizontal, spacing: 8)
        captureLabel.useTabularDigits()
        captureLabel.justify(.left)
        captureLabel.setSize(width: 260, height: -1)
        meters.append(captureLabel)
        meters.append(Label("App sound"))
        appLevel.expand(horizontally: true)
        appLevel.align(vertical: .center)
        meters.append(appLevel)
        meters.append(Label("Microphone"))
        micLevel.expand(horizontally: true)
        micLevel.align(vertical: .center)
        meters.append(micLevel)

        statusLabel.justify(.left)
        statusLabel.addStyleClass("sketch-status")

        let column = Box(.vertical, spacing: 8)
        column.setMargins(12)
        column.append(buttons)
        column.append(canvas)
        column.append(meters)
        column.append(statusLabel)
        window.setChild(column)
    }

    private func connect() {
        canvas.onDrag(began: { [unowned self] x, y in
            strokes.append([(x, y)])
            tone.strokeBegan()
            canvas.redraw()
        }, moved: { [unowned self] x, y in
            guard !strokes.isEmpty else { return }
            strokes[strokes.count - 1].append((x, y))
            canvas.redraw()
        }, ended: { [unowned self] in
            tone.strokeEnded()
            announce("stroke \(strokes.count) (\(strokes.last?.count ?? 0) points)")
        })
        recordButton.onClick { [unowned self] in record() }
        stopButton.onClick { [unowned self] in stop() }
        captureButton.onClick { [unowned self] in toggleCapture() }
        clipButton.onClick { [unowned self] in clip() }
        protectedCheck.onToggle { [unowned self] in protect(protectedCheck.isActive) }
        window.onKeyPress { [unowned self] key, modifiers in
            guard modifiers.contains(.control) else { return false }
            switch key {
            case _ where Key.letter("r").contains(key): if recordButton.isSensitive { record() }
            case _ where Key.letter("t").contains(key): if stopButton.isSensitive { stop() }
            case _ where Key.letter("k").contains(key): toggleCapture()
            case _ where Key.letter("l").contains(key): clip()
            case _ where Key.letter("p").contains(key): protectedCheck.isActive.toggle()
            default: return false
            }
            return true
        }
        window.onCloseRequest { [unowned self] in
            if recorder.isRecording { recorder.discardRecording {} }
            if recorder.isCapturing { recorder.stopCapture() }
            if clipBuffering { recorder.stopClipBuffering() }
            Gtk.quit()
            return false
        }
        // The capture meters, ten times a second.
        Gtk.every(milliseconds: 100) { [weak self] in
            guard let self else { return false }
            updateMeters()
            return true
        }
    }

    private func paint(_ canvas: Canvas, width: Int, height: Int) {
        canvas.setColor(red: Self.paper.red, green: Self.paper.green, blue: Self.paper.blue)
        canvas.fillAll()
        canvas.setColor(red: Self.ink.red, green: Self.ink.green, blue: Self.ink.blue)
        for stroke in strokes { canvas.stroke(stroke, width: 8) }
    }

    private func status(_ text: String) {
        statusLabel.text = text
        announce(text)
    }

    // MARK: Record / Stop → the system preview

    private func record() {
        recordButton.isSensitive = false
        status("starting a recording (the first time, the person is asked)")
        recorder.startRecording { error in
            Gtk.post { [weak self] in
                guard let self else { return }
                if let error {
                    recordButton.isSensitive = true
                    status("could not record: \(error.localizedDescription)")
                } else {
                    stopButton.isSensitive = true
                    status("recording")
                }
            }
        }
    }

    private func stop() {
        stopButton.isSensitive = false
        recorder.stopRecording { preview, error in
            Gtk.post { [weak self] in
                guard let self else { return }
                recordButton.isSensitive = true
                guard let preview else {
                    status("stop failed: \(error?.localizedDescription ?? "no recording")")
                    return
                }
                status("stopped: the preview shows the recording")
                preview.previewControllerDelegate = previewListener
                previewListener.onFinish = { [weak self] activities, path in
                    guard let self else { return }
                    if let path, !activities.isEmpty {
                        status("saved \(path)")
                    } else {
                        status("the recording was discarded in the preview")
                    }
                }
                preview.present()
            }
        }
    }

    // MARK: Capture: the app's own samples

    private func toggleCapture() {
        if recorder.isCapturing {
            recorder.stopCapture { error in
                Gtk.post { [weak self] in
                    guard let self else { return }
                    captureButton.label = "Capture"
                    let received = meter.take()
                    status(error.map { "capture stop failed: \($0.localizedDescription)" }
                           ?? "capture stopped: \(received.frames) frames, \(received.width)x\(received.height)")
                }
            }
            return
        }
        meter.reset()
        captureButton.isSensitive = false
        recorder.startCapture(handler: { [meter] buffer, type, error in
            if error == nil { meter.add(buffer, type) }
        }, completionHandler: { error in
            Gtk.post { [weak self] in
                guard let self else { return }
                captureButton.isSensitive = true
                if let error {
                    status("capture refused: \(error.localizedDescription)")
                } else {
                    captureButton.label = "Stop Capture"
                    status("capturing")
                }
            }
        })
    }

    private func updateMeters() {
        let snapshot = meter.take()
        guard recorder.isCapturing else {
            appLevel.value = 0
            micLevel.value = 0
            if snapshot.frames == 0 { captureLabel.text = "Capture: off" }
            return
        }
        captureLabel.text = "Capture: \(snapshot.frames) frames, \(snapshot.width)x\(snapshot.height)"
        appLevel.value = Double(min(1, snapshot.appLevel / 0.3))
        micLevel.value = Double(min(1, snapshot.micLevel / 0.3))
    }

    // MARK: Clip: the last 15 s

    private func clip() {
        clipButton.isSensitive = false
        if !clipBuffering {
            recorder.startClipBuffering { error in
                Gtk.post { [weak self] in
                    guard let self else { return }
                    clipButton.isSensitive = true
                    if let error {
                        status("clip buffer refused: \(error.localizedDescription)")
                    } else {
                        clipBuffering = true
                        clipButton.label = "Save Clip"
                        status("clip buffer on: Save Clip saves the last 15 s")
                    }
                }
            }
            return
        }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd 'at' HH.mm.ss"
        let path = clipFolder + "/SketchPad Clip \(formatter.string(from: Date())).mp4"
        try? FileManager.default.createDirectory(atPath: clipFolder, withIntermediateDirectories: true)
        recorder.exportClip(to: URL(fileURLWithPath: path), duration: 15) { error in
            Gtk.post { [weak self] in
                guard let self else { return }
                clipButton.isSensitive = true
                status(error.map { "clip failed: \($0.localizedDescription)" } ?? "clip \(path)")
            }
        }
    }

    // MARK: Protected

    private func protect(_ protected: Bool) {
        let id = window.x11WindowID
        do {
            try RPContentProtection.protect(window: UInt32(truncatingIfNeeded: id), protected: protected)
            status(protected ? "protected: recordings show this window blanked" : "not protected")
        } catch {
            status("protection failed: \(error.localizedDescription)")
        }
    }
}

/// Hears the preview's outcome (the preview controller holds its delegate weakly, as on iOS) and
/// hands it to the window on GTK's thread.
@MainActor
final class PreviewListener: RPPreviewViewControllerDelegate {
    var onFinish: (@MainActor (Set<String>, String?) -> Void)?

    nonisolated func previewController(_ previewController: RPPreviewViewController, didFinishWithActivityTypes activityTypes: Set<String>) {
        let path = previewController.savedPath
        Gtk.post { [self] in onFinish?(activityTypes, path) }
    }
}
