import Foundation
import Logging
import ReplayTesting
import Testing

/// A private Wayland session the built programs run in: ``GnomeSession`` or ``SwaySession``.
protocol WaylandRig: Sendable {
    var environment: [String: String] { get }
    var runtimeDirectory: URL { get }
    func run(_ executable: String, arguments: [String], environment overrides: [String: String?], timeout: Duration) async throws -> ProcessResult
    func logTails(lines: Int) -> String
}

extension GnomeSession: WaylandRig {}
extension SwaySession: WaylandRig {}

/// What the GNOME and sway suites check alike.
enum WaylandChecks {
    /// Support/: the helpers in Python (run with Debian's Python: its GTK 4 and AT-SPI bindings) and
    /// the xdg-desktop-portal-wlr shim's source.
    static let support = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support")
    static let python = "/usr/bin/python3"
    static let logger = Logger.harness

    /// The replayd processes of this session (those with its `XDG_RUNTIME_DIR`).
    static func replayds(_ rig: some WaylandRig) -> Set<Int32> {
        Set(ProcessTable.pids(named: "replayd"))
            .intersection(ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: rig.runtimeDirectory.path))
    }

    /// replayd's log in this session.
    static func replaydLog(_ rig: some WaylandRig) -> String {
        (try? String(contentsOf: rig.runtimeDirectory.appendingPathComponent("openreplaykit/replayd.log"), encoding: .utf8)) ?? "(none)"
    }

    /// The crash report in replayd's log (the crashed thread's first frames), or nil when there is
    /// none within `settle` (a crash in what a session frees comes a moment after its end). A crash
    /// report being written (the Swift runtime's backtracer takes seconds) is waited for.
    static func replaydCrash(_ rig: some WaylandRig, settle: Duration = .seconds(3)) async -> String? {
        let deadline = ContinuousClock.now + settle
        while true {
            let log = replaydLog(rig)
            if log.contains("*** Signal ") || log.contains("*** Program crashed") { break }
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(200))
        }
        let written = ContinuousClock.now + .seconds(20)
        while !replaydLog(rig).contains("Backtrace took"), ContinuousClock.now < written {
            try? await Task.sleep(for: .milliseconds(200))
        }
        let lines = replaydLog(rig).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var report = lines.filter { $0.hasPrefix("*** ") }
        if let crashed = lines.firstIndex(where: { $0.hasSuffix("crashed:") }) {
            report += lines[crashed..<min(lines.count, crashed + 12)]
        }
        return report.joined(separator: "\n")
    }

    /// The frame shown at `seconds`: the last picture at or before it (`FrameDecoder.frame(at:)`
    /// gives the first at or after it, which in a recording of a still screen, whose pictures
    /// come a second apart, may be a later scene).
    static func frame(shownAt seconds: Double, in file: String) async throws -> RGBImage {
        let times = try await MediaProbe.videoPictures(file).map(\.time).sorted()
        let index = max(0, (times.lastIndex { $0 <= seconds + 0.001 }) ?? 0)
        guard let frame = try await FrameDecoder.frames(index...index, in: file).first else {
            throw HarnessError("no frame shown at \(seconds) s in \(file) (pictures at \(times))")
        }
        return frame
    }

    /// Polls `replay status --json` until the recording runs (its time zero has passed); fails when
    /// `replay record` exits first.
    static func waitUntilRecording(_ rig: some WaylandRig, replay binary: String, recorder: BackgroundProcess,
                                   timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let ended = recorder.result {
                throw HarnessError("`replay record` exited before its recording ran: \(ended)\nreplayd's log (end):\n\(replaydLog(rig).suffix(3000))\n\(rig.logTails(lines: 25))")
            }
            let status = try await rig.run(binary, arguments: ["status", "--json"], environment: [:], timeout: .seconds(20))
            if status.stdout.contains(#""state":"running""#) { return }
            if ContinuousClock.now >= deadline {
                throw HarnessError("the recording did not run within \(timeout): last status \(status)\nreplay record so far: \(recorder.currentError)\n\(rig.logTails(lines: 25))")
            }
            try await Task.sleep(for: .milliseconds(150))
        }
    }

    /// Waits until a helper prints `text` (it is ready); fails with what it and the session said.
    static func waitForOutput(_ process: BackgroundProcess, containing text: String, timeout: Duration,
                              rig: some WaylandRig) async throws {
        let deadline = ContinuousClock.now + timeout
        while !process.currentOutput.contains(text) {
            if let result = process.result {
                throw HarnessError("\(process.executable) \(process.arguments) exited before \"\(text)\": \(result)\n\(rig.logTails(lines: 20))")
            }
            if ContinuousClock.now >= deadline {
                throw HarnessError("\(process.arguments) did not print \"\(text)\" within \(timeout): \(process.currentOutput)\(process.currentError)\n\(rig.logTails(lines: 20))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// An app's own recording on this Wayland desktop: `replay-testapp available start` (the
    /// OpenReplayKit library in an app of the session) hears `isAvailable` false and a start refused
    /// with an error naming each of `naming`; replayd answered it and runs on; `replay status` answers.
    static func expectAppSessionRefused(_ rig: some WaylandRig, testApp: String, replay: String, naming: [String],
                                        sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let app = try await rig.run(testApp, arguments: ["available", "start"], environment: [:], timeout: .seconds(60))
        #expect(app.succeeded, "replay-testapp ran its steps: \(app)", sourceLocation: sourceLocation)
        // One JSON object per step (and per event the app heard, such as availability-changed).
        let steps = app.stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
        let available = steps.first { $0["step"] as? String == "available" }
        let start = steps.first { $0["step"] as? String == "start" }
        #expect(available?["available"] as? Bool == false, "RPScreenRecorder.isAvailable is false: \(app.stdout)", sourceLocation: sourceLocation)
        let description = start?["description"] as? String ?? ""
        #expect(start?["ok"] as? Bool == false, "startRecording failed: \(app.stdout)", sourceLocation: sourceLocation)
        for word in naming {
            #expect(description.contains(word), "the error names \"\(word)\": \(description)", sourceLocation: sourceLocation)
        }
        logger.debug("an app's own recording refused", metadata: ["code": "\(start?["code"] ?? "none")", "description": "\(description)"])

        let daemons = replayds(rig)
        #expect(!daemons.isEmpty, "replayd runs after refusing the app (its log: \(replaydLog(rig).suffix(1500)))", sourceLocation: sourceLocation)
        let status = try await rig.run(replay, arguments: ["status", "--json"], environment: [:], timeout: .seconds(20))
        #expect(status.succeeded && status.stdout.contains(#""state":"idle""#), "replay status answers, nothing recording: \(status)",
                sourceLocation: sourceLocation)
        #expect(replayds(rig) == daemons, "the same replayd answered (\(daemons) before `replay status`, \(replayds(rig)) after)",
                sourceLocation: sourceLocation)
    }

    /// `replay doctor` in the session: exit 0 (the person's recordings work here) and each of `saying`.
    static func expectDoctor(_ rig: some WaylandRig, replay: String, saying: [String],
                             sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let doctor = try await rig.run(replay, arguments: ["doctor"], environment: [:], timeout: .seconds(30))
        #expect(doctor.succeeded, "replay doctor exits 0: \(doctor)", sourceLocation: sourceLocation)
        for text in saying {
            #expect(doctor.stdout.contains(text), "replay doctor says \"\(text)\":\n\(doctor.stdout)", sourceLocation: sourceLocation)
        }
        logger.debug("replay doctor", metadata: ["output": "\(doctor.stdout)"])
    }

    /// The share of `image`'s pixels (every 4th, both ways) within 40 of `colour` in each channel.
    static func share(of colour: RGB, in image: RGBImage) -> Double {
        var matching = 0
        for y in stride(from: 0, to: image.height, by: 4) {
            for x in stride(from: 0, to: image.width, by: 4) where image.pixel(x: x, y: y).isClose(to: colour, tolerance: 40) {
                matching += 1
            }
        }
        return Double(matching) / Double(((image.height + 3) / 4) * ((image.width + 3) / 4))
    }

    /// The colour most of `image`'s pixels (every 8th, both ways) have, for messages.
    static func commonestColour(in image: RGBImage) -> RGB {
        var counts: [RGB: Int] = [:]
        for y in stride(from: 0, to: image.height, by: 8) {
            for x in stride(from: 0, to: image.width, by: 8) { counts[image.pixel(x: x, y: y), default: 0] += 1 }
        }
        return counts.max { $0.value < $1.value }?.key ?? RGB(0, 0, 0)
    }

    /// Decodes every frame of `file` with ffmpeg: nil when all decode without a word, else what ffmpeg said.
    static func decodingProblem(_ file: String) async throws -> String? {
        let decode = try await ProcessRunner.run("ffmpeg", arguments: ["-nostdin", "-v", "error", "-i", file, "-f", "null", "-"],
                                                 timeout: .seconds(120))
        return decode.succeeded && decode.stderr.isEmpty ? nil : decode.description
    }
}

/// The Wayland suites, one after the other: each starts a desktop of its own, and two at once on
/// 2 cores would slow both (and the timing of what they record).
@Suite(.serialized)
enum WaylandDesktops {}
