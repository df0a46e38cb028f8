import OpenReplayKit

// The reference-service broadcast upload extension (org.openreplaykit.reference): NSExtensionMain's role.
RPBroadcastExtensionMain(ReferenceSampleHandler.self)
