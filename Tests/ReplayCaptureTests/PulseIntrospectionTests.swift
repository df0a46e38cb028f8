import Foundation
import Testing
@testable import ReplayCapture
#if canImport(Glibc)
import Glibc
#endif

/// A question to a sound server that takes connections and never answers (a stalled server) comes
/// back empty within about a second: whoever asks it (a recording's start, checking the microphone)
/// is never held for good.
@Suite("PulseAudio introspection")
struct PulseIntrospectionTests {
    @Test(.timeLimit(.minutes(1))) func aServerThatNeverAnswersGivesNothingWithinASecond() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-stalled-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("native").path
        // A real listening socket: the connection is accepted (by the kernel's backlog) and nothing is ever said.
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (i, byte) in path.utf8.enumerated() where i < bytes.count - 1 { bytes[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 4) == 0)

        let started = ContinuousClock.now
        let monitor = PulseIntrospection.defaultSourceIfMonitor(server: "unix:" + path)
        let took = ContinuousClock.now - started
        #expect(monitor == nil)
        #expect(took < .seconds(3), "a stalled server held the question \(took)")
        #expect(took >= .milliseconds(900), "it waited for an answer about a second: \(took)")
    }
}
