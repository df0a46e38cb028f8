import ArgumentParser
import Foundation
import OpenReplayKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A test "app": drives OpenReplayKit from its own process, step by step, and prints one JSON line
/// per step (`{"step":…,"ok":true}` or the error as `NSError`: domain, code, description), so that
/// system tests check what an app sees.
@main
struct TestApp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-testapp",
        abstract: "Runs OpenReplayKit calls in order, printing each outcome as a JSON line (for tests).",
        discussion: """
            Steps: child=EXECUTABLE|ARG|ARG… (a child process, part of the app), start, stop, stop-to=PATH, discard, present, mic=on|off, available, \
            clip-start, clip-export=PATH:SECONDS, clip-stop, sleep=SECONDS, \
            capture=SECONDS[@X,Y…] (in-app capture: counts, times, the app's CPU-seconds, and the last picture's Y/Cb/Cr at each point), \
            capture-log=PATH (the next capture writes each picture's CLOCK_MONOTONIC arrival in ns, its Y at the first point and its presentation time in ns), \
            wait-stopped=SECONDS (the delegate's didStopRecording), watch-captured=SECONDS \
            (RPScreen.isCaptured's changes), group-set=GROUP:KEY[:VALUE], group-get=GROUP:KEY (an app group's secret and its store), \
            hold (until killed); broadcast-load[=EXTENSION], broadcast-start, broadcast-pause, \
            broadcast-resume, broadcast-finish, broadcast-status, broadcast-wait-paused=SECONDS, broadcast-wait-info=SECONDS, \
            broadcast-wait-ended=SECONDS, system-picker[=EXTENSION][,no-mic] (BroadcastSteps.swift).
            """)

    @Argument(help: "The steps.")
    var steps: [String]

    func run() async throws {
        let recorder = RPScreenRecorder.shared()
        let delegate = Delegate()
        recorder.delegate = delegate
        let broadcasts = BroadcastSteps()
        var children: [Process] = []
        /// Where the next capture step writes each picture's arrival (make bench's latency).
        var captureLog: String?
        defer { for child in children { child.terminate() } }
        for step in steps {
            let (name, value) = split(step)
            do {
                switch name {
                case "start": try await recorder.startRecording()
                case "stop":
                    let preview = try await recorder.stopRecording()
                    Self.report(step, extra: ["preview": .string(String(describing: type(of: preview)))])
                    continue
                case "stop-to": try await recorder.stopRecording(withOutput: URL(fileURLWithPath: value ?? ""))
                case "discard": await recorder.discardRecording()
                case "mic": recorder.isMicrophoneEnabled = value == "on"
                case "available":
                    Self.report(step, extra: ["available": .bool(recorder.isAvailable), "recording": .bool(recorder.isRecording)])
                    continue
                case "clip-start": try await recorder.startClipBuffering()
                case "clip-export":
                    let parts = (value ?? "").split(separator: ":", maxSplits: 1).map(String.init)
                    try await recorder.exportClip(to: URL(fileURLWithPath: parts[0]), duration: Double(parts.last ?? "") ?? 0)
                case "clip-stop": try await recorder.stopClipBuffering()
                case "capture":
                    let parts = (value ?? "2").split(separator: "@").map(String.init)
                    let points = parts.dropFirst().compactMap { point -> (Int, Int)? in
                        let xy = point.split(separator: ",").compactMap { Int($0) }
                        return xy.count == 2 ? (xy[0], xy[1]) : nil
                    }
                    let tally = CaptureTally(points: points, logsArrivals: captureLog != nil)
                    try await recorder.startCapture { buffer, type in tally.add(buffer, type) }
                    let cpuBefore = Self.cpuSeconds()
                    let seconds = Double(parts.first ?? "2") ?? 2
                    try await Task.sleep(for: .seconds(seconds))
                    let cpu = Self.cpuSeconds() - cpuBefore
                    try await recorder.stopCapture()
                    if let captureLog { try tally.arrivals().write(toFile: captureLog, atomically: true, encoding: .utf8) }
                    Self.report(step, extra: tally.report().merging(["cpuSeconds": .double(cpu), "seconds": .double(seconds)]) { $1 })
                    continue
                case "capture-log": captureLog = value
                case "sleep": try await Task.sleep(for: .seconds(Double(value ?? "1") ?? 1))
                case "group-set", "group-get":
                    // GROUP:KEY[:VALUE] in the app group's store (RPAppGroup); reports the value read and the store.
                    let parts = (value ?? "").split(separator: ":", maxSplits: 2).map(String.init)
                    guard parts.count >= 2 else { throw TestAppError("\(name) needs GROUP:KEY[:VALUE]") }
                    let group = try RPAppGroup(identifier: parts[0])
                    if name == "group-set" { try group.set(parts.count == 3 ? parts[2] : nil, forKey: parts[1]) }
                    let store: String = switch group.store {
                    case .secretService: "secret-service"
                    case .file(let path): "file:" + path
                    }
                    var extra: [String: Value] = ["store": .string(store)]
                    if let read = try group.string(forKey: parts[1]) { extra["value"] = .string(read) }
                    Self.report(step, extra: extra)
                    continue
                case "wait-stopped":
                    let error = await delegate.waitForStop(seconds: Double(value ?? "30") ?? 30)
                    guard let error else { throw TestAppError("the delegate heard no stop") }
                    Self.report(step, extra: ["delegate": .bool(true), "domain": .string(error.domain), "code": .int(error.code),
                                              "description": .string(error.description)])
                    continue
                case "watch-captured":
                    let seconds = Double(value ?? "10") ?? 10
                    let deadline = Date().addingTimeInterval(seconds)
                    let watcher = Task {
                        for await captured in RPScreen.main.capturedChanges {
                            Self.report(step, extra: ["captured": .bool(captured), "time": .double(Date().timeIntervalSince1970)])
                        }
                    }
                    try await Task.sleep(for: .seconds(max(0, deadline.timeIntervalSinceNow)))
                    watcher.cancel()
                    continue
                case "child":
                    // A child process is part of the app (its windows and sound are the app's).
                    let words = (value ?? "").split(separator: "|").map(String.init)
                    let child = Process()
                    child.executableURL = URL(fileURLWithPath: words[0])
                    child.arguments = Array(words.dropFirst())
                    child.standardOutput = FileHandle.nullDevice
                    try child.run()
                    children.append(child)
                    try await Task.sleep(for: .seconds(1.5))   // mapped and painted
                case "hold":
                    Self.report(step)
                    while true { try await Task.sleep(for: .seconds(60)) }
                case _ where name.hasPrefix("broadcast-") || name == "system-picker":
                    Self.report(step, extra: try await broadcasts.run(name, value))
                    continue
                default:
                    throw TestAppError("unknown step \(name)")
                }
                Self.report(step)
            } catch {
                Self.report(step, error: error)
            }
        }
    }

    /// This process's CPU time so far (user + system, every thread), in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    private func split(_ step: String) -> (String, String?) {
        guard let equals = step.firstIndex(of: "=") else { return (step, nil) }
        return (String(step[..<equals]), String(step[step.index(after: equals)...]))
    }

    enum Value { case string(String), bool(Bool), double(Double), int(Int) }

    static func report(_ step: String, error: (any Error)? = nil, extra: [String: Value] = [:]) {
        var fields = extra
        fields["step"] = .string(step)
        if let error {
            // What an iOS app would read: the error as NSError.
            let bridged = error as NSError
            fields["domain"] = .string(bridged.domain)
            fields["code"] = .int(bridged.code)
            fields["description"] = .string(bridged.localizedDescription)
            fields["ok"] = .bool(false)
        } else {
            fields["ok"] = .bool(true)
        }
        let object = fields.mapValues { value -> Any in
            switch value {
            case .string(let s): s
            case .bool(let b): b
            case .double(let d): d
            case .int(let i): i
            }
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

struct TestAppError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Hears the recorder's delegate calls.
final class Delegate: RPScreenRecorderDelegate {
    /// The error of the last stop the system made (as NSError's domain, code, description), once it came.
    private let stop = Mutex<(domain: String, code: Int, description: String)?>(nil)

    func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWith previewViewController: RPPreviewViewController?, error: (any Error)?) {
        let bridged = (error ?? TestAppError("stopped without an error")) as NSError
        stop.withLock { $0 = (bridged.domain, bridged.code, bridged.localizedDescription) }
    }

    func screenRecorderDidChangeAvailability(_ screenRecorder: RPScreenRecorder) {
        TestApp.report("availability-changed", extra: ["available": .bool(screenRecorder.isAvailable)])
    }

    func waitForStop(seconds: Double) async -> (domain: String, code: Int, description: String)? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let error = stop.withLock({ $0 }) { return error }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }
}

