import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Who an app is, as the consent prompt names it: from the pid the kernel gave (SO_PEERCRED), its
/// executable (`/proc/PID/exe`), and the `.desktop` entry whose `Exec` runs that executable (its
/// `Name` and `Icon`), found in the XDG data folders' `applications/`; else the executable's name.
/// Nothing the app says about itself is used.
package struct AppIdentity: Sendable, Equatable {
    package var executable: String
    package var name: String
    /// A PNG (or other picture file) for the prompt, when the entry names one that exists.
    package var iconPath: String?
    /// What a broadcast's annotation calls it (`RPApplicationInfoBundleIdentifierKey`): its desktop
    /// entry's file name without `.desktop` (`org.gnome.Calculator`), else the executable's name.
    package var identifier: String
    /// For an interpreter (python3, perl, node, a shell…), the script it runs (an absolute path):
    /// each script is an app of its own, not every Python program one.
    package var script: String?

    package init(executable: String, name: String, iconPath: String?, identifier: String? = nil, script: String? = nil) {
        self.executable = executable
        self.name = name
        self.iconPath = iconPath
        self.script = script
        self.identifier = identifier ?? ((script ?? executable) as NSString).lastPathComponent
    }

    /// What the person's answer is remembered for: the executable, and the script it runs.
    package var consentKey: String { script.map { "\(executable) \($0)" } ?? executable }

    /// The identity of `pid`, or nil when the process is gone.
    package static func of(pid: Int32, environment: [String: String] = ProcessInfo.processInfo.environment) -> AppIdentity? {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") else { return nil }
        // A program replaced while running reads "… (deleted)": the path is still what ran.
        let path = executable.hasSuffix(" (deleted)") ? String(executable.dropLast(10)) : executable
        let script = isInterpreter(path) ? self.script(of: pid) : nil
        return identify(executable: path, script: script, dataDirectories: dataDirectories(environment))
    }

    /// Programs that run a script named on their command line.
    static func isInterpreter(_ executable: String) -> Bool {
        let name = (executable as NSString).lastPathComponent
        let interpreters = ["python", "perl", "ruby", "node", "nodejs", "gjs", "lua", "php", "bash", "sh", "dash", "zsh", "tclsh", "wish"]
        return interpreters.contains { name == $0 || (name.hasPrefix($0) && name.dropFirst($0.count).allSatisfy { $0.isNumber || $0 == "." }) }
    }

    /// The script an interpreter runs: its first argument that is not an option and names a file
    /// (relative to the process's folder when not absolute). `python3 -m module` runs no file: nil.
    static func script(of pid: Int32) -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        let arguments = data.split(separator: 0, omittingEmptySubsequences: false).dropFirst().map { String(decoding: $0, as: UTF8.self) }
        guard let first = arguments.first(where: { !$0.hasPrefix("-") && !$0.isEmpty }) else { return nil }
        if arguments.prefix(while: { $0 != first }).contains(where: { $0 == "-m" || $0 == "-c" || $0 == "-e" }) { return nil }
        let cwd = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd")) ?? "/"
        let path = first.hasPrefix("/") ? first : (cwd as NSString).appendingPathComponent(first)
        let standard = (path as NSString).standardizingPath
        var info = stat()
        return stat(standard, &info) == 0 && info.st_mode & S_IFMT == S_IFREG ? standard : nil
    }

    /// `$XDG_DATA_HOME` (default `~/.local/share`), then `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`).
    package static func dataDirectories(_ environment: [String: String]) -> [String] {
        let home = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"].map { $0 + "/.local/share" })
        let system = (environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share")
            .split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        return (home.map { [$0] } ?? []) + system
    }

    /// Finds the desktop entry of `executable` (of `script`, for an interpreter) in
    /// `dataDirectories`' `applications/` folders.
    package static func identify(executable: String, script: String? = nil, dataDirectories: [String]) -> AppIdentity {
        let program = script ?? executable
        let base = (program as NSString).lastPathComponent
        for directory in dataDirectories {
            let applications = directory + "/applications"
            guard let files = try? FileManager.default.contentsOfDirectory(atPath: applications) else { continue }
            for file in files.sorted() where file.hasSuffix(".desktop") {
                guard let text = try? String(contentsOfFile: applications + "/" + file, encoding: .utf8),
                      let entry = DesktopEntry(text), entry.runs(executable: program) || (script != nil && entry.runs(script: script!)) else { continue }
                return AppIdentity(executable: executable, name: entry.name ?? base,
                                   iconPath: entry.icon.flatMap { iconFile($0, dataDirectories: dataDirectories) },
                                   identifier: String(file.dropLast(".desktop".count)), script: script)
            }
        }
        return AppIdentity(executable: executable, name: base, iconPath: nil, script: script)
    }

    /// An icon name's file: an absolute path as is, else the largest hicolor PNG, else pixmaps.
    static func iconFile(_ icon: String, dataDirectories: [String]) -> String? {
        if icon.hasPrefix("/") { return access(icon, R_OK) == 0 ? icon : nil }
        for directory in dataDirectories {
            for size in ["256x256", "128x128", "96x96", "64x64", "48x48", "32x32"] {
                let path = "\(directory)/icons/hicolor/\(size)/apps/\(icon).png"
                if access(path, R_OK) == 0 { return path }
            }
            let pixmap = "\(directory)/pixmaps/\(icon).png"
            if access(pixmap, R_OK) == 0 { return pixmap }
        }
        return nil
    }
}

/// The `[Desktop Entry]` group of a `.desktop` file: what the prompt needs.
package struct DesktopEntry: Sendable, Equatable {
    package var name: String?
    package var exec: String?
    package var tryExec: String?
    package var icon: String?

    package init?(_ text: String) {
        var inGroup = false
        var found = false
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("#") || line.isEmpty { continue }
            if line.hasPrefix("[") {
                inGroup = line == "[Desktop Entry]"
                found = found || inGroup
                continue
            }
            guard inGroup, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            switch key {
            case "Name": name = value
            case "Exec": exec = value
            case "TryExec": tryExec = value
            case "Icon": icon = value
            default: break
            }
        }
        guard found else { return nil }
    }

    /// The program `Exec` runs: its first word (quotes removed), after `env VAR=…` if any.
    package var program: String? {
        guard let exec else { return nil }
        var words = Self.words(exec)
        if words.first == "env" || words.first == "/usr/bin/env" {
            words.removeFirst()
            while let first = words.first, first.contains("=") { words.removeFirst() }
        }
        return words.first
    }

    /// True when this entry starts `executable`: `Exec`'s (or `TryExec`'s) program is that path,
    /// or has its name when `Exec` gives a bare name (looked up on PATH).
    package func runs(executable: String) -> Bool {
        let base = (executable as NSString).lastPathComponent
        for program in [program, tryExec].compactMap({ $0 }) {
            if program == executable { return true }
            if !program.contains("/") && program == base { return true }
            if program.contains("/"), (program as NSString).resolvingSymlinksInPath == executable { return true }
        }
        return false
    }

    /// True when `Exec` runs `script` through an interpreter (`python3 /opt/app/main.py`).
    package func runs(script: String) -> Bool {
        guard let exec else { return false }
        return Self.words(exec).dropFirst().contains { $0 == script }
    }

    private static func words(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quoted = false
        for character in text {
            if character == "\"" { quoted.toggle(); continue }
            if character == " " && !quoted {
                if !current.isEmpty { words.append(current) }
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { words.append(current) }
        return words
    }
}
