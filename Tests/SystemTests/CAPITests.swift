import Foundation
import ReplayTesting
import Testing

extension SystemTests {
    /// The C API (libopenreplaykit.so, openreplaykit.h, pkg-config openreplaykit) from real programs:
    /// a C program compiled with `cc $(pkg-config …)` against `make install-lib`'s files, which is
    /// itself a small X11 app recording, capturing and protecting itself through a real replayd; and
    /// Python through ctypes.
    @Suite("The C API from C and Python")
    struct CAPITests {
        /// The folder of the programs these tests run (`capi_app.c`, `capi_smoke.py`).
        static var programs: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("CAPI") }

        /// `make install-lib` of the debug build into a new PREFIX; that prefix.
        static func installLibrary() async throws -> URL {
            let prefix = try makeTemporaryDirectory(prefix: "ork-capi")
            let install = try await ProcessRunner.run("/usr/bin/make", arguments: [
                "-C", InstallTests.packageRoot, "install-lib", "CONFIGURATION=debug", "BUILT_BIN=\(Binaries.directory.path)", "PREFIX=\(prefix.path)",
            ], timeout: .seconds(120))
            try #require(install.succeeded, "\(install)")
            return prefix
        }

        /// What `ldd` could not resolve (empty when everything is found).
        static func unresolved(_ file: String) async throws -> [String] {
            let ldd = try await ProcessRunner.run("/usr/bin/ldd", arguments: [file])
            try #require(ldd.succeeded, "\(ldd)")
            return ldd.stdout.split(separator: "\n").filter { $0.contains("not found") }.map(String.init)
        }

        /// `capi_app.c` compiled with pkg-config's flags against a new `make install-lib` prefix (checked:
        /// its files, and `ldd` of the library and the program); the prefix (remove it) and the program.
        static func buildProgram() async throws -> (prefix: URL, program: String) {
            let prefix = try await Self.installLibrary()
            for file in ["lib/libopenreplaykit.so", "include/openreplaykit.h", "lib/pkgconfig/openreplaykit.pc"] {
                #expect(FileManager.default.fileExists(atPath: prefix.appendingPathComponent(file).path), "make install-lib puts \(file)")
            }
            #expect(try await Self.unresolved(prefix.appendingPathComponent("lib/libopenreplaykit.so").path).isEmpty,
                    "ldd resolves the library's Swift runtime")

