// A broadcast setup extension's view controller set up in `override init()`, as iOS code may be,
// answering through its extension context. Only `import OpenReplayKit`. A compile fixture.
import OpenReplayKit

class BroadcastSetupViewController: RPBroadcastSetupViewController {
    private let defaults: UserDefaults?
    private var refreshTimer: Timer?

    override init() {
        defaults = UserDefaults(suiteName: "group.com.example.streamer")
        super.init()
    }

    override func viewDidLoad() {
        super.viewDidLoad()
        refreshTimer = Timer.scheduledTimer(withTimeInterval: 30, repeats: true) { _ in
            print("refresh the sign-in")
        }
    }

    func userDidFinishSetup() {
        let broadcastURL = URL(string: "https://example.com/live")
        let streamKey = defaults?.string(forKey: "streamKey") ?? ""
        let setupInfo: [String: NSCoding & NSObjectProtocol] = ["streamKey": streamKey as NSString]
        extensionContext?.completeRequest(withBroadcast: broadcastURL, setupInfo: setupInfo)
    }

    func userDidCancelSetup() {
        let error = NSError(domain: "com.example.streamer", code: -1, userInfo: nil)
        extensionContext?.cancelRequest(withError: error)
    }
}
