import Foundation
import OpenReplayKit
import ReplayIPC
import ReplayTesting
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// replayd's side of a frame ring in a process of its own (`replay-ring write`): it makes the ring,
/// hands its memory and eventfd over a real socket pair once, and writes test pictures and sound.
/// This process is the app: it maps the ring and reads it through OpenReplayKit.
struct RingPeer {
    let writer: BackgroundProcess
    let ring: SampleBufferRing
    let socket: Int32
    /// Time of picture 0 and of the first audio frame on the writer's timeline.
    let startTime: Int64

    struct WriterReport: Codable {
        var offered: Int
        var framesWritten: UInt64
        var framesDropped: UInt64
        var audioChunksWritten: UInt64
        var audioChunksDropped: UInt64
        var meanCallMicroseconds: Double
        var maximumCallMicroseconds: Double
    }

    init(_ arguments: [String]) throws {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw HarnessError("socketpair: \(String(cString: strerror(errno)))")
        }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        startTime = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        do {
            writer = try BackgroundProcess(try Binaries.path("replay-ring"),
                                           arguments: ["write", "--start-time", "\(startTime)"] + arguments, descriptors: [pair[1]])
        } catch {
            close(pair[0])
            close(pair[1])
            throw error
        }
        close(pair[1])
        socket = pair[0]
        let (bytes, descriptors) = try DescriptorPassing.receive(over: socket)
        guard String(decoding: bytes, as: UTF8.self) == "ring", descriptors.count == 2 else {
            throw HarnessError("the writer sent \(bytes.count) bytes and \(descriptors.count) descriptors: \(writer.currentError)")
        }
        ring = try SampleBufferRing(memory: descriptors[0], signal: descriptors[1])
    }

    /// Starts delivering to `handler` on the ring's own thread, tells the writer to begin, and
    /// returns once the writer has closed the ring and everything was delivered.
    func deliver(_ handler: @escaping @Sendable (CMSampleBuffer, RPSampleBufferType) -> Void) async throws {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            ring.start(handler: handler, ended: { done.resume() })
            var go: UInt8 = 1
            _ = write(socket, &go, 1)
        }
    }

    /// The writer's own account, once it has exited.
    func report() async throws -> WriterReport {
        let result = try await writer.waitForExit(timeout: .seconds(60))
        guard result.succeeded, let line = result.stdout.split(separator: "\n").last else {
            throw HarnessError("replay-ring write failed: \(result)")
        }
        return try JSONDecoder().decode(WriterReport.self, from: Data(line.utf8))
    }

    func closeSocket() {
        close(socket)
    }
}