            // pkg-config gives what cc needs; the program compiles warning-free against the installed header.
            var environment = ProcessInfo.processInfo.environment
            environment["PKG_CONFIG_PATH"] = prefix.appendingPathComponent("lib/pkgconfig").path
            let flags = try await ProcessRunner.run("/usr/bin/pkg-config", arguments: ["--cflags", "--libs", "openreplaykit", "xcb", "libpulse-simple"], environment: environment)
            try #require(flags.succeeded, "\(flags)")
            #expect(flags.stdout.contains("-lopenreplaykit") && flags.stdout.contains("-I\(prefix.path)/include"), "\(flags.stdout)")
            let program = prefix.appendingPathComponent("capi_app").path
            let cc = try await ProcessRunner.run("/usr/bin/cc", arguments: [
                "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o", program, Self.programs.appendingPathComponent("capi_app.c").path, "-lpthread", "-lm",
            ] + flags.stdout.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty },
                timeout: .seconds(120))
            try #require(cc.succeeded, "\(cc)")
            #expect(try await Self.unresolved(program).isEmpty, "the program finds libopenreplaykit.so (the .pc's rpath) and its runtime")
            return (prefix, program)
        }

        @Test("A C program built with pkg-config records, captures, buffers and protects itself", .timeLimit(.minutes(5)))
        func aCProgramRecordsAndCapturesItself() async throws {
            let (prefix, program) = try await Self.buildProgram()
            defer { try? FileManager.default.removeItem(at: prefix) }
            try await TestEnvironment.with(.init(content: nil)) { environment in
                let replayd = try await AppSessionTests.startReplayd(environment, consent: "allow")
                defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
                let recording = environment.outputPath("c.mp4"), clip = environment.outputPath("c-clip.mp4")
                let run = try await ProcessRunner.run(program, arguments: [recording, clip], environment: environment.environment,
                                                      timeout: .seconds(90))
                #expect(run.succeeded, "\(run)")
                let lines = AppSessionTests.lines(run.stdout)
                let step = { (name: String) throws -> AppSessionTests.Line in try AppSessionTests.line(lines, name) }
                let code = { (name: String) throws -> Int? in try step(name)["code"] as? Int }

                let names = try step("names")
                #expect(names["userDeclined"] as? String == "userDeclined" && names["zero"] as? String == "ok"
                        && names["other"] as? String == "unknown", "\(names)")
                #expect(try step("available")["available"] as? Bool == true)
                // The error path: ReplayKit's code and words.
                let stopNothing = try step("stop-nothing")
                #expect(stopNothing["code"] as? Int == -5829 && stopNothing["name"] as? String == "attemptToStopNonRecording", "\(stopNothing)")
                #expect((stopNothing["message"] as? String)?.contains("not recording") == true, "\(stopNothing)")
                #expect(try code("stop-capture-nothing") == -5829)

                // A recording of its own green window, on black, and its sound.
                #expect(try code("start") == 0, "\(lines)")
                #expect(try step("recording")["isRecording"] as? Bool == true)
                #expect(try code("start-again") == -5830, "attemptToStartInRecordingState")
                #expect(try code("stop") == 0, "\(lines)")
                #expect(try step("stopped")["isRecording"] as? Bool == false)
                let info = try await MediaProbe.probe(recording)
                #expect(info.videoStreams.count == 1 && info.audioStreams.count == 1, "\(info)")
                // A 3 s recording. With the app's sound, a 2 s one came out 1.45 s and 0.94 s long on a loaded
                // machine (its start is cut; without sound it was whole): not this test's subject, so half is asked.
                #expect((info.format.duration ?? 0) > 1.5, "\(info)")
                let frame = try await FrameDecoder.frame(at: 1.0, in: recording)
                #expect(frame.pixel(x: 750, y: 250).isClose(to: RGB(0, 255, 0)), "its own green window: \(frame.pixel(x: 750, y: 250))")
                #expect(frame.pixel(x: 100, y: 100).isClose(to: RGB(0, 0, 0)), "black elsewhere: \(frame.pixel(x: 100, y: 100))")

                // In-app capture: NV12 pictures of the screen's size, in time order, its green window on black.
                let capture = try step("capture")
                #expect(capture["start"] as? Int == 0 && capture["stop"] as? Int == 0 && capture["capturing"] as? Bool == true, "\(capture)")
                #expect((capture["video"] as? Int ?? 0) >= 3, "a still window: its first picture, then one a second: \(capture)")
                #expect(capture["width"] as? Int == environment.xvfb.width && capture["height"] as? Int == environment.xvfb.height, "\(capture)")
                #expect(capture["timesIncrease"] as? Bool == true, "\(capture)")
                #expect((capture["span"] as? Double ?? 0) > 1.5, "on the session clock, in seconds: \(capture)")
                let own = capture["own"] as? [Int] ?? [], other = capture["other"] as? [Int] ?? []
                // Full range, as the header says: black Y 0, green Y 150 Cb 44 Cr 21 (not video range's 16 and 144, 54, 34).
                #expect(FullRangeLevels.isClose(own, to: FullRangeLevels.green, tolerance: 5), "green, full range: \(own)")
                #expect(FullRangeLevels.isClose(other, to: FullRangeLevels.black), "black, full range: \(other)")
                #expect(capture["audioMic"] as? Int == 0, "no microphone unless enabled: \(capture)")
                #expect((capture["audioApp"] as? Int ?? 0) > 50, "its own sound, in chunks: \(capture)")
                #expect(capture["channels"] as? Int == 2 && capture["rate"] as? Int == 48000 && capture["badAudio"] as? Int == 0,
                        "interleaved Float32 stereo at 48 kHz: \(capture)")
                #expect((capture["peak"] as? Double ?? 0) > 0.05, "its 700 Hz tone is heard: \(capture)")

                // Protection: a bad window id is invalidParameter with words; its own window is blanked.
                let bad = try step("protect-bad")
                #expect(bad["code"] as? Int == -5834 && ((bad["message"] as? String)?.contains("window") ?? false), "\(bad)")
                #expect(try code("protect") == 0)
                let protected = try step("capture-protected")
                let blanked = protected["own"] as? [Int] ?? []
                #expect((protected["video"] as? Int ?? 0) >= 1 && FullRangeLevels.isClose(blanked, to: FullRangeLevels.black), "the protected window is blank: \(protected)")

                // A clip of the last 2 s while buffering; over 15 s is invalidParameter.
                #expect(try code("clip-start") == 0, "\(lines)")
                #expect(try code("clip-export") == 0, "\(lines)")
                #expect(try code("clip-export-too-long") == -5834)
                #expect(try code("clip-stop") == 0)
                let clipInfo = try await MediaProbe.probe(clip)
                #expect(clipInfo.videoStreams.count == 1 && (clipInfo.format.duration ?? 0) >= 1, "\(clipInfo.format)")

                // isCaptured as the watcher heard it: false first, true while it recorded, false at the end.
                let captured = try step("captured")
                let seen = captured["seen"] as? String ?? ""
                #expect(seen.hasPrefix("01") && seen.hasSuffix("0"), "\(captured)")
                #expect(captured["now"] as? Bool == false, "\(captured)")
            }
        }

        @Test("The C program's stopped callback hears interrupted when the person records", .timeLimit(.minutes(5)))
        func theStoppedCallbackHearsTheInterruption() async throws {
            let (prefix, program) = try await Self.buildProgram()
            defer { try? FileManager.default.removeItem(at: prefix) }
            try await TestEnvironment.with(.init(content: nil)) { environment in
                let replayd = try await AppSessionTests.startReplayd(environment, consent: "allow")
                defer { _ = replayd.isRunning }  // kept alive (and stopped at the end) by this handle
                let app = try BackgroundProcess(program, arguments: ["--wait-interrupted"], environment: environment.environment)
                defer { Task { await app.terminate() } }
                for _ in 0..<300 where !app.currentOutput.contains("\"step\":\"recording\"") { try await Task.sleep(for: .milliseconds(50)) }
                #expect(app.currentOutput.contains("\"isRecording\":true"), "\(app.currentOutput)")
                let record = try await environment.replay(["record", "--duration", "2", "-o", environment.outputPath("person.mp4")], timeout: .seconds(60))
                #expect(record.succeeded, "\(record)")
                let result = try await app.waitForExit(timeout: .seconds(40))
                let stopped = try AppSessionTests.line(AppSessionTests.lines(result.stdout), "stopped-by-system")
                #expect(stopped["code"] as? Int == -5806 && stopped["name"] as? String == "interrupted", "\(result)")
                #expect(!((stopped["message"] as? String) ?? "").isEmpty && stopped["isRecording"] as? Bool == false, "\(stopped)")
                #expect(AppSessionTests.appRecordings(environment).isEmpty, "the app's recording was discarded")
            }
        }

        @Test("Python through ctypes gets ReplayKit's codes and words, on a thread of the library's")
        func pythonThroughCtypes() async throws {
            let library = Binaries.directory.appendingPathComponent("libopenreplaykit.so").path
            #expect(try await Self.unresolved(library).isEmpty)
            let runtime = try makeTemporaryDirectory(prefix: "ork-capi-py")
            defer { try? FileManager.default.removeItem(at: runtime) }
            var environment = ProcessInfo.processInfo.environment
            environment["DISPLAY"] = nil
            environment["XDG_RUNTIME_DIR"] = runtime.path   // no replayd of anyone's is asked
            let run = try await ProcessRunner.run("/usr/bin/python3", arguments: [Self.programs.appendingPathComponent("capi_smoke.py").path, library],
                                                  environment: environment)
            try #require(run.succeeded, "\(run)")
            let line = try #require(AppSessionTests.lines(run.stdout).first, "\(run)")
            #expect(line["name"] as? String == "userDeclined")
            #expect(line["available"] as? Bool == false, "no display: not available")
            #expect(line["answered"] as? Bool == true)
            let start = line["start"] as? [String: Any] ?? [:]
            #expect(start["code"] as? Int == -5803, "failedToStart without a display: \(start)")
            #expect((start["message"] as? String)?.contains("DISPLAY") == true, "\(start)")
            #expect(start["thread"] as? Bool == true, "the completion runs on a thread of the library's: \(start)")
            #expect(line["protect"] as? Int == -5834 && (line["protectMessage"] as? String)?.contains("DISPLAY") == true, "\(line)")
        }
    }
}
