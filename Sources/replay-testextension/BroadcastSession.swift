import Foundation
import OpenReplayKit
#if canImport(Glibc)
import Glibc
#endif

/// The talk's service-side helpers, for the tests: what the handler is called with goes, one line
/// each, to `events.log` in the extension's folder (`ORK_EXTENSION_FOLDER`), where the tests read
/// it. Pictures and sound are counted and the first of each noted, with its size.
///
/// Misbehaviour on purpose, chosen by `--setup behave=…`: `crash` (abort after 10 pictures),
/// `hang` (block in processSampleBuffer), `memory` (keep 200 MB), `fail` (finishBroadcastWithError),
/// or by logging in wrong (`--setup login=no`: "Not Logged In", 401, as the talk does).
final class BroadcastSession: @unchecked Sendable {
    static let instance = BroadcastSession()
    private let lock = NSLock()
    private var log: FileHandle?
    private var pictures = 0
    private var audioChunks: [String: Int] = [:]
    private var behave = ""
    /// Set up by a setup extension (its `server`): the URL it gave stays the broadcast's.
    private var setUp = false
    private var hoard: [[UInt8]] = []
    private let colours = ColourTally()

    private init() {
        let folder = ProcessInfo.processInfo.environment["ORK_EXTENSION_FOLDER"] ?? "/tmp"
        let path = folder + "/events.log"
        // Appended to: a test that broadcasts twice reads both broadcasts' lines.
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        log = FileHandle(forWritingAtPath: path)
        log?.seekToEndOfFile()
    }

    func note(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        log?.write(Data((line + "\n").utf8))
    }

    func authentificate(_ credentials: String) { note("authenticated \(credentials)") }

    /// The main thread runs its run loop in an extension, as on iOS: a `Timer` on `RunLoop.main` and
    /// the main queue each note their first run (`main run loop timer`, `main queue`).
    func startStatistics() {
        DispatchQueue.main.async { self.note("main queue") }
        let timer = Timer(timeInterval: 0.2, repeats: true) { timer in
            self.note("main run loop timer")
            timer.invalidate()
        }
        RunLoop.main.add(timer, forMode: .default)
    }

    func userLoggedIn(_ setupInfo: [String: NSObject]?) -> Bool {
        let info = setupInfo ?? [:]
        note("started " + info.keys.sorted().map { "\($0)=\(info[$0]!)" }.joined(separator: " "))
        behave = info["behave"]?.description ?? ""
        setUp = info["server"] != nil
        return info["login"]?.description != "no"
    }

    func createMediaEngine() {
        note("media engine")
        if behave == "memory" {
            // 200 MB, touched, so that it is resident.
            for _ in 0..<200 { hoard.append([UInt8](repeating: 1, count: 1 << 20)) }
            note("holding \(hoard.count) MB")
        }
        if behave == "fail" {
            DispatchQueue.global().asyncAfter(deadline: .now() + 1) {
                let error = NSError(domain: "org.openreplaykit.test", code: 7, userInfo: [NSLocalizedFailureReasonErrorKey: "the test service refused the stream"])
                SampleHandlerBox.handler?.finishBroadcastWithError(error)
            }
        }
    }

    func encode(_ image: CVImageBuffer, _ pts: CMTime) {
        pictures += 1
        if pictures == 1 {
            note("first picture \(CVPixelBufferGetWidth(image))x\(CVPixelBufferGetHeight(image)) at \(pts.seconds)")
            // Live: where viewers watch, and the service's figures (the app's delegate hears both).
            if !setUp {
                SampleHandlerBox.handler?.updateBroadcastURL(URL(string: "https://seed.example/watch/\(ProcessInfo.processInfo.processIdentifier)")!)
            }
            SampleHandlerBox.handler?.updateServiceInfo(["viewers": "3" as NSString, "comment": "hello from the seed" as NSString])
        }
        colours.add(image, note: note)
        if pictures % 10 == 0 { note("pictures \(pictures)") }
        if behave == "crash", pictures == 10 { abort() }
        if behave == "hang", pictures == 5 {
            note("hanging")
            while true { sleep(1000) }
        }
    }

    func audio(_ kind: String, _ buffer: CMSampleBuffer) {
        audioChunks[kind, default: 0] += 1
        let count = audioChunks[kind]!
        if count == 1 { note("first \(kind) audio, \(CMSampleBufferGetNumSamples(buffer)) frames") }
        if count % 50 == 0 { note("\(kind) audio \(count)") }
    }

    func addMetadataWithApplicationInfo(_ bundleIdentifier: Any?) {
        note("annotated \(bundleIdentifier.map { "\($0)" } ?? "nil")")
    }
}

/// The talk's keychain: the app group's login (a fixed one for the tests).
enum KeychainAccess {
    static func getLoginCredentials() -> String { "tester" }
}

/// The running handler, for the `fail` behaviour's delayed finishBroadcastWithError.
enum SampleHandlerBox {
    nonisolated(unsafe) static var handler: RPBroadcastSampleHandler?
}
