// An upload extension's main.swift (Linux only: iOS has NSExtensionMain), both ways: from the
// handler's class, and through a factory for a handler made with arguments. A class with an
// initializer of its own that takes arguments also overrides `init()` (the one iOS calls), here as a
// convenience initializer: so it inherits what the runtime calls (docs/PORTING.md).
// A compile fixture of OpenReplayKitTests (type-checked as a main file, never run).
import OpenReplayKit

final class ConfiguredHandler: RPBroadcastSampleHandler {
    let ingest: URL

    init(ingest: URL) {
        self.ingest = ingest
        super.init()
    }

    override convenience init() {
        self.init(ingest: URL(string: "rtmp://localhost/live")!)
    }
}

class PlainHandler: RPBroadcastSampleHandler {}

if CommandLine.arguments.contains("--plain") {
    RPBroadcastExtensionMain(PlainHandler.self)
}
RPBroadcastExtensionMain { ConfiguredHandler(ingest: URL(string: "rtmp://ingest.example.com/live")!) }
