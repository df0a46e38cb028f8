import OpenReplayKit

RPBroadcastExtensionMain(SampleHandler.self)
