import Testing
import Foundation
import ReplayIPC
import ReplayTesting
@testable import ReplayDaemon

/// The consent policy: answers per executable, held 8 minutes on an injected clock; who an app is.
@Suite("Consent and app identity")
struct ConsentTests {
    let start = ContinuousClock.now
    let app = "/usr/bin/sketchpad"

    @Test func anAnswerHoldsEightMinutesThenThePromptComesAgain() {
        var store = ConsentStore()
        #expect(store.answer(for: app, now: start) == nil, "first start: ask")
        store.record(.allow, for: app, name: "SketchPad", now: start)
        #expect(store.answer(for: app, now: start + .seconds(1)) == .allow)
        #expect(store.answer(for: app, now: start + .seconds(8 * 60 - 1)) == .allow)
        #expect(store.answer(for: "/usr/bin/other", now: start + .seconds(1)) == nil, "another program is asked itself")
        #expect(store.answer(for: app, now: start + .seconds(8 * 60)) == nil, "after 8 minutes: ask again")
        #expect(store.list(now: start + .seconds(8 * 60)).isEmpty)
    }

    @Test func aRefusalIsRememberedToo() {
        var store = ConsentStore()
        store.record(.deny, for: app, name: "SketchPad", now: start)
        #expect(store.answer(for: app, now: start + .seconds(60)) == .deny)
        let listed = store.list(now: start + .seconds(60))
        #expect(listed == [ConsentEntry(executable: app, name: "SketchPad", answer: "deny", remainingSeconds: 420)])
    }

    @Test(arguments: ["/usr/bin/sketchpad", "sketchpad", "SketchPad"])
    func resetForgetsOneAppByPathProgramOrName(_ key: String) {
        var store = ConsentStore()
        store.record(.allow, for: app, name: "SketchPad", now: start)
        store.record(.deny, for: "/opt/game/bin/game", name: "Game", now: start)
        let removed = store.reset(key, now: start + .seconds(5))
        #expect(removed.map(\.executable) == [app])
        #expect(store.answer(for: app, now: start + .seconds(6)) == nil)
        #expect(store.answer(for: "/opt/game/bin/game", now: start + .seconds(6)) == .deny)
        #expect(store.reset(nil, now: start + .seconds(7)).map(\.executable) == ["/opt/game/bin/game"])
        #expect(store.list(now: start + .seconds(8)).isEmpty)
    }

    @Test func desktopEntryNamesTheProgramItRuns() throws {
        let entry = try #require(DesktopEntry("""
            # a comment
            [Desktop Entry]
            Type=Application
            Name=Sketch Pad
            Exec=env GDK_BACKEND=x11 "/opt/sketch pad/bin/sketchpad" %U
            Icon=sketchpad

            [Desktop Action New]
            Name=New Drawing
            Exec=other
            """))
        #expect(entry.name == "Sketch Pad")
        #expect(entry.program == "/opt/sketch pad/bin/sketchpad")
        #expect(entry.runs(executable: "/opt/sketch pad/bin/sketchpad"))
        #expect(!entry.runs(executable: "/usr/bin/sketchpad"), "a full Exec path names one program")
        let bare = try #require(DesktopEntry("[Desktop Entry]\nName=Pad\nExec=sketchpad --new\n"))
        #expect(bare.runs(executable: "/usr/bin/sketchpad"), "a bare Exec name matches the executable's name")
        #expect(!bare.runs(executable: "/usr/bin/sketchpad2"))
        #expect(DesktopEntry("Name=x\n") == nil, "no [Desktop Entry] group")
    }

    @Test func identityComesFromTheDesktopEntryElseTheExecutableName() throws {
        let data = FileManager.default.temporaryDirectory.path + "/ork-xdg-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: data) }
        try FileManager.default.createDirectory(atPath: data + "/applications", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: data + "/icons/hicolor/128x128/apps", withIntermediateDirectories: true)
        try "[Desktop Entry]\nName=Sketch Pad\nExec=sketchpad\nIcon=sketchpad\n".write(toFile: data + "/applications/org.example.Sketch.desktop", atomically: true, encoding: .utf8)
        try Data([0x89, 0x50, 0x4e, 0x47]).write(to: URL(fileURLWithPath: data + "/icons/hicolor/128x128/apps/sketchpad.png"))

        let known = AppIdentity.identify(executable: "/usr/bin/sketchpad", dataDirectories: ["/nonexistent", data])
        #expect(known == AppIdentity(executable: "/usr/bin/sketchpad", name: "Sketch Pad", iconPath: data + "/icons/hicolor/128x128/apps/sketchpad.png",
                                     identifier: "org.example.Sketch"), "a broadcast's annotation names it by its desktop entry")
        let unknown = AppIdentity.identify(executable: "/usr/local/bin/mystery", dataDirectories: [data])
        #expect(unknown == AppIdentity(executable: "/usr/local/bin/mystery", name: "mystery", iconPath: nil))
        #expect(unknown.identifier == "mystery")
        // The running test itself, from the kernel's word.
        let me = try #require(AppIdentity.of(pid: getpid(), environment: ["XDG_DATA_DIRS": data]))
        #expect(me.executable == (try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")))
        #expect(AppIdentity.dataDirectories(["HOME": "/home/u"]) == ["/home/u/.local/share", "/usr/local/share", "/usr/share"])
    }

    /// Issue 29: every Python script shared one answer (the interpreter's). An interpreter's app is
    /// the interpreter and its script: another script is asked again; `python3 -c` runs no file.
    @Test func eachScriptOfAnInterpreterIsAnAppOfItsOwn() async throws {
        let folder = try makeTemporaryDirectory(prefix: "ork-scripts")
        defer { try? FileManager.default.removeItem(at: folder) }
        for name in ["painter.py", "thief.py"] {
            try "import time\ntime.sleep(20)\n".write(to: folder.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let painter = try BackgroundProcess("/usr/bin/python3", arguments: ["-u", "painter.py"], workingDirectory: folder.path)
        let thief = try BackgroundProcess("/usr/bin/python3", arguments: [folder.appendingPathComponent("thief.py").path])
        let inline = try BackgroundProcess("/usr/bin/python3", arguments: ["-c", "import time; time.sleep(20)"])
        defer { for process in [painter, thief, inline] { process.signal(SIGKILL) } }
        try await Task.sleep(for: .milliseconds(300))
        let a = try #require(AppIdentity.of(pid: painter.pid, environment: [:]))
        let b = try #require(AppIdentity.of(pid: thief.pid, environment: [:]))
        let c = try #require(AppIdentity.of(pid: inline.pid, environment: [:]))
        let python = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(painter.pid)/exe")
        #expect(a.script == folder.appendingPathComponent("painter.py").path, "a relative script, from the process's folder")
        #expect(a.consentKey == "\(python) \(folder.appendingPathComponent("painter.py").path)" && a.name == "painter.py")
        #expect(b.consentKey != a.consentKey, "another script is another app")
        #expect(c.script == nil && c.consentKey == python, "python3 -c runs no file")
        var store = ConsentStore()
        let now = ContinuousClock.now
        store.record(.allow, for: a.consentKey, name: a.name, now: now)
        #expect(store.answer(for: b.consentKey, now: now) == nil, "the thief is asked for itself")
        #expect(store.answer(for: a.consentKey, now: now) == .allow)
    }
}
