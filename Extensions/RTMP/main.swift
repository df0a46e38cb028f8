import OpenReplayKit

// The RTMP/SRT broadcast upload extension (org.openreplaykit.rtmp): NSExtensionMain's role.
RPBroadcastExtensionMain(RTMPSampleHandler.self)
