import ArgumentParser
import Foundation
import ReplayTesting
#if canImport(Glibc)
import Glibc
#endif

/// `make bench` on Wayland: the person's 1080p30 recording on a headless GNOME Shell, replayd
/// (through the portal and PipeWire) beside GNOME Shell's own screen recorder
/// (`org.gnome.Shell.Screencast`, which GNOME's Ctrl+Shift+Alt+R starts), on the same content, in
/// one run. Each side's cost is what the whole session (gnome-shell, PipeWire, the portal, replayd)
/// spends while it records, less what the same session spends showing the same content without
/// recording; the content's own process is not counted.
@main
struct WaylandBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-wayland-bench",
        abstract: "replayd's Wayland recording beside GNOME Shell's own screen recorder, on a headless GNOME Shell.")

    @Option(help: "Seconds per measured recording.")
    var seconds: Int = 10

    @Option(help: "Back-to-back pairs (ours, then GNOME's) per content.")
    var pairs: Int = 3

    @Flag(help: "Print each run's CPU-seconds by process.")
    var verbose = false

    @Option(help: "The folder of the release builds (replay, replayd).")
    var bin: String = ProcessInfo.processInfo.environment["ORK_BIN_DIR"] ?? ".build/release"

    /// The repository's folder (the helpers the tests share are there).
    var root: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }

    func run() async throws {
        let replay = URL(fileURLWithPath: bin).appendingPathComponent("replay").path
        let answer = root.appendingPathComponent("Tests/WaylandTests/Support/answer-portal.py").path
        let desktop = root.appendingPathComponent("Benchmarks/wayland/desktop.py").path
        print("== Wayland (headless GNOME Shell 1920x1080, \(seconds) s each): replayd through the portal beside GNOME Shell's recorder")
        try await GnomeSession.with(GnomeSession.Configuration(width: 1920, height: 1080)) { session in
            // The first recording asks the person (answered through AT-SPI) and keeps the token.
            let helper = try session.startClient("/usr/bin/python3", arguments: [answer, "--timeout", "60"])
            let first = try await session.run(replay, arguments: ["record", "--duration", "2", "-o", session.outputDirectory.appendingPathComponent("warm-up.mp4").path],
                                              timeout: .seconds(120))
            guard first.succeeded else { throw HarnessError("the warm-up recording failed: \(first)") }
            _ = try? await helper.waitForExit(timeout: .seconds(10))

            let still = try await measureStill(session, replay: replay)
            print(Self.padded("static screen") + String(format: "replayd %.4f of a core (target <= 0.03) %@", still, still <= 0.03 ? "OK" : "MISSED"))

            for (name, goal, content) in [("typical desktop", 0.5, [desktop]),
                                          ("full motion", 0.8, ["ffplay"])] {
                let process: BackgroundProcess
                if content == ["ffplay"] {
                    process = try session.startClient("/usr/bin/ffplay", arguments: [
                        "-loglevel", "error", "-an", "-fs", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30",
                    ], environment: ["SDL_VIDEODRIVER": "wayland"])
                } else {
                    process = try session.startClient("/usr/bin/python3", arguments: content)
                }
                // The content's start (ffplay opens its window and its decoder) must be over before a base is measured.
                try await Task.sleep(for: .seconds(5))
                var ratios: [Double] = []
                var ours = 0.0, theirs = 0.0
                for pair in 0..<pairs {
                    // What showing the content costs the session, a second: taken off both sides.
                    let base = try await sessionCPU(session, excluding: process.pid, during: seconds) {}
                    let rate = base.cpu / base.seconds
                    let ourRun = try await sessionCPU(session, excluding: process.pid, during: seconds) {
                        let file = session.outputDirectory.appendingPathComponent("ours-\(name.replacingOccurrences(of: " ", with: "-"))-\(pair).mp4").path
                        let result = try await session.run(replay, arguments: ["record", "--duration", "\(seconds)", "-o", file],
                                                           timeout: .seconds(seconds + 60))
                        guard result.succeeded else { throw HarnessError("replay record failed: \(result)") }
                    }
                    let theirRun = try await sessionCPU(session, excluding: process.pid, during: seconds) {
                        try await gnomeRecording(session, seconds: seconds, file: session.outputDirectory.appendingPathComponent("gnome-\(name.replacingOccurrences(of: " ", with: "-"))-\(pair).webm").path)
                    }
                    let o = ourRun.cpu - rate * ourRun.seconds, t = theirRun.cpu - rate * theirRun.seconds
                    // A base larger than a run (the content still starting inside it) says nothing: left out.
                    guard o > 0, t > 0 else {
                        print("    pair \(pair + 1) left out: its base was larger than a recording (ours \(o), GNOME's \(t))")
                        continue
                    }
                    ours += o
                    theirs += t
                    ratios.append(o / t)
                }
                guard !ratios.isEmpty else { throw HarnessError("\(name): no pair could be measured") }
                await session.stopClient(process)
                let median = ratios.sorted()[ratios.count / 2]
                let measured = Double(ratios.count * seconds)
                print(Self.padded(name) + String(format: "ours %.3f CPU-s/s   GNOME Shell's recorder %.3f CPU-s/s   ratio %.2f, median of %d pairs [%@] (target <= %.1f) %@",
                             ours / measured, theirs / measured, median, ratios.count,
                             ratios.map { String(format: "%.2f", $0) }.joined(separator: " "), goal, median <= goal ? "OK" : "MISSED"))
            }
        }
    }

    /// replayd's own CPU (of a core) while it records a still screen.
    func measureStill(_ session: GnomeSession, replay: String) async throws -> Double {
        let file = session.outputDirectory.appendingPathComponent("still.mp4").path
        // Pictures only, as the X11 figure (replay-bench without sound).
        let recording = try session.startClient(replay, arguments: ["record", "--no-system-audio", "--duration", "\(seconds + 4)", "-o", file])
        try await Task.sleep(for: .seconds(3))
        guard let replayd = ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: session.runtimeDirectory.path)
            .first(where: { Self.name(of: $0) == "replayd" }) else { throw HarnessError("no replayd is running") }
        let before = Self.cpuSeconds(replayd)
        try await Task.sleep(for: .seconds(seconds))
        let used = Self.cpuSeconds(replayd) - before
        _ = try await recording.waitForExit(timeout: .seconds(30))
        return used / Double(seconds)
    }

    /// GNOME Shell's own recorder for `seconds` (`org.gnome.Shell.Screencast`, its default pipeline:
    /// vp8 in WebM), from a client that stays on the bus while it records (it stops when its caller leaves).
    func gnomeRecording(_ session: GnomeSession, seconds: Int, file: String) async throws {
        let recorder = root.appendingPathComponent("Tests/WaylandTests/Support/gnome-recorder.py").path
        let result = try await session.run("/usr/bin/python3", arguments: [recorder, file, "\(seconds)"], timeout: .seconds(seconds + 60))
        guard result.succeeded else { throw HarnessError("GNOME Shell's recorder failed: \(result)") }
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        guard size > 10_000 else { throw HarnessError("GNOME Shell's recorder wrote \(size) bytes to \(file)") }
    }

    /// CPU-seconds the session's processes (all but `excluded`) spent while `work` ran, and the wall
    /// time it took (at least `seconds`: `work` that returns sooner is waited out).
    func sessionCPU(_ session: GnomeSession, excluding excluded: Int32, during seconds: Int,
                    _ work: () async throws -> Void) async throws -> (cpu: Double, seconds: Double) {
        func total() -> [Int32: Double] {
            var result: [Int32: Double] = [:]
            for pid in ProcessTable.pids(withEnvironment: "XDG_RUNTIME_DIR", equalTo: session.runtimeDirectory.path) where pid != excluded {
                result[pid] = Self.cpuSeconds(pid)
            }
            return result
        }
        let before = total()
        let started = ContinuousClock.now
        try await work()
        let elapsed = ContinuousClock.now - started
        if elapsed < .seconds(seconds) { try await Task.sleep(for: .seconds(seconds) - elapsed) }
        let after = total()
        let wall = ContinuousClock.now - started
        // A process that started during the window counts whole; one that ended is lost (none should).
        let cpu = after.reduce(0) { $0 + $1.value - (before[$1.key] ?? 0) }
        if verbose {
            var byName: [String: Double] = [:]
            for (pid, seconds) in after { byName[Self.name(of: pid), default: 0] += seconds - (before[pid] ?? 0) }
            print("    " + byName.filter { $0.value >= 0.05 }.sorted { $0.value > $1.value }
                .map { String(format: "%@ %.2f", $0.key, $0.value) }.joined(separator: ", "))
        }
        return (cpu, Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18)
    }

    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// `text` padded to the width of `Benchmarks/run.sh`'s first column.
    static func padded(_ text: String) -> String {
        text + String(repeating: " ", count: max(1, 29 - text.count))
    }

    static func name(of pid: Int32) -> String {
        ((try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
