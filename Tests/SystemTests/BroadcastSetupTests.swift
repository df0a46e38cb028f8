import Foundation
import ReplayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SystemTests {
    /// Setup extensions: replayd runs the upload extension's setup extension (`replay-testsetup`,
    /// iOS's template told by a file what to answer) before the broadcast when no `--setup` was
    /// given; what it completes with reaches the seed's `broadcastStarted(withSetupInfo:)`, and a
    /// cancel (or leaving without an answer) stops the broadcast before it starts, in words.
    @Suite("replay broadcast: setup extensions")
    struct BroadcastSetupTests {
        static let uploadID = "org.openreplaykit.test.withsetup"
        static let setupID = "org.openreplaykit.test.withsetup.setup"
        static let group = "org.openreplaykit.test"

        /// Installs the seed's upload extension (or the built program `upload`, such as the shipped
        /// `replay-extension-rtmp`) naming the test setup extension, and the setup extension itself
        /// told to answer `order`: the two folders (upload, setup).
        static func install(order: [String: Any], in dataHome: URL, upload program: String = "replay-testextension") throws -> (upload: URL, setup: URL) {
            let extensions = dataHome.appendingPathComponent("openreplaykit/extensions")
            let upload = extensions.appendingPathComponent("\(uploadID).orkextension")
            let setup = extensions.appendingPathComponent("\(setupID).orkextension")
            for folder in [upload, setup] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
            try Binaries.copyExecutable(from: try Binaries.path(program), to: upload.appendingPathComponent("upload").path)
            try Binaries.copyExecutable(from: try Binaries.path("replay-testsetup"), to: setup.appendingPathComponent("setup").path)
            try Data(#"{"identifier": "\#(uploadID)", "displayName": "Seed Service", "kind": "broadcast-upload", "executable": "upload", "setupExtension": "\#(setupID)", "appGroup": "\#(group)"}"#.utf8)
                .write(to: upload.appendingPathComponent("manifest.json"))
            try Data(#"{"identifier": "\#(setupID)", "displayName": "Seed Service", "kind": "broadcast-setup", "executable": "setup", "appGroup": "\#(group)"}"#.utf8)
                .write(to: setup.appendingPathComponent("manifest.json"))
            try JSONSerialization.data(withJSONObject: order).write(to: setup.appendingPathComponent("setup.json"))
            return (upload, setup)
        }

        enum NoBroadcast: String, CaseIterable, CustomTestStringConvertible, Sendable {
            /// It cancels; it leaves without an answer; the person presses Ctrl-C on `replay broadcast` while it asks.
            case cancels, leaves, interrupted
            var testDescription: String { rawValue }
            var order: [String: Any] {
                switch self {
                case .cancels: ["action": "cancel", "reason": "the test account is locked"]
                case .leaves: ["action": "exit"]
                case .interrupted: ["action": "wait"]
                }
            }
            var words: [String] {
                switch self {
                case .cancels: ["Seed Service's setup (\(setupID)) cancelled the broadcast: the test account is locked (org.openreplaykit.test 3)."]
                case .leaves: ["Seed Service's setup (\(setupID)) left with status 3 without completing or cancelling the setup", "the broadcast does not start"]
                case .interrupted: ["finishing the broadcast (Ctrl-C)", "the broadcast was stopped during its setup."]
                }
            }
        }

        @Test("A setup extension that cancels (or leaves without an answer, or is interrupted): the broadcast does not start and replay says why",
              .timeLimit(.minutes(2)), arguments: NoBroadcast.allCases)
        func setupThatCancels(_ how: NoBroadcast) async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                let dataHome = BroadcastTests.dataHome(environment)
                let (upload, setup) = try Self.install(order: how.order, in: dataHome)
                let env: [String: String?] = ["XDG_DATA_HOME": dataHome.path]

                let listed = try await environment.replay(["services"], environment: env)
                #expect(listed.stdout.contains("\(Self.uploadID)\tSeed Service\tsetup: \(Self.setupID)"), "\(listed)")
                #expect(!listed.stdout.contains("\(Self.setupID)\t"), "a setup extension is no service of its own: \(listed)")

                let result: ProcessResult
                if how == .interrupted {
                    let waiting = try environment.startReplay(["broadcast", "--service", Self.uploadID], environment: env)
                    try await BroadcastTests.waitFor("the setup extension to ask") { BroadcastTests.events(in: setup).contains("waiting") }
                    waiting.signal(SIGINT)
                    result = try await waiting.waitForExit(timeout: .seconds(20))
                    #expect(ProcessTable.pids(withEnvironment: "ORK_EXTENSION_IDENTIFIER", equalTo: Self.setupID).isEmpty, "the setup extension is gone")
                } else {
                    result = try await environment.replay(["broadcast", "--service", Self.uploadID], environment: env, timeout: .seconds(40))
                }
                #expect(!result.succeeded, "\(result)")
                for words in how.words { #expect(result.stderr.contains(words), "\(words) in \(result.stderr)") }
                let seen = BroadcastTests.events(in: setup)
                #expect(seen.contains { $0.hasPrefix("application ") }, "\(seen)")
                #expect(BroadcastTests.events(in: upload).isEmpty, "the upload extension never ran: \(BroadcastTests.events(in: upload))")
                let status = try await environment.replay(["status"], environment: env)
                #expect(status.succeeded && !status.stdout.contains("broadcasting"), "\(status)")
                #expect(ProcessTable.isAlive(environment.replaydPID() ?? -1), "replayd goes on")

                // With --setup values the setup extension is not asked: the broadcast starts.
                try? FileManager.default.removeItem(at: setup.appendingPathComponent("events.log"))
                let direct = try environment.startReplay(["broadcast", "--service", Self.uploadID, "--setup", "login=yes"], environment: env)
                try await BroadcastTests.waitFor("the upload extension's start") {
                    BroadcastTests.events(in: upload).contains { $0.hasPrefix("started") }
                }
                #expect(BroadcastTests.events(in: setup).isEmpty, "no setup with --setup")
                #expect(try await environment.replay(["stop"], environment: env).succeeded)
                let ended = try await direct.waitForExit(timeout: .seconds(20))
                #expect(ended.succeeded, "\(ended)")
            }
        }

        @Test("A setup extension that completes: its setupInfo arrives in broadcastStarted, its URL is the broadcast's, its app group is its own",
              .timeLimit(.minutes(2)))
        func setupThatCompletes() async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 480)) { environment in
                let dataHome = BroadcastTests.dataHome(environment)
                let order: [String: Any] = ["action": "complete", "broadcastURL": "https://watch.example.com/b/42",
                                            "setupInfo": ["login": "yes", "streamKey": "from-setup-1234", "server": "rtmp://ingest.example.com/live"]]
                let (upload, setup) = try Self.install(order: order, in: dataHome)
                // What the app (or an earlier setup) kept in the group.
                let groupFolder = dataHome.appendingPathComponent("openreplaykit/app-groups/\(Self.group)")
                try FileManager.default.createDirectory(at: groupFolder, withIntermediateDirectories: true)
                try Data(#"{"streamKey": "kept-by-the-app"}"#.utf8).write(to: groupFolder.appendingPathComponent("secrets.json"))
                let env: [String: String?] = ["XDG_DATA_HOME": dataHome.path]

                let broadcast = try environment.startReplay(["broadcast", "--service", Self.uploadID, "--title", "Set up"], environment: env)
                try await BroadcastTests.waitFor("the setup's URL on stdout") { broadcast.currentOutput.contains("https://watch.example.com/b/42") }
                try await BroadcastTests.waitFor("the first picture") { BroadcastTests.events(in: upload).contains { $0.hasPrefix("first picture") } }
                let started = BroadcastTests.events(in: upload).first { $0.hasPrefix("started") } ?? ""
                #expect(started == "started login=yes server=rtmp://ingest.example.com/live streamKey=from-setup-1234 title=Set up", "\(started)")

                let seen = BroadcastTests.events(in: setup)
                #expect(seen.contains("service \(Self.uploadID)"), "\(seen)")
                #expect(seen.contains { $0.hasPrefix("application ") && $0.contains("name=") }, "\(seen)")
                #expect(seen.contains("group read kept-by-the-app"), "the setup reads its own group: \(seen)")
                #expect(seen.contains { $0.hasPrefix("other group refused:") && $0.contains("belongs to the app group \(Self.group)") }, "\(seen)")
                let secrets = try String(contentsOf: groupFolder.appendingPathComponent("secrets.json"), encoding: .utf8)
                #expect(secrets.contains("from-setup"), "the setup wrote to its group: \(secrets)")

                let status = try await environment.replay(["status"], environment: env)
                // The setup's URL is the broadcast's (the seed says its own only when no setup gave one).
                #expect(status.stdout.contains("https://watch.example.com/b/42"), "\(status)")
                #expect(try await environment.replay(["stop"], environment: env).succeeded)
                let ended = try await broadcast.waitForExit(timeout: .seconds(20))
                #expect(ended.succeeded, "\(ended)")

                // The setup extension gone: the broadcast cannot be set up, and replay says what to do.
                try FileManager.default.removeItem(at: setup)
                let missing = try await environment.replay(["broadcast", "--service", Self.uploadID], environment: env, timeout: .seconds(30))
                #expect(!missing.succeeded && missing.stderr.contains("sets up its broadcasts with the setup extension \(Self.setupID), which is not installed")
                        && missing.stderr.contains("--setup KEY=VALUE"), "\(missing)")
            }
        }
    }
}
