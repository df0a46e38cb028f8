// A broadcast setup extension for the tests, written as iOS's template (Xcode's "Broadcast Setup UI
// Extension") is: `userDidFinishSetup()` and `userDidCancelSetup()` call the extension context. Which
// one runs, and with what, is said by `setup.json` in its folder (`ORK_EXTENSION_FOLDER`), written by
// the test: {"action": "complete", "broadcastURL": …, "setupInfo": {…}}, {"action": "cancel",
// "reason": …}, {"action": "exit"} (leaves without an answer) or {"action": "wait"} (never answers). What it sees goes, one line each,
// to `events.log` in the same folder: the application info, and its app group's answers.
import OpenReplayKit

class BroadcastSetupViewController: RPBroadcastSetupViewController {
    private let folder: String

    // Set up in `override init()`, as iOS controllers may be: the runtime makes it through its class.
    override init() {
        folder = ProcessInfo.processInfo.environment["ORK_EXTENSION_FOLDER"] ?? "/tmp"
        super.init()
    }

    override func viewDidLoad() {
        loadBroadcastingApplicationInfo { bundleID, displayName, appIcon in
            note("application \(bundleID) name=\(displayName) icon=\(appIcon?.path ?? "none")")
        }
        note("service \(extensionContext?.serviceIdentifier ?? "?")")
        // Its own app group (the manifest's) opens; another is refused.
        do {
            let group = try RPAppGroup(identifier: "org.openreplaykit.test")
            try group.set("from-setup", forKey: "setupWrote")
            note("group read \(try group.string(forKey: "streamKey") ?? "nothing")")
        } catch {
            note("group error \(error)")
        }
        do {
            _ = try RPAppGroup(identifier: "org.example.other")
            note("other group opened")
        } catch {
            note("other group refused: \(error)")
        }

        let order = (FileManager.default.contents(atPath: folder + "/setup.json"))
            .flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] } ?? [:]
        switch order["action"] as? String {
        case "complete":
            userDidFinishSetup(url: order["broadcastURL"] as? String, info: order["setupInfo"] as? [String: String] ?? [:])
        case "exit":
            note("leaving without an answer")
            exit(3)
        case "wait":
            // The person never answers: replayd ends it (SIGTERM) when the broadcast is stopped.
            note("waiting")
        default:
            userDidCancelSetup(reason: order["reason"] as? String ?? "no setup.json")
        }
    }

    // Call this method when the user has finished interacting with the view controller and a broadcast stream can start
    func userDidFinishSetup(url: String?, info: [String: String]) {
        // URL of the resource where broadcast can be viewed that will be returned to the application
        let broadcastURL = url.flatMap { URL(string: $0) }
        // Dictionary with setup information that will be provided to broadcast extension when broadcast is started
        var setupInfo: [String: any NSCoding & NSObjectProtocol] = [:]
        for (key, value) in info { setupInfo[key] = NSString(string: value) }
        note("completing")
        // Tell ReplayKit that the extension is finished setting up and can begin broadcasting
        self.extensionContext?.completeRequest(withBroadcast: broadcastURL, setupInfo: setupInfo)
    }

    func userDidCancelSetup(reason: String) {
        let error = NSError(domain: "org.openreplaykit.test", code: 3, userInfo: [NSLocalizedFailureReasonErrorKey: reason])
        note("cancelling")
        // Tell ReplayKit that the extension was cancelled by the user
        self.extensionContext?.cancelRequest(withError: error)
    }

    private func note(_ line: String) {
        let path = folder + "/events.log"
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let log = FileHandle(forWritingAtPath: path) else { return }
        log.seekToEndOfFile()
        log.write(Data((line + "\n").utf8))
        try? log.close()
    }
}
