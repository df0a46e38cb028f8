// replay-ring: both ends of a frame ring, each in a process of its own. `write` is replayd's side
// (a RingTap fed test pictures and sound), for the tests of in-app capture; `read` is an app's side
// (OpenReplayKit's sample buffers), and `bench` runs a 1080p30 writer here against a `read` child
// to measure what receiving costs the app (make bench). The ring's descriptors travel once over the
// socket on descriptor 3, as replayd hands them to an app.
import ArgumentParser
import Foundation
import OpenReplayKit
import ReplayEngine
import ReplayIPC
import ReplayMedia
import ReplayTesting
#if canImport(Glibc)
import Glibc
#endif

@main
struct ReplayRing: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-ring",
        abstract: "Both ends of an OpenReplayKit frame ring, for the tests and make bench.",
        subcommands: [Write.self, Read.self, Bench.self])
}

/// What `write` did, one JSON line on standard output.
struct WriterReport: Codable {
    var offered = 0
    var framesWritten: UInt64 = 0
    var framesDropped: UInt64 = 0
    var audioChunksWritten: UInt64 = 0
    var audioChunksDropped: UInt64 = 0
    var meanCallMicroseconds = 0.0
    var maximumCallMicroseconds = 0.0
    var cpuSeconds = 0.0
}

/// What `read` got, one JSON line on standard output.
struct ReaderReport: Codable {
    var frames = 0
    var audioBuffers = 0
    var cpuSeconds = 0.0
    var wallSeconds = 0.0
    var framesDropped: UInt64 = 0
    var audioChunksDropped: UInt64 = 0
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    print(String(decoding: try! encoder.encode(value), as: UTF8.self))
    fflush(nil)
}

/// Fills `frame` with test picture `n` (I420).
func paint(_ frame: VideoFrame, number n: Int) {
    let (y, u, v) = frame.planes
    let (ys, us, vs) = frame.strides
    for row in 0..<frame.height {
        for column in 0..<frame.width { y[row * ys + column] = RingTestPattern.luma(x: column, y: row, frame: n) }
    }
    for row in 0..<(frame.height + 1) / 2 {
        for column in 0..<(frame.width + 1) / 2 {
            u[row * us + column] = RingTestPattern.cb(x: column, y: row, frame: n)
            v[row * vs + column] = RingTestPattern.cr(x: column, y: row, frame: n)
        }
    }
}

/// The writer: replayd's side of the ring, a RingTap as the engine drives it.
struct Write: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Write test pictures and sound into a new ring handed over descriptor 3.")
    @Option var width = 320
    @Option var height = 180
    @Option var slots = 5
    @Option(help: "Pictures to offer.") var frames = 60
    @Option(help: "Milliseconds between pictures (0: as fast as possible).") var intervalMs = 10
    @Option(help: "Time of picture 0 and of the first audio frame, ns on CLOCK_MONOTONIC.") var startTime: Int64 = 0
    @Option(help: "Audio frames of the app's sound and of the microphone's after each picture.") var audioFrames = 1600
    @Option(help: "The socket's descriptor.") var socket: Int32 = 3

    func run() throws {
        let tap = try RingTap(width: width, height: height, slotCount: slots, name: "replay-ring-test")
        try DescriptorPassing.send(Array("ring".utf8), descriptors: tap.descriptors, over: socket)
        // The reader says when it waits (a set-up step, not per frame).
        var go: UInt8 = 0
        guard read(socket, &go, 1) == 1 else { throw ValidationError("the reader went away before it started") }
        let picture = VideoFrame(width: width, height: height)
        var report = WriterReport()
        var total: Int64 = 0
        let cpuBefore = cpuSeconds()
        var audioDone = 0
        var samples = [Float](repeating: 0, count: audioFrames * 2)
        for n in 0..<frames {
            paint(picture, number: n)
            let before = MonotonicClock.now()
            tap.receive(picture, tick: Int64(n), time: startTime + Int64(n) * RingTestPattern.frameInterval)
            let took = MonotonicClock.now() - before
            total += took
            report.maximumCallMicroseconds = max(report.maximumCallMicroseconds, Double(took) / 1000)
            for microphone in [false, true] where audioFrames > 0 {
                for index in 0..<audioFrames {
                    for channel in 0..<2 {
                        samples[index * 2 + channel] = RingTestPattern.sample(audioDone + index, channel: channel, microphone: microphone)
                    }
                }
                samples.withUnsafeBufferPointer { buffer in
                    tap.receive(audio: buffer, from: microphone ? .microphone : .application,
                                time: RingTestPattern.audioTime(start: startTime, frame: audioDone))
                }
            }
            audioDone += audioFrames
            if intervalMs > 0 { MonotonicClock.sleep(until: MonotonicClock.now() + Int64(intervalMs) * 1_000_000) }
        }
        tap.close()
        report.offered = frames
        report.meanCallMicroseconds = Double(total) / Double(max(frames, 1)) / 1000
        report.cpuSeconds = cpuSeconds() - cpuBefore
        let counters = tap.counters
        report.framesWritten = counters.framesWritten
        report.framesDropped = counters.framesDropped
        report.audioChunksWritten = counters.audioChunksWritten
        report.audioChunksDropped = counters.audioChunksDropped
        printJSON(report)
    }
}