/// What the test app's in-app capture received, read as iOS sample-handling code reads it.
final class CaptureTally: Sendable {
    private struct State {
        var video = 0, audioApp = 0, audioMic = 0
        var timesIncrease = true
        var lastTime = -Double.infinity
        var width = 0, height = 0
        var samples: [String] = []
        var appPeak: Float = 0
    }
    private let points: [(Int, Int)]
    private let logsArrivals: Bool
    private let state = Mutex(State())
    /// With `logsArrivals`: each picture's arrival (CLOCK_MONOTONIC ns, read first thing in the handler), Y at the first
    /// point, and when it was taken (its presentation time: CLOCK_MONOTONIC ns).
    private let arrivalLog = Mutex<[(UInt64, Int, Int64)]>([])

    init(points: [(Int, Int)], logsArrivals: Bool = false) {
        self.points = points
        self.logsArrivals = logsArrivals
    }

    /// The arrival log as lines `NS Y`.
    func arrivals() -> String {
        arrivalLog.withLock { $0.map { "\($0.0) \($0.1) \($0.2)\n" }.joined() }
    }

    private static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    func add(_ buffer: CMSampleBuffer, _ type: RPSampleBufferType) {
        let arrival = logsArrivals && type == .video ? Self.monotonicNanoseconds() : 0
        let time = CMTimeGetSeconds(CMSampleBufferGetPresentationTimeStamp(buffer))
        switch type {
        case .video:
            guard let pixels = CMSampleBufferGetImageBuffer(buffer) else { return }
            CVPixelBufferLockBaseAddress(pixels, .readOnly)
            defer { CVPixelBufferUnlockBaseAddress(pixels, .readOnly) }
            let width = CVPixelBufferGetWidth(pixels), height = CVPixelBufferGetHeight(pixels)
            var samples: [String] = []
            if let luma = CVPixelBufferGetBaseAddressOfPlane(pixels, 0), let chroma = CVPixelBufferGetBaseAddressOfPlane(pixels, 1) {
                let lumaRow = CVPixelBufferGetBytesPerRowOfPlane(pixels, 0), chromaRow = CVPixelBufferGetBytesPerRowOfPlane(pixels, 1)
                for (x, y) in points where x < width && y < height {
                    let yValue = luma.load(fromByteOffset: y * lumaRow + x, as: UInt8.self)
                    let cb = chroma.load(fromByteOffset: (y / 2) * chromaRow + (x / 2) * 2, as: UInt8.self)
                    let cr = chroma.load(fromByteOffset: (y / 2) * chromaRow + (x / 2) * 2 + 1, as: UInt8.self)
                    samples.append("\(yValue),\(cb),\(cr)")
                }
            }
            if logsArrivals, let first = samples.first, let luma = Int(first.split(separator: ",")[0]) {
                let taken = CMSampleBufferGetPresentationTimeStamp(buffer).value
                arrivalLog.withLock { $0.append((arrival, luma, taken)) }
            }
            state.withLock { state in
                state.video += 1
                if time <= state.lastTime { state.timesIncrease = false }
                state.lastTime = time
                state.width = width
                state.height = height
                state.samples = samples
            }
        case .audioApp, .audioMic:
            var peak: Float = 0
            if let data = CMSampleBufferGetDataBuffer(buffer) {
                var length = 0
                var pointer: UnsafeMutablePointer<CChar>?
                if CMBlockBufferGetDataPointer(data, atOffset: 0, lengthAtOffsetOut: nil, totalLengthOut: &length, dataPointerOut: &pointer) == kCMBlockBufferNoErr,
                   let pointer {
                    pointer.withMemoryRebound(to: Float.self, capacity: length / 4) { floats in
                        for index in 0..<(length / 4) { peak = max(peak, abs(floats[index])) }
                    }
                }
            }
            state.withLock { state in
                if type == .audioApp {
                    state.audioApp += 1
                    state.appPeak = max(state.appPeak, peak)
                } else {
                    state.audioMic += 1
                }
            }
        }
    }

    func report() -> [String: TestApp.Value] {
        state.withLock { state in
            var fields: [String: TestApp.Value] = [
                "video": .int(state.video), "audioApp": .int(state.audioApp), "audioMic": .int(state.audioMic),
                "timesIncrease": .bool(state.timesIncrease), "width": .int(state.width), "height": .int(state.height),
                "appPeak": .double(Double(state.appPeak)),
            ]
            for (index, sample) in state.samples.enumerated() { fields["ycbcr\(index)"] = .string(sample) }
            return fields
        }
    }
}
