import Foundation
import Testing
@testable import ReplayIPC

/// Where `replay record` puts a recording without -o: the XDG Videos folder.
@Suite struct VideosFolderTests {
    @Test func readsTheLineXdgUserDirsWrites() {
        let file = """
            # This file is written by xdg-user-dirs-update
            # If you want to change or add directories, just edit the line you're
            # interested in. All local changes will be retained on the next run.
            XDG_DESKTOP_DIR="$HOME/Schreibtisch"
            XDG_VIDEOS_DIR="$HOME/Filme"
            XDG_MUSIC_DIR="$HOME/Musik"
            """
        #expect(VideosFolder.videosDirectory(inUserDirs: file, home: "/home/anna") == "/home/anna/Filme")
    }

    @Test func absolutePathsQuotesAndTheHomeItself() {
        #expect(VideosFolder.videosDirectory(inUserDirs: "XDG_VIDEOS_DIR=\"/srv/media/clips\"\n", home: "/h") == "/srv/media/clips")
        #expect(VideosFolder.videosDirectory(inUserDirs: "XDG_VIDEOS_DIR=\"$HOME/My \\\"Films\\\"\"", home: "/h") == "/h/My \"Films\"")
        // "$HOME/" is how xdg-user-dirs says the folder is disabled: the home folder itself.
        #expect(VideosFolder.videosDirectory(inUserDirs: "XDG_VIDEOS_DIR=\"$HOME/\"", home: "/h") == "/h")
        // The last line wins, as when a shell sources the file.
        #expect(VideosFolder.videosDirectory(inUserDirs: "XDG_VIDEOS_DIR=\"$HOME/a\"\nXDG_VIDEOS_DIR=\"$HOME/b\"", home: "/h") == "/h/b")
    }

    @Test func ignoresWhatItCannotRead() {
        for line in ["XDG_VIDEOS_DIR=$HOME/Filme", "XDG_VIDEOS_DIR=\"relative/Filme\"", "XDG_VIDEOS_DIR=\"$HOMEfoo\"",
                     "# XDG_VIDEOS_DIR=\"$HOME/Filme\"", "XDG_PICTURES_DIR=\"$HOME/Bilder\"", ""] {
            #expect(VideosFolder.videosDirectory(inUserDirs: line, home: "/h") == nil, "\(line)")
        }
    }

    @Test func theVariableThenTheFileThenVideosInHome() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("ork-home-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: home) }
        try FileManager.default.createDirectory(atPath: home + "/.config", withIntermediateDirectories: true)
        #expect(VideosFolder.path(environment: ["HOME": home]) == home + "/Videos")
        try "XDG_VIDEOS_DIR=\"$HOME/Filme\"\n".write(toFile: home + "/.config/user-dirs.dirs", atomically: true, encoding: .utf8)
        #expect(VideosFolder.path(environment: ["HOME": home]) == home + "/Filme")
        #expect(VideosFolder.path(environment: ["HOME": home, "XDG_VIDEOS_DIR": "/elsewhere"]) == "/elsewhere")
        // XDG_CONFIG_HOME moves the file.
        #expect(VideosFolder.path(environment: ["HOME": home, "XDG_CONFIG_HOME": home + "/none"]) == home + "/Videos")
    }

    /// The name `replay record` and the preview's Save give a recording, and " (2)", " (3)" when taken.
    @Test func recordingNamesNeverOverwrite() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-names-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        let name = VideosFolder.recordingName(at: date)
        #expect(name.wholeMatch(of: /Screen Recording \d{4}-\d{2}-\d{2} at \d{2}\.\d{2}\.\d{2}\.mp4/) != nil, "\(name)")
        #expect(VideosFolder.unusedRecordingPath(in: folder, at: date) == folder + "/" + name)
        #expect(FileManager.default.createFile(atPath: folder + "/" + name, contents: Data()))
        let second = VideosFolder.unusedRecordingPath(in: folder, at: date)
        #expect(second == folder + "/" + name.replacingOccurrences(of: ".mp4", with: " (2).mp4"))
        #expect(FileManager.default.createFile(atPath: second, contents: Data()))
        #expect(VideosFolder.unusedRecordingPath(in: folder, at: date).hasSuffix(" (3).mp4"))
    }
}
