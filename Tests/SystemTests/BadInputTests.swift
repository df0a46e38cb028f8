import Foundation
import ReplayTesting
import Testing

extension SystemTests {
    /// Bad input gets a clear message and a non-zero exit, and nothing is left recording.
    @Suite("replay record: bad input, no sound server, full disk")
    struct BadInputTests {
        enum BadInput: String, CaseIterable, CustomTestStringConvertible, Sendable {
            case noDisplay, unknownDisplay, missingScreen, regionOutsideScreen, existingOutput, unwritableDirectory, unknownEncoder
            var testDescription: String { rawValue }
        }

        @Test("Refused with a clear message, nothing left running", .timeLimit(.minutes(1)), arguments: BadInput.allCases)
        func refused(_ input: BadInput) async throws {
            var readOnly: TmpfsMount?
            if input == .unwritableDirectory && TmpfsMount.isSupported {
                readOnly = try await TmpfsMount.mount(sizeKiB: 64, readOnly: true)
            }
            do {
                try await TestEnvironment.with { environment in
                    try await checkRefused(input, environment: environment, readOnlyDirectory: readOnly?.path)
                }
            } catch {
                await readOnly?.unmount()
                throw error
            }
            await readOnly?.unmount()
        }

        private func checkRefused(_ input: BadInput, environment: TestEnvironment, readOnlyDirectory: String?) async throws {
            var file = environment.outputPath("bad-\(input.rawValue).mp4")
            var arguments = ["record", "--duration", "3"]
            var overrides: [String: String?] = [:]
            let keywords: [String]
            switch input {
            case .noDisplay:
                overrides["DISPLAY"] = .some(nil)
                keywords = ["display"]
            case .unknownDisplay:
                arguments += ["--display", ":987"]
                keywords = [":987"]
            case .missingScreen:
                // The server answers, but has one screen (0): the message must not say nobody answers.
                arguments += ["--display", environment.xvfb.display + ".1"]
                keywords = ["no screen 1"]
            case .regionOutsideScreen:
                arguments += ["--region", "640x480+1000+500"]
                keywords = ["region", "640x480+1000+500", "outside", "screen"]
            case .existingOutput:
                try Data("keep me".utf8).write(to: URL(fileURLWithPath: file))
                keywords = ["exist"]
            case .unwritableDirectory:
                // A read-only tmpfs (root writes anywhere else); without mount, sysfs refuses root too.
                let directory = readOnlyDirectory ?? "/sys"
                file = "\(directory)/recording.mp4"
                keywords = [directory, "writ", "permission", "read-only"]
            case .unknownEncoder:
                arguments += ["--encoder", "foo"]
                keywords = ["foo"]
            }
            arguments += ["-o", file]

            let result = try await environment.replay(arguments, environment: overrides, timeout: .seconds(30))
            print("bad input \(input.rawValue): \(result.terminatedBySignal ? "signal" : "exit") \(result.status): \(result.message.trimmingCharacters(in: .whitespacesAndNewlines))")
            #expect(!result.succeeded, "`replay \(arguments.joined(separator: " "))` must fail: \(result)")
            expectPersonReadable(result.message, mentioningAnyOf: keywords)
            if input == .existingOutput {
                #expect((try? String(contentsOfFile: file, encoding: .utf8)) == "keep me", "the existing file is left alone")
            } else {
                #expect(!FileManager.default.fileExists(atPath: file), "no file is made")
            }
            try await expectNothingRecording(environment)
        }

        /// The render nodes of this machine; where there are none, VA-API cannot work.
        static let renderNodes = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev/dri")) ?? []).filter { $0.hasPrefix("renderD") }

        @Test("No render node: --encoder vaapi is refused and says what to use; --encoder auto records with libx264 and logs why",
              .timeLimit(.minutes(1)), .enabled(if: renderNodes.isEmpty, "this machine has a render node"))
        func vaapiWithoutRenderNode() async throws {
            try await TestEnvironment.with { environment in
                let refusedFile = environment.outputPath("vaapi.mp4")
                let refused = try await environment.replay(["record", "--encoder", "vaapi", "--duration", "2", "-o", refusedFile],
                                                           timeout: .seconds(30))
                print("--encoder vaapi without a render node: exit \(refused.status): \(refused.message.trimmingCharacters(in: .whitespacesAndNewlines))")
                #expect(!refused.succeeded, "\(refused)")
                expectPersonReadable(refused.message, mentioningAnyOf: ["VA-API"])
                #expect(refused.message.contains("--encoder x264"), "it names the way out: \(refused.message)")
                #expect(!FileManager.default.fileExists(atPath: refusedFile), "no file is made")
                try await expectNothingRecording(environment)

                let file = environment.outputPath("auto.mp4")
                let recorded = try await environment.replay(["record", "--encoder", "auto", "--duration", "2", "-o", file], timeout: .seconds(40))
                #expect(recorded.succeeded, "\(recorded)")
                let info = try await MediaProbe.probe(file)
                #expect(info.videoStreams.first?.codecName == "h264", "\(info.videoStreams)")
                let log = environment.replaydLog
                #expect(log.contains("no working VA-API render node: encoding with libx264"), "replayd logs the fallback: \(log.suffix(2000))")
            }
        }

