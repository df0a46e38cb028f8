import ArgumentParser
import ReplayIPC
import Foundation

struct Services: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the broadcast services (installed upload extensions) that `replay broadcast --service` can use.",
        discussion: """
            Extensions are folders ID.orkextension/ with a manifest.json, found in \
            $XDG_DATA_HOME/openreplaykit/extensions/ (default ~/.local/share/…), then \
            PREFIX/share/openreplaykit/extensions/ (where replay is installed, and each $XDG_DATA_DIRS \
            entry's), then the extensions that ship with OpenReplayKit, beside replay itself after a \
            build. A malformed manifest is skipped, and said so on stderr with its file and field. \
            See docs/WRITING-AN-EXTENSION.md.

            Examples:
              replay services
              replay services --json | jq -r '.[].identifier'
            """)

    @Flag(help: "Print the services as one JSON array of manifests (identifier, displayName, icon, kind, executable, setupExtension, appGroup, folder).")
    var json = false

    func run() throws {
        let catalog = ExtensionCatalog.load()
        for problem in catalog.problems { printError("replay: \(problem)") }
        let services = catalog.services
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            printOutput(String(decoding: try encoder.encode(services), as: UTF8.self))
            return
        }
        guard !services.isEmpty else {
            printOutput("no broadcast services are installed (see docs/WRITING-AN-EXTENSION.md)")
            return
        }
        for service in services {
            let setup = service.setupExtension.map { "setup: \($0)" } ?? "no setup"
            printOutput("\(service.identifier)\t\(service.displayName)\t\(setup)")
        }
    }
}