/// The reader: an app's side, through OpenReplayKit's sample buffers, as an app's handler reads them.
struct Read: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Receive a ring over descriptor 3 and read it as an app does.")
    @Option(help: "The socket's descriptor.") var socket: Int32 = 3

    func run() throws {
        let (_, descriptors) = try DescriptorPassing.receive(over: socket)
        guard descriptors.count == 2 else { throw ValidationError("expected the ring's memory and eventfd, got \(descriptors.count) descriptors") }
        let ring = try SampleBufferRing(memory: descriptors[0], signal: descriptors[1])
        var report = ReaderReport()
        var checksum = 0
        var go: UInt8 = 1
        let cpuBefore = cpuSeconds()
        let start = MonotonicClock.now()
        _ = write(socket, &go, 1)
        ring.run { sampleBuffer, type in
            // What a typical handler does: the time, the planes' addresses, a byte; the sound's level.
            let seconds = CMTimeGetSeconds(CMSampleBufferGetPresentationTimeStamp(sampleBuffer))
            switch type {
            case .video:
                guard let pixels = CMSampleBufferGetImageBuffer(sampleBuffer) else { return }
                CVPixelBufferLockBaseAddress(pixels, .readOnly)
                if let luma = CVPixelBufferGetBaseAddressOfPlane(pixels, 0) {
                    checksum &+= Int(luma.load(as: UInt8.self)) &+ CVPixelBufferGetBytesPerRowOfPlane(pixels, 0)
                }
                CVPixelBufferUnlockBaseAddress(pixels, .readOnly)
                report.frames += 1
            case .audioApp, .audioMic:
                guard let block = CMSampleBufferGetDataBuffer(sampleBuffer) else { return }
                var length = 0
                var data: UnsafeMutablePointer<CChar>?
                CMBlockBufferGetDataPointer(block, atOffset: 0, lengthAtOffsetOut: nil, totalLengthOut: &length, dataPointerOut: &data)
                if let data {
                    let samples = UnsafeRawPointer(data).assumingMemoryBound(to: Float.self)
                    var peak: Float = 0
                    for index in 0..<length / 4 { peak = max(peak, abs(samples[index])) }
                    checksum &+= Int(peak * 1000)
                }
                report.audioBuffers += 1
            }
            checksum &+= Int(seconds)
        }
        report.wallSeconds = Double(MonotonicClock.now() - start) / 1e9
        report.cpuSeconds = cpuSeconds() - cpuBefore
        report.framesDropped = ring.counters.framesDropped
        report.audioChunksDropped = ring.counters.audioChunksDropped
        FileHandle.standardError.write(Data("checksum \(checksum)\n".utf8))
        printJSON(report)
    }
}

