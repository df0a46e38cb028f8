import OpenReplayKit

// The RTMP/SRT extension's setup (org.openreplaykit.rtmp.setup): NSExtensionMain's role.
RPBroadcastSetupExtensionMain(RTMPSetupViewController.self)
