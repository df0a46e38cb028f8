import ArgumentParser
import ReplayIPC
import Foundation

/// `replay extension new`: writes a new broadcast upload extension package, ready to build and install.
struct ExtensionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extension",
        abstract: "Make broadcast extensions (see docs/WRITING-AN-EXTENSION.md).",
        subcommands: [New.self])

    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new broadcast upload extension package: a SampleHandler, its manifest and an install script.",
            discussion: """
                Writes DIRECTORY/NAME/ (default: the current folder) with Package.swift (OpenReplayKit as a \
                path dependency), Sources/EXE/main.swift and SampleHandler.swift, Extension/manifest.json, \
                install.sh and a README. `./install.sh` builds it and installs it in \
                $XDG_DATA_HOME/openreplaykit/extensions/ID.orkextension/, where `replay services` lists it.

                Examples:
                  replay extension new MyStream --identifier org.example.mystream
                  cd MyStream && ./install.sh && replay services
                  replay broadcast --service org.example.mystream --setup key=abc123
                """)

        @Argument(help: ArgumentHelp("The package's name: letters, digits, - and _, starting with a letter (MyStream).", valueName: "name"))
        var name: String

        @Option(help: ArgumentHelp("The extension's reverse-DNS identifier. Default: org.example.NAME (lowercased).", valueName: "id"))
        var identifier: String?

        @Option(help: ArgumentHelp("Where the package's folder is made. Default: the current folder.", valueName: "folder"))
        var directory: String?

        @Option(help: ArgumentHelp("The OpenReplayKit source checkout to build against. Default: the one this replay was built from.", valueName: "folder"))
        var openreplaykit: String?

        var resolvedIdentifier: String { identifier ?? "org.example." + name.lowercased().replacingOccurrences(of: "_", with: "-") }

        func validate() throws {
            guard let first = name.unicodeScalars.first, CharacterSet.letters.contains(first),
                  name.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" }) else {
                throw ValidationError("\"\(name)\" cannot name a package: use letters, digits, - and _, starting with a letter (MyStream).")
            }
            guard ExtensionManifest.isReverseDNS(resolvedIdentifier) else {
                throw ValidationError("--identifier \"\(resolvedIdentifier)\" is not reverse-DNS: write it as org.example.mystream.")
            }
        }

        func run() throws {
            let checkout = try Self.checkout(openreplaykit)
            let parent = directory.map { ($0 as NSString).expandingTildeInPath } ?? FileManager.default.currentDirectoryPath
            let root = URL(fileURLWithPath: parent).appendingPathComponent(name).standardizedFileURL
            guard !FileManager.default.fileExists(atPath: root.path) else {
                throw fail("\(root.path) already exists: choose another name or --directory.")
            }
            let template = ExtensionTemplate(name: name, identifier: resolvedIdentifier, checkout: checkout)
            for (path, contents, executable) in template.files {
                let file = root.appendingPathComponent(path)
                try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(contents.utf8).write(to: file)
                if executable { try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: file.path) }
            }
            printOutput(root.path)
            printError("replay: wrote the extension \(resolvedIdentifier) in \(root.path): `cd \(root.path) && ./install.sh`, then `replay services`.")
        }

        /// The OpenReplayKit checkout: the one given, else the one whose `.build` this replay runs from.
        static func checkout(_ given: String?) throws -> String {
            func isCheckout(_ folder: String) -> Bool {
                guard let manifest = try? String(contentsOfFile: folder + "/Package.swift", encoding: .utf8) else { return false }
                return manifest.contains("name: \"OpenReplayKit\"")
            }
            if let given {
                let folder = URL(fileURLWithPath: (given as NSString).expandingTildeInPath).standardizedFileURL.path
                guard isCheckout(folder) else { throw fail("\(folder) is not an OpenReplayKit source checkout (no Package.swift naming OpenReplayKit).") }
                return folder
            }
            var folder = ExtensionCatalog.currentExecutable().map { ($0 as NSString).deletingLastPathComponent } ?? ""
            while folder.count > 1 {
                if isCheckout(folder) { return folder }
                folder = (folder as NSString).deletingLastPathComponent
            }
            throw fail("this replay was not built from an OpenReplayKit checkout: say where one is with --openreplaykit FOLDER.")
        }
    }
}

/// The files of a new upload extension package: (path in the package, contents, executable).
struct ExtensionTemplate {
    var name: String
    var identifier: String
    var checkout: String

    /// The executable's (and target's) name: `mystream-upload`.
    var executable: String { name.lowercased().replacingOccurrences(of: "_", with: "-") + "-upload" }
    /// SwiftPM names a path dependency after its folder.
    var packageIdentity: String { (checkout as NSString).lastPathComponent }