        @Test("No PulseAudio: video only, and it says so", .timeLimit(.minutes(1)))
        func noSoundServerRecordsVideoOnly() async throws {
            try await TestEnvironment.with(.init(audio: .deadServer)) { environment in
                let file = environment.outputPath("video only.mp4")
                let result = try await environment.replay(["record", "-o", file, "--duration", "2"], timeout: .seconds(40))
                print("no PulseAudio: exit \(result.status): \((result.stderr + result.stdout).trimmingCharacters(in: .whitespacesAndNewlines))")
                #expect(result.succeeded, "records video only: \(result)")
                let said = (result.stderr + result.stdout).lowercased()
                #expect(["audio", "sound", "pulseaudio"].contains { said.contains($0) }, "and says so: \(result)")
                let info = try await MediaProbe.probe(file)
                #expect(info.videoStreams.count == 1)
                #expect(info.audioStreams.isEmpty, "no audio track")
                let frames = info.videoStreams.first?.readFrames ?? 0
                #expect(frames >= 50, "about 60 frames: \(frames)")
            }
        }

        @Test("No PulseAudio with --mic: refused", .timeLimit(.minutes(1)))
        func noSoundServerWithMicrophoneFails() async throws {
            try await TestEnvironment.with(.init(audio: .deadServer)) { environment in
                let file = environment.outputPath("mic without pulse.mp4")
                let result = try await environment.replay(["record", "-o", file, "--duration", "2", "--mic"], timeout: .seconds(30))
                print("no PulseAudio, --mic: exit \(result.status): \(result.message.trimmingCharacters(in: .whitespacesAndNewlines))")
                #expect(!result.succeeded, "asked for the microphone explicitly: \(result)")
                expectPersonReadable(result.message, mentioningAnyOf: ["pulseaudio", "audio", "microphone", "sound"])
                try await expectNothingRecording(environment)
            }
        }

        @Test("Disk full: a clear error, the recording stops, the file is valid up to there",
              .enabled(if: TmpfsMount.isSupported, "needs `mount -t tmpfs` (root with CAP_SYS_ADMIN) for a small disk to fill"),
              .timeLimit(.minutes(3)))
        func diskFull() async throws {
            let disk = try await TmpfsMount.mount(sizeKiB: 3 * 1024)
            do {
                // 3 MiB, most of it taken, so that a few seconds of recording fill it.
                try disk.fill(leavingFree: 96 * 1024)
                try await TestEnvironment.with { environment in
                    let file = "\(disk.path)/full.mp4"
                    let started = ContinuousClock.now
                    let result = try await environment.replay(["record", "-o", file, "--duration", "150"], timeout: .seconds(160))
                    let took = (ContinuousClock.now - started) / .seconds(1)
                    let free = disk.freeBytes
                    print("disk full after \(took) s (\(free) bytes left): exit \(result.status): \(result.message.trimmingCharacters(in: .whitespacesAndNewlines))")
                    #expect(!result.succeeded, "a full disk is an error: \(result)")
                    #expect(took < 140, "stops when the disk is full, not at --duration: \(took) s")
                    #expect(free < 64 * 1024, "it stopped because the disk was full: \(free) bytes free")
                    expectPersonReadable(result.message, mentioningAnyOf: ["disk", "space", "full"])
                    let info = try await MediaProbe.probe(file)
                    let frames = info.videoStreams.first?.readFrames ?? 0
                    #expect(frames > 0, "the file is valid up to there: \(frames) frames")
                    // The header says nothing after a write error: the file is cut after its last
                    // complete fragment and readers count the fragments there. What they report
                    // agrees with the packets there within the decode delay of B-frames (FFmpeg's
                    // reader ends a track where its last packet decodes: up to 2 ticks early).
                    let (format, streams, packetEnds) = try await MediaProbe.durations(file)
                    let all = "ffprobe: format \(format ?? -1), streams \(streams.map { $0 ?? -1 }), packets end at \(packetEnds)"
                    print("disk full: \(all)")
                    for (stream, end) in zip(streams, packetEnds) {
                        #expect(abs((stream ?? 0) - end) <= 3.0 / 30 + 0.001, "\(all)")
                    }
                    #expect(abs((format ?? 0) - (packetEnds.max() ?? 0)) <= 3.0 / 30 + 0.001, "\(all)")
                    try await expectNothingRecording(environment)
                }
            } catch {
                await disk.unmount()
                throw error
            }
            await disk.unmount()
        }
    }
}

/// A message for a person: there, short, no crash or backtrace, and about the problem.
func expectPersonReadable(_ message: String, mentioningAnyOf keywords: [String],
                          sourceLocation: SourceLocation = #_sourceLocation) {
    let text = message.trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(!text.isEmpty, "an error message", sourceLocation: sourceLocation)
    #expect(text.count < 1200, "a short message, not a dump: \(text.prefix(300))…", sourceLocation: sourceLocation)
    for crash in ["Fatal error", "Stack dump", "Backtrace", "Current stack trace", "Segmentation fault"] {
        #expect(!text.contains(crash), "no crash: \(text)", sourceLocation: sourceLocation)
    }
    let lower = text.lowercased()
    #expect(keywords.contains { lower.contains($0.lowercased()) },
            "the message is about the problem (one of \(keywords)): \(text)", sourceLocation: sourceLocation)
}

/// `replay status` shows no session that is starting or running.
func expectNothingRecording(_ environment: TestEnvironment, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let (result, json) = try await statusJSON(environment)
    if let json, let state = jsonValue("state", in: json) as? String {
        #expect(!["starting", "running", "stopping"].contains(state), "nothing is left recording: \(result)",
                sourceLocation: sourceLocation)
    }
}