/// make bench: a 1080p30 writer here, a reader child; the reader's CPU and the writer's cost per picture.
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Time receiving 1080p30 NV12 and sound through a ring in another process.")
    @Option var width = 1920
    @Option var height = 1080
    @Option var fps = 30
    @Option var seconds = 10.0

    func run() throws {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw ValidationError("socketpair failed")
        }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("replay-ring-bench-\(getpid()).json").path
        let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let child = try Spawn.start(me, arguments: ["read"], standardOutput: .file(output, append: false),
                                    standardError: .file("/dev/null", append: true), descriptors: [pair[1]], group: .newProcessGroup)
        close(pair[1])
        defer { try? FileManager.default.removeItem(atPath: output) }
        let tap = try RingTap(width: width, height: height, name: "replay-ring-bench")
        try DescriptorPassing.send(Array("ring".utf8), descriptors: tap.descriptors, over: pair[0])
        var go: UInt8 = 0
        guard read(pair[0], &go, 1) == 1 else { throw ValidationError("the reader did not start") }
        // Two pictures, alternated: what the writer costs is the conversion into the slot, not painting.
        let pictures = (0..<2).map { n in
            let frame = VideoFrame(width: width, height: height)
            paint(frame, number: n)
            return frame
        }
        let frames = Int(seconds * Double(fps))
        let start = MonotonicClock.now()
        let interval = 1_000_000_000 / Int64(fps)
        var costs: [Int64] = []
        var audioPosition: Int64 = 0
        let block = [Float](repeating: 0.25, count: 1024 * 2)
        let cpuBefore = cpuSeconds()
        for n in 0..<frames {
            let tick = start + Int64(n) * interval
            MonotonicClock.sleep(until: tick)
            let before = MonotonicClock.now()
            tap.receive(pictures[n % 2], tick: Int64(n), time: tick)
            costs.append(MonotonicClock.now() - before)
            // The engine's audio thread: 1024-frame blocks of the app's sound and the microphone's.
            while audioPosition * 1_000_000_000 / 48_000 <= tick - start {
                block.withUnsafeBufferPointer { buffer in
                    let time = start + audioPosition * 1_000_000_000 / 48_000
                    tap.receive(audio: buffer, from: .application, time: time)
                    tap.receive(audio: buffer, from: .microphone, time: time)
                }
                audioPosition += 1024
            }
        }
        let writerCPU = cpuSeconds() - cpuBefore
        tap.close()
        var status: Int32 = 0
        waitpid(child, &status, 0)
        close(pair[0])
        guard let data = FileManager.default.contents(atPath: output),
              let line = String(decoding: data, as: UTF8.self).split(separator: "\n").last,
              let reader = try? JSONDecoder().decode(ReaderReport.self, from: Data(line.utf8)) else {
            throw ValidationError("the reader reported nothing")
        }
        costs.sort()
        let mean = Double(costs.reduce(0, +)) / Double(costs.count) / 1e6
        let p95 = Double(costs[costs.count * 95 / 100]) / 1e6
        let counters = tap.counters
        print(String(format: "ring %dx%d@%d for %.0f s: %d pictures offered, %llu written, %llu dropped (no free slot); %llu audio chunks, %llu dropped",
                     width, height, fps, seconds, frames, counters.framesWritten, counters.framesDropped,
                     counters.audioChunksWritten, counters.audioChunksDropped))
        let readerCores = reader.cpuSeconds / reader.wallSeconds
        print(String(format: "ring reader (the app, another process): %d pictures and %d sound buffers received, CPU %.4f core (%.3f s in %.1f s) (target <= 0.03) ",
                     reader.frames, reader.audioBuffers, readerCores, reader.cpuSeconds, reader.wallSeconds) + (readerCores <= 0.03 ? "OK" : "MISSED"))
        print(String(format: "ring writer (replayd's capture thread): I420→NV12 (full range) into the slot %.3f ms per picture (p95 %.3f ms), %.4f core with the sound",
                     mean, p95, writerCPU / (Double(MonotonicClock.now() - start) / 1e9)))
    }
}
