import Foundation
import ReplayTesting
import Testing

extension SystemTests {
    /// Issue 14.2: `make install` puts the desktop entry, the icon, the man pages and the completion
    /// scripts where desktops, man and the shells look (and the C API for apps, issue 13); each one works; `make uninstall` removes all.
    @Suite("make install")
    struct InstallTests {
        static var packageRoot: String {
            var url = URL(fileURLWithPath: #filePath)
            while url.path != "/", !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
                url = url.deletingLastPathComponent()
            }
            return url.path
        }

        static let files = [
            "bin/replay", "bin/replayd", "bin/replay-ui", "lib/systemd/user/replayd.service",
            "share/applications/org.openreplaykit.ScreenRecording.desktop",
            "share/icons/hicolor/scalable/apps/org.openreplaykit.ScreenRecording.svg",
            "share/icons/hicolor/48x48/apps/org.openreplaykit.ScreenRecording.png",
            "share/icons/hicolor/256x256/apps/org.openreplaykit.ScreenRecording.png",
            "share/man/man1/replay.1", "share/man/man1/replayd.1",
            "share/bash-completion/completions/replay", "share/zsh/site-functions/_replay",
            "share/fish/vendor_completions.d/replay.fish",
            "lib/libopenreplaykit.so", "include/openreplaykit.h", "lib/pkgconfig/openreplaykit.pc",
            "share/openreplaykit/extensions/org.openreplaykit.rtmp.orkextension/manifest.json",
            "share/openreplaykit/extensions/org.openreplaykit.rtmp.orkextension/icon.png",
            "share/openreplaykit/extensions/org.openreplaykit.rtmp.orkextension/replay-extension-rtmp",
            "share/openreplaykit/extensions/org.openreplaykit.rtmp.setup.orkextension/manifest.json",
            "share/openreplaykit/extensions/org.openreplaykit.rtmp.setup.orkextension/replay-extension-rtmp-setup",
            "share/openreplaykit/extensions/org.openreplaykit.reference.orkextension/manifest.json",
            "share/openreplaykit/extensions/org.openreplaykit.reference.orkextension/icon.png",
            "share/openreplaykit/extensions/org.openreplaykit.reference.orkextension/replay-extension-reference",
            // GNOME Shell 43 here: the 43/44 build of the extension that names an app's windows to replayd.
            "share/gnome-shell/extensions/openreplaykit@openreplaykit.org/metadata.json",
            "share/gnome-shell/extensions/openreplaykit@openreplaykit.org/extension.js",
        ]

        @Test("make install DESTDIR=…: every file in place and working; make uninstall removes them", .timeLimit(.minutes(20)))
        func installsEverything() async throws {
            let destination = try makeTemporaryDirectory(prefix: "ork-install")
            defer { try? FileManager.default.removeItem(at: destination) }
            // The debug build the tests run (built already); --ignore-lock because `swift test` holds
            // the build folder's lock while the plugin that writes the man pages needs it.
            let variables = ["CONFIGURATION=debug", "BUILT_BIN=\(Binaries.directory.path)", "DESTDIR=\(destination.path)",
                             "PREFIX=/usr", "SWIFT_PACKAGE_FLAGS=--ignore-lock"]
            let install = try await ProcessRunner.run("/usr/bin/make", arguments: ["-C", Self.packageRoot, "install"] + variables,
                                                      timeout: .seconds(1100))
            try #require(install.succeeded, "\(install.stdout.suffix(3000))\n\(install.stderr.suffix(3000))")
            let root = destination.path + "/usr/"
            for file in Self.files {
                #expect(FileManager.default.fileExists(atPath: root + file), "make install puts \(file) under PREFIX")
            }

            // The desktop entry is valid, starts or stops through `replay toggle`, and names the icon.
            let desktop = root + "share/applications/org.openreplaykit.ScreenRecording.desktop"
            let entry = try String(contentsOfFile: desktop, encoding: .utf8)
            #expect(entry.contains("Exec=/usr/bin/replay toggle --notify\n"), "\(entry)")
            #expect(entry.contains("Name=Record with Microphone") && entry.contains("Name=Stop"), "\(entry)")
            if let validator = try? ProcessRunner.resolve("desktop-file-validate") {
                let validation = try await ProcessRunner.run(validator, arguments: [desktop])
                #expect(validation.succeeded && validation.stdout.isEmpty, "desktop-file-validate: \(validation)")
            }

            // man renders both pages, with the subcommands and options of --help.
            for (page, words) in [("replay", ["toggle", "record", "--duration", "--notify"]), ("replayd", ["replayd"])] {
                let man = try await ProcessRunner.run("/usr/bin/man", arguments: ["-l", "-P", "cat", root + "share/man/man1/\(page).1"],
                                                      environment: ["PATH": "/usr/bin:/bin", "MANWIDTH": "100", "LANG": "C.UTF-8"])
                #expect(man.succeeded, "man -l \(page).1: \(man)")
                for word in words { #expect(man.stdout.contains(word), "man \(page) mentions \(word): \(man.stdout.prefix(1500))") }
            }

            // bash completes `replay re` to record.
            let script = root + "share/bash-completion/completions/replay"
            let bash = try await ProcessRunner.run("/bin/bash", arguments: ["-c", """
                source '\(script)' || exit 1
                COMP_WORDS=(replay re); COMP_CWORD=1; COMP_LINE='replay re'; COMP_POINT=${#COMP_LINE}
                _replay replay re replay
                printf '%s\\n' "${COMPREPLY[@]}"
                """])
            #expect(bash.succeeded && bash.stdout.split(separator: "\n").contains("record"), "bash completion of `replay re`: \(bash)")
            let zsh = try String(contentsOfFile: root + "share/zsh/site-functions/_replay", encoding: .utf8)
            #expect(zsh.hasPrefix("#compdef replay"), "\(zsh.prefix(200))")
            let fish = try String(contentsOfFile: root + "share/fish/vendor_completions.d/replay.fish", encoding: .utf8)
            #expect(fish.contains("toggle"), "\(fish.prefix(300))")

            let uninstall = try await ProcessRunner.run("/usr/bin/make", arguments: ["-C", Self.packageRoot, "uninstall"] + variables)
            #expect(uninstall.succeeded, "\(uninstall)")
            for file in Self.files {
                #expect(!FileManager.default.fileExists(atPath: root + file), "make uninstall removes \(file)")
            }
        }
    }
}
