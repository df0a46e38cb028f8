public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where a desktop user keeps videos: the XDG "Videos" user directory.
///
/// Desktops write it to `user-dirs.dirs` (by xdg-user-dirs, in the user's language: `"$HOME/Filme"`
/// on a German desktop, or wherever the user moved it); few sessions export it as a variable.
public enum VideosFolder {
    /// `$XDG_VIDEOS_DIR` when set, else `XDG_VIDEOS_DIR` in `$XDG_CONFIG_HOME/user-dirs.dirs`
    /// (`~/.config/user-dirs.dirs`), else `~/Videos`.
    public static func path(environment: [String: String]) -> String {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        if let videos = environment["XDG_VIDEOS_DIR"], !videos.isEmpty { return videos }
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        if let contents = try? String(contentsOfFile: config + "/user-dirs.dirs", encoding: .utf8),
           let videos = videosDirectory(inUserDirs: contents, home: home) {
            return videos
        }
        return home + "/Videos"
    }

    /// The name `replay record` and the preview's Save give a recording made at `date`:
    /// `Screen Recording YYYY-MM-DD at HH.MM.SS.mp4`, local time.
    public static func recordingName(at date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var t = tm()
        localtime_r(&seconds, &t)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "Screen Recording \(t.tm_year + 1900)-\(two(t.tm_mon + 1))-\(two(t.tm_mday)) at \(two(t.tm_hour)).\(two(t.tm_min)).\(two(t.tm_sec)).mp4"
    }

    /// `folder/recordingName(at: date)`, with " (2)", " (3)"… added when a recording of the same
    /// second is there already.
    public static func unusedRecordingPath(in folder: String, at date: Date) -> String {
        let name = recordingName(at: date)
        var path = folder + "/" + name
        var copy = 2
        while FileManager.default.fileExists(atPath: path), copy < 1000 {
            path = folder + "/" + (name as NSString).deletingPathExtension + " (\(copy)).mp4"
            copy += 1
        }
        return path
    }

    /// The `XDG_VIDEOS_DIR` line of a `user-dirs.dirs` file: `XDG_VIDEOS_DIR="$HOME/Videos"` or an
    /// absolute path, in double quotes (the format xdg-user-dirs writes and documents); nil when
    /// the file has no such line or it is malformed. The last line wins, as when a shell reads it.
    static func videosDirectory(inUserDirs contents: String, home: String) -> String? {
        var found: String?
        for line in contents.split(whereSeparator: \.isNewline) {
            let line = line.trimmingCharacters(in: .whitespaces)
            guard line.hasPrefix("XDG_VIDEOS_DIR=") else { continue }
            var value = Substring(line.dropFirst("XDG_VIDEOS_DIR=".count))
            guard value.count >= 2, value.first == "\"", value.last == "\"" else { continue }
            value = value.dropFirst().dropLast()
            let unescaped = value.replacingOccurrences(of: "\\\"", with: "\"").replacingOccurrences(of: "\\\\", with: "\\")
            if unescaped.hasPrefix("$HOME") {
                let rest = unescaped.dropFirst("$HOME".count)
                guard rest.isEmpty || rest.hasPrefix("/") else { continue }
                found = rest.count <= 1 ? home : home + rest
            } else if unescaped.hasPrefix("/") {
                found = unescaped
            }
        }
        return found
    }
}