    var files: [(String, String, Bool)] {
        [
            ("Package.swift", packageManifest, false),
            ("Sources/\(executable)/main.swift", mainFile, false),
            ("Sources/\(executable)/SampleHandler.swift", sampleHandler, false),
            ("Extension/manifest.json", manifest, false),
            ("install.sh", installScript, true),
            ("README.md", readme, false),
            (".gitignore", ".build/\n", false),
        ]
    }

    var packageManifest: String {
        """
        // swift-tools-version: 6.1
        import PackageDescription

        // \(name): an OpenReplayKit broadcast upload extension (\(identifier)).
        let package = Package(
            name: "\(name)",
            dependencies: [.package(path: "\(checkout)")],
            targets: [
                .executableTarget(name: "\(executable)",
                                  dependencies: [.product(name: "OpenReplayKit", package: "\(packageIdentity)")]),
            ]
        )

        """
    }

    var mainFile: String {
        """
        import OpenReplayKit

        // NSExtensionMain's role: replayd starts this program for a broadcast to \(identifier).
        RPBroadcastExtensionMain(SampleHandler.self)

        """
    }

    var sampleHandler: String {
        """
        import Foundation
        import OpenReplayKit

        /// \(name)'s upload extension: ReplayKit's RPBroadcastSampleHandler. replayd calls it from one
        /// serial queue; what it prints goes to extension-\(identifier).log in $XDG_RUNTIME_DIR/openreplaykit/.
        class SampleHandler: RPBroadcastSampleHandler {
            private var pictures = 0

            override func broadcastStarted(withSetupInfo setupInfo: [String: NSObject]?) {
                // The stream key: from the setup (`replay broadcast --setup key=…`), else the one kept in
                // the app group (the shared keychain's role; see docs/WRITING-AN-EXTENSION.md, "App groups").
                let key = setupInfo?["key"]?.description
                    ?? (try? RPAppGroup(identifier: "\(identifier)").string(forKey: "key"))
                guard let key, !key.isEmpty else {
                    finishBroadcastWithError(NSError(domain: "\(identifier)", code: 401,
                                                     userInfo: [NSLocalizedFailureReasonErrorKey: "Not Logged In: start with --setup key=YOUR_KEY"]))
                    return
                }
                print("\(name): broadcast started with key \\(key.prefix(3))…")
                // Connect to your service here, then say where viewers watch:
                // updateBroadcastURL(URL(string: "https://example.com/watch/\\(key)")!)
            }

            override func processSampleBuffer(_ sampleBuffer: CMSampleBuffer, with sampleBufferType: RPSampleBufferType) {
                switch sampleBufferType {
                case .video:
                    // NV12, full range, in shared memory: encode it (or copy what you need) and return quickly.
                    pictures += 1
                    if pictures % 300 == 0 { print("\(name): \\(pictures) pictures") }
                case .audioApp, .audioMic:
                    // Float32 interleaved, 48 kHz stereo: what the computer plays, and the microphone.
                    break
                }
            }

            override func broadcastAnnotated(withApplicationInfo applicationInfo: [AnyHashable: Any]) {
                print("\(name): now showing \\(applicationInfo[RPApplicationInfoNameKey] ?? "?")")
            }

            override func broadcastPaused() {}
            override func broadcastResumed() {}

            override func broadcastFinished() {
                print("\(name): finished after \\(pictures) pictures")
            }
        }

        """
    }

    var manifest: String {
        """
        {
          "identifier": "\(identifier)",
          "displayName": "\(name)",
          "kind": "broadcast-upload",
          "executable": "\(executable)",
          "appGroup": "\(identifier)"
        }

        """
    }

    var installScript: String {
        """
        #!/bin/sh
        # Builds \(name) and installs it where replayd finds extensions; `replay services` then lists it.
        set -e
        cd "$(dirname "$0")"
        swift build -c release --product \(executable)
        destination="${XDG_DATA_HOME:-$HOME/.local/share}/openreplaykit/extensions/\(identifier).orkextension"
        mkdir -p "$destination"
        cp Extension/manifest.json "$destination/"
        [ -f Extension/icon.png ] && cp Extension/icon.png "$destination/"
        cp "$(swift build -c release --show-bin-path)/\(executable)" "$destination/"
        echo "installed in $destination"

        """
    }

    var readme: String {
        """
        # \(name)

        An OpenReplayKit broadcast upload extension, `\(identifier)`, made by `replay extension new`.

        ```sh
        ./install.sh                # swift build -c release, then into ~/.local/share/openreplaykit/extensions/
        replay services             # \(identifier)   \(name)   no setup
        replay broadcast --service \(identifier) --setup key=abc123
        ```

        `Sources/\(executable)/SampleHandler.swift` is where your service's code goes. Add an `icon.png`
        to `Extension/` (and `"icon": "icon.png"` to its manifest) for the picker; a setup extension
        (a sign-in window) is a second executable whose identifier the manifest names in
        `"setupExtension"`. OpenReplayKit's docs/WRITING-AN-EXTENSION.md says it all.

        """
    }
}
