import Testing
import Foundation
import Logging
@testable import ReplayMedia
import ReplayTesting
import CYUV

/// libx264 through its own API (`X264Encoder`) against the same libx264 through libavcodec: the
/// same stream, read back with ffprobe and decoded with ffmpeg; and the capture's map of
/// unchanged macroblocks is what libx264 goes by.
@Suite(.serialized) struct X264EncoderTests {
    let logger = Logger(label: "test")
    let width = 320, height = 240, fps = 30

    private func temporaryFolder() -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-x264-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// A BGRA picture: left half red, right half blue, with `squares` (x, y, BGR) of 64x64 pixels.
    private func picture(squares: [(x: Int, y: Int, bgr: [UInt8])] = []) -> [UInt8] {
        var picture = BGRAPicture.redAndBlue(width: width, height: height)
        for square in squares { picture.fill(x: square.x..<square.x + 64, y: square.y..<square.y + 64, square.bgr) }
        return picture.bytes
    }

    /// An encoder with `settings` and a started movie at `path` with its one track.
    private func openMovie(_ path: String, settings: VideoEncoderSettings) throws -> (VideoEncoder, MovieWriter, TrackOutputs) {
        let video = try VideoEncoder(settings: settings, logger: logger)
        let writer = try MovieWriter(path: path, logger: logger)
        var track = TrackOutputs()
        track.add(writer, track: try writer.addTrack(video.trackFormat(name: "Screen")))
        try writer.start()
        return (video, writer, track)
    }

    /// A recording's encoder (veryfast, CRF 23, set up for what the screen does) and a started
    /// movie `name` in `folder`.
    private func openRecording(_ name: String, in folder: URL) throws -> (path: String, video: VideoEncoder, writer: MovieWriter, track: TrackOutputs) {
        let path = folder.appendingPathComponent(name).path
        let settings = VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23)
        let (video, writer, track) = try openMovie(path, settings: settings)
        return (path, video, writer, track)
    }

    /// Encodes `pictures` (each with the macroblocks it says changed, nil: all of them), one a
    /// tick, into a new movie with `backend`; returns its path.
    private func encode(_ pictures: [(pixels: [UInt8], changed: [(x: Range<Int>, y: Range<Int>)]?)],
                        backend: VideoEncoderSettings.Backend, layout: VideoFrame.Layout = .i420, in folder: URL) throws -> String {
        let path = folder.appendingPathComponent("\(backend.rawValue)-\(layout).mp4").path
        var settings = VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23)
        settings.backend = backend
        // libavcodec's set-up throughout, to compare (a recording's own starts as a desktop in use).
        settings.adaptsToActivity = false
        let (video, writer, track) = try openMovie(path, settings: settings)
        let converted = VideoFrame(width: width, height: height)
        // NV12: the same I420 picture, its chroma interleaved (as the frame ring gives it).
        let frame = layout == .i420 ? converted : VideoFrame(width: width, height: height, layout: .nv12)
        for (tick, picture) in pictures.enumerated() {
            picture.pixels.withUnsafeBufferPointer { converted.convert(fromBGRA: $0.baseAddress!, stride: width * 4, rows: 0..<height) }
            if layout == .nv12 {
                let (y, u, v) = converted.planes
                let (ys, us, vs) = converted.strides
                let (ny, nuv, nys, nuvs) = frame.nv12Planes
                _ = I420ToNV12(y, Int32(ys), u, Int32(us), v, Int32(vs), ny, Int32(nys), nuv, Int32(nuvs), Int32(width), Int32(height))
            }
            if let changed = picture.changed {
                frame.changedBlocks.removeAll()
                for area in changed { frame.changedBlocks.mark(x: area.x, y: area.y) }
            } else {
                frame.changedBlocks.markAll()
            }
            frame.changedFraction = 0.1
            try video.encode(frame, pts: Int64(tick), to: track)
        }
        try video.encode(nil, pts: 0, to: track)
        try writer.finish()
        return path
    }

    /// Converts `pixels` into `frame` (its changed macroblocks marked), encodes it at `tick` and
    /// returns the set-up libx264 was in for it.
    private func encode(_ pixels: [UInt8], into frame: VideoFrame, tick: Int, with video: VideoEncoder,
                        to track: TrackOutputs) async throws -> X264Encoder.Activity? {
        frame.changedFraction = Double(frame.changedBlocks.changedCount) / Double(frame.changedBlocks.columns * frame.changedBlocks.rows)
        pixels.withUnsafeBufferPointer { frame.convert(fromBGRA: $0.baseAddress!, stride: width * 4, rows: 0..<height) }
        try video.encode(frame, pts: Int64(tick), to: track)
        // Other tests run beside this one on as many threads as the machine has cores.
        await Task.yield()
        return video.x264Activity
    }

    /// x264's options as it writes them into its SEI ("options: cabac=1 ref=1 …").
    private func x264Options(in path: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let marker = Data("options: ".utf8)
        let start = try #require(data.range(of: marker), "no x264 SEI in \(path)")
        let end = data[start.upperBound...].firstIndex(of: 0) ?? data.endIndex
        return String(decoding: data[start.upperBound..<end], as: UTF8.self)
    }

    @Test func makesTheStreamLibavcodecMakes() async throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let still = picture()
        let moved = picture(squares: [(x: 32, y: 32, bgr: [0, 255, 0])])
        let pictures: [([UInt8], [(x: Range<Int>, y: Range<Int>)]?)] = (0..<75).map { $0 < 40 ? (still, nil) : (moved, nil) }
        let direct = try encode(pictures.map { ($0.0, $0.1) }, backend: .x264, in: folder)
        let libavcodec = try encode(pictures.map { ($0.0, $0.1) }, backend: .libavcodecX264, in: folder)

        // The same settings, as libx264 itself lists them.
        #expect(try x264Options(in: direct) == (try x264Options(in: libavcodec)))
        let probe = try await MediaProbe.probe(direct)
        let stream = try #require(probe.videoStreams.first)
        #expect(stream.codecName == "h264")
        #expect(stream.width == width && stream.height == height)
        #expect(stream.frameCount == 75)
        let types = try await MediaProbe.videoPictures(direct).map(\.type)
        #expect(types == (try await MediaProbe.videoPictures(libavcodec).map(\.type)))
        #expect(types[0] == "I" && types[60] == "I", "\(types.joined())")

        let first = try await FrameDecoder.frame(at: 0.5, in: direct)
        let left = first.pixel(x: 100, y: 200), right = first.pixel(x: 250, y: 120)
        #expect(left.r > 200 && left.g < 50 && left.b < 50, "left half is red, got \(left)")
        #expect(right.b > 200 && right.r < 50 && right.g < 50, "right half is blue, got \(right)")
        let last = try await FrameDecoder.frame(at: 2.3, in: direct)
        let square = last.pixel(x: 64, y: 64)
        #expect(square.g > 200 && square.r < 50 && square.b < 50, "the square is green, got \(square)")
    }

    /// The frame ring's NV12, handed to libx264 as it is (what an upload extension does), makes
    /// the stream the same picture in I420 makes: every decoded picture is the same, and the
    /// pictures are the ones that went in.
    @Test func nv12PicturesMakeTheStreamI420PicturesMake() async throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let pictures: [([UInt8], [(x: Range<Int>, y: Range<Int>)]?)] = (0..<20).map {
            (picture(squares: [(x: $0 * 8, y: 96, bgr: [0, 255, 0])]), nil)
        }
        let i420 = try encode(pictures, backend: .x264, in: folder)
        let nv12 = try encode(pictures, backend: .x264, layout: .nv12, in: folder)

        let whole = PixelRect(x: 0, y: 0, width: width, height: height)
        let fromI420 = try await FrameDecoder.allFrames(in: i420, crop: whole)
        let fromNV12 = try await FrameDecoder.allFrames(in: nv12, crop: whole)
        #expect(fromNV12.count == 20 && fromI420.count == 20)
        #expect(fromNV12.map(\.pixels) == fromI420.map(\.pixels), "NV12 and I420 input decode to the same pictures")
        let last = try #require(fromNV12.last)
        let square = last.pixel(x: 19 * 8 + 32, y: 128), left = last.pixel(x: 40, y: 20), right = last.pixel(x: 300, y: 220)
        #expect(square.g > 200 && square.r < 50 && square.b < 50, "the square is green where it was, got \(square)")
        #expect(left.r > 200 && left.g < 50 && left.b < 50, "left half is red, got \(left)")
        #expect(right.b > 200 && right.r < 50 && right.g < 50, "right half is blue, got \(right)")
    }

    /// An NV12 picture goes to libx264 through its own API only: libavcodec's path says so.
    @Test func libavcodecRefusesNV12Pictures() throws {
        var settings = VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23)
        settings.backend = .libavcodecX264
        let video = try VideoEncoder(settings: settings, logger: logger)
        #expect(throws: MediaError.self) {
            try video.encode(VideoFrame(width: width, height: height, layout: .nv12), pts: 0, to: TrackOutputs())
        }
    }

    /// Two squares appear in the second picture; the map says only the first one's macroblocks
    /// changed. libx264 skips the others as unchanged, so the second square is not in the movie;
    /// through libavcodec (no map) both are. (The capture never says a changed block is unchanged:
    /// this shows that libx264 goes by the map.)
    @Test func skipsTheMacroblocksTheMapSaysAreUnchanged() async throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let before = picture()
        let after = picture(squares: [(x: 32, y: 32, bgr: [0, 255, 0]), (x: 224, y: 160, bgr: [0, 255, 0])])
        let pictures: [([UInt8], [(x: Range<Int>, y: Range<Int>)]?)] = [(before, nil), (after, [(x: 32..<96, y: 32..<96)])]
        let direct = try encode(pictures, backend: .x264, in: folder)
        let libavcodec = try encode(pictures, backend: .libavcodecX264, in: folder)

        let told = try await FrameDecoder.frames(1...1, in: direct)[0]
        let marked = told.pixel(x: 64, y: 64), unmarked = told.pixel(x: 256, y: 192)
        #expect(marked.g > 200 && marked.r < 50 && marked.b < 50, "the marked square is there, got \(marked)")
        #expect(unmarked.b > 200 && unmarked.g < 50, "the unmarked square was skipped (still blue), got \(unmarked)")
        let untold = try await FrameDecoder.frames(1...1, in: libavcodec)[0].pixel(x: 256, y: 192)
        #expect(untold.g > 200 && untold.b < 50, "without the map both squares are there, got \(untold)")
    }

    /// A live stream's encoder (`lowLatency`) gives each picture back as it takes it, with no
    /// B-frame; the recorder's holds a few back for its look-ahead and B-frame. Both backends.
    @Test(arguments: [VideoEncoderSettings.Backend.x264, .libavcodecX264])
    func lowLatencyGivesEachPictureAtOnce(backend: VideoEncoderSettings.Backend) throws {
        func held(lowLatency: Bool) throws -> (first: Int?, reorder: Int32) {
            var settings = VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23)
            settings.backend = backend
            settings.lowLatency = lowLatency
            let video = try VideoEncoder(settings: settings, logger: logger)
            let track = TrackOutputs()   // the packets themselves are not this test's subject
            let frame = VideoFrame(width: width, height: height)
            var firstOut: Int?
            for tick in 0..<12 {
                let pixels = picture(squares: [(x: tick * 16, y: 80, bgr: [0, 255, 0])])
                pixels.withUnsafeBufferPointer { frame.convert(fromBGRA: $0.baseAddress!, stride: width * 4, rows: 0..<height) }
                frame.changedBlocks.markAll()
                frame.changedFraction = 1
                if try video.encode(frame, pts: Int64(tick), to: track) != nil, firstOut == nil { firstOut = tick }
            }
            return (firstOut, video.trackFormat(name: "v").codec.pointee.has_b_frames)
        }
        let live = try held(lowLatency: true)
        #expect(live.first == 0, "the first picture comes out as it goes in: \(String(describing: live.first))")
        #expect(live.reorder == 0, "no B-frames")
        let recorder = try held(lowLatency: false)
        #expect((recorder.first ?? 99) > 0, "the recorder's encoder holds pictures back: \(String(describing: recorder.first))")
    }

    /// A live encoder above 1280x720 searches motion in whole pixels (libx264 then keeps no
    /// half-pixel planes of its reference: 14 MB less at 1080p); at 720p and below it refines to
    /// quarter pixels as veryfast does. A recording starts as a desktop in use, in whole pixels too
    /// (`libx264IsSetUpForWhatTheScreenDoes` follows it to the other set-ups).
    @Test(arguments: [(1920, 1080, true, 0), (1280, 720, true, 2), (1920, 1080, false, 0)])
    func liveEncoderSearchesWholePixelsAbove720p(width: Int, height: Int, lowLatency: Bool, subme: Int) throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("live.mp4").path
        var settings = VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23)
        settings.lowLatency = lowLatency
        let (video, writer, track) = try openMovie(path, settings: settings)
        try video.encode(VideoFrame(width: width, height: height), pts: 0, to: track)
        try video.encode(nil, pts: 0, to: track)
        try writer.finish()
        let options = try x264Options(in: path)
        #expect(options.split(separator: " ").contains("subme=\(subme)"), "\(width)x\(height) lowLatency \(lowLatency): \(options)")
    }

    /// libx264 is set up again at keyframes for what the screen did since the last one: a
    /// recording starts as a desktop in use (whole-pixel search, no deblocking), goes to a constant
    /// quantiser on one thread where little changes (after half a second), to the rate factor with
    /// frame threads where the whole picture changes (at once when a video starts playing), and
    /// back to a desktop in use where a band of it scrolls. Each set-up is another libx264 whose
    /// stream headers are the track's: the movie decodes without an error, every picture as it went in.
    @Test func libx264IsSetUpForWhatTheScreenDoes() async throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (path, video, writer, track) = try openRecording("activities.mp4", in: folder)
        let frame = VideoFrame(width: width, height: height)
        // Every picture but 100-169: a 16x16 green square steps 16 pixels a picture along one row
        // (2 of 300 macroblocks change). 100-169: everything changes (the halves swap colours
        // around a green 64x64 square), as where a video starts playing. 170-229 also: the band of
        // rows 32-111 (100 macroblocks) holds 8-pixel stripes, green and blue, that move up 2
        // pixels a picture, as where a terminal scrolls.
        let pictures = 290
        func square(_ tick: Int) -> (x: Int, y: Int) { (x: (tick % 19) * 16, y: 192) }
        let moving = 100..<170, scrolling = 170..<230, band = 32..<112
        func stripeIsGreen(y: Int, tick: Int) -> Bool { ((y + 2 * tick) / 8) % 2 == 0 }
        let playing = picture(squares: [(x: 128, y: 96, bgr: [0, 255, 0])])
        var swapped = playing
        for i in stride(from: 0, to: swapped.count, by: 4) where swapped[i + 1] != 255 { swapped.swapAt(i, i + 2) }
        let plain = picture()
        var activities: [X264Encoder.Activity?] = []
        for tick in 0..<pictures {
            var pixels: [UInt8]
            frame.changedBlocks.removeAll()
            if moving.contains(tick) {
                pixels = tick % 2 == 1 ? swapped : playing
                frame.changedBlocks.markAll()
            } else {
                pixels = plain
                let (sx, sy) = square(tick)
                for y in sy..<sy + 16 { for x in sx..<sx + 16 { pixels[(y * width + x) * 4..<(y * width + x) * 4 + 3] = [0, 255, 0] } }
                if scrolling.contains(tick) {
                    for y in band {
                        let bgr: [UInt8] = stripeIsGreen(y: y, tick: tick) ? [0, 255, 0] : [255, 0, 0]
                        for x in 0..<width { pixels[(y * width + x) * 4..<(y * width + x) * 4 + 3] = bgr[...] }
                    }
                }
                if tick == 0 || tick == moving.upperBound {
                    frame.changedBlocks.markAll()
                } else {
                    let was = square(tick - 1)
                    frame.changedBlocks.mark(x: was.x..<was.x + 16, y: was.y..<was.y + 16)
                    frame.changedBlocks.mark(x: sx..<sx + 16, y: sy..<sy + 16)
                    if scrolling.contains(tick) || scrolling.contains(tick - 1) { frame.changedBlocks.mark(x: 0..<width, y: band) }
                }
            }
            activities.append(try await encode(pixels, into: frame, tick: tick, with: video, to: track))
        }
        try video.encode(nil, pts: 0, to: track)
        try writer.finish()

        // Keyframes: 0; 9, early, after 8 still pictures; 69; 104, early, once the last 8
        // pictures changed half of theirs (4 changed whole); 164, 224 and 284, after pictures that
        // changed 100%, 40% and 3.5% of theirs.
        func expect(_ ticks: Range<Int>, _ activity: X264Encoder.Activity, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(activities[ticks].allSatisfy { $0 == activity }, "pictures \(ticks): \(activity), got \(activities)", sourceLocation: sourceLocation)
        }
        expect(0..<9, .desktop)
        expect(9..<104, .still)
        expect(104..<224, .busy)
        expect(224..<284, .desktop)
        expect(284..<pictures, .still)

        let check = try await ProcessRunner.run("ffmpeg", arguments: ["-nostdin", "-v", "error", "-i", path, "-f", "null", "-"])
        #expect(check.status == 0 && check.standardError.isEmpty, "decodes without an error: \(check)")
        let types = try await MediaProbe.videoPictures(path).map(\.type)
        let keyframes = types.indices.filter { types[$0] == "I" }
        #expect(types.count == pictures && keyframes == [0, 9, 69, 104, 164, 224, 284], "\(types.joined())")
        let decoded = try await FrameDecoder.allFrames(in: path, crop: PixelRect(x: 0, y: 0, width: width, height: height))
        #expect(decoded.count == pictures)
        func isRed(_ c: RGB) -> Bool { c.r > 200 && c.g < 60 && c.b < 60 }
        func isGreen(_ c: RGB) -> Bool { c.g > 200 && c.r < 60 && c.b < 60 }
        func isBlue(_ c: RGB) -> Bool { c.b > 200 && c.r < 60 && c.g < 60 }
        for (tick, image) in decoded.enumerated() {
            let left = image.pixel(x: 40, y: 20), right = image.pixel(x: 300, y: 230)
            let swapped = moving.contains(tick) && tick % 2 == 1
            #expect(swapped ? isBlue(left) && isRed(right) : isRed(left) && isBlue(right), "picture \(tick): the halves, got \(left) \(right)")
            let (sx, sy) = moving.contains(tick) ? (152, 120) : square(tick)
            #expect(isGreen(image.pixel(x: sx + 8, y: sy + 8)), "picture \(tick): the square")
            if scrolling.contains(tick) {
                // The middle row of a stripe, on both sides.
                let y = 40 + ((4 - 2 * tick) % 8 + 8) % 8
                for x in [40, 280] {
                    let pixel = image.pixel(x: x, y: y)
                    #expect(stripeIsGreen(y: y, tick: tick) ? isGreen(pixel) : isBlue(pixel), "picture \(tick): the stripe at \(x),\(y), got \(pixel)")
                }
            }
        }
    }

    /// A window of 160x128 (27% of the picture) shows a fine texture moving: by fractions of a
    /// pixel, as a video does, its pictures cost too much on the desktop set-up (whole-pixel search)
    /// and libx264 is busy within half a second; by whole pixels, as text scrolls, it stays a desktop in use.
    @Test(arguments: [true, false])
    func aVideoInAWindowIsBusyAndScrollingIsADesktop(fractional: Bool) async throws {
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (path, video, writer, track) = try openRecording("window.mp4", in: folder)
        let frame = VideoFrame(width: width, height: height)
        // A fixed field of 8x8 cells, dark or light as a hash says (like text, the same every run),
        // sampled bilinearly where the window shows it.
        let cells = (0..<32 * 32).map { (UInt32($0) &* 2_654_435_761) >> 15 & 1 == 1 ? 220.0 : 30.0 }
        func level(_ x: Double, _ y: Double) -> UInt8 {
            let x0 = Int(x.rounded(.down)), y0 = Int(y.rounded(.down)), fx = x - Double(x0), fy = y - Double(y0)
            func at(_ x: Int, _ y: Int) -> Double { cells[((y & 255) / 8) * 32 + (x & 255) / 8] }
            let top = at(x0, y0) * (1 - fx) + at(x0 + 1, y0) * fx, bottom = at(x0, y0 + 1) * (1 - fx) + at(x0 + 1, y0 + 1) * fx
            return UInt8((top * (1 - fy) + bottom * fy).rounded())
        }
        let window = (x: 96, y: 64, width: 160, height: 128)
        let plain = picture()
        var activities: [X264Encoder.Activity?] = []
        for tick in 0..<40 {
            var pixels = plain
            let (dx, dy) = fractional ? (0.37 * Double(tick), 0.23 * Double(tick)) : (0.0, Double(tick))
            for y in 0..<window.height {
                for x in 0..<window.width {
                    let v = level(Double(x) + dx, Double(y) + dy), i = ((window.y + y) * width + window.x + x) * 4
                    pixels[i] = v; pixels[i + 1] = v; pixels[i + 2] = v
                }
            }
            frame.changedBlocks.removeAll()
            if tick == 0 { frame.changedBlocks.markAll() } else {
                frame.changedBlocks.mark(x: window.x..<window.x + window.width, y: window.y..<window.y + window.height)
            }
            activities.append(try await encode(pixels, into: frame, tick: tick, with: video, to: track))
        }
        try video.encode(nil, pts: 0, to: track)
        try writer.finish()

        // Moving by fractions of a pixel: busy from a keyframe as soon as libx264 gave back
        // pictures after the first 8 (it holds a few); by whole pixels, a desktop throughout.
        let types = try await MediaProbe.videoPictures(path).map(\.type)
        let keyframes = types.indices.filter { types[$0] == "I" }
        if fractional {
            let change = try #require(keyframes.count == 2 ? keyframes[1] : nil, "one keyframe after the first: \(types.joined())")
            #expect(change >= 9 && change <= 14, "the change at picture \(change)")
            #expect(activities[..<change].allSatisfy { $0 == .desktop } && activities[change...].allSatisfy { $0 == .busy }, "\(activities)")
        } else {
            #expect(keyframes == [0] && activities.allSatisfy { $0 == .desktop }, "\(types.joined()) \(activities)")
        }
        let check = try await ProcessRunner.run("ffmpeg", arguments: ["-nostdin", "-v", "error", "-i", path, "-f", "null", "-"])
        #expect(check.status == 0 && check.standardError.isEmpty, "decodes without an error: \(check)")
    }

    /// A live stream's encoder and one under a bitrate ceiling keep their first set-up (the
    /// ceiling is the rate control's), however little changes.
    @Test(arguments: [true, false])
    func aLiveOrCappedEncoderKeepsItsSetUp(lowLatency: Bool) throws {
        var settings = VideoEncoderSettings(width: width, height: height, framesPerSecond: fps, preset: "veryfast", crf: 23)
        settings.lowLatency = lowLatency
        if !lowLatency { settings.maximumBitrate = 2000 }
        let video = try VideoEncoder(settings: settings, logger: logger)
        let frame = VideoFrame(width: width, height: height)
        for tick in 0..<130 {
            frame.changedBlocks.removeAll()
            frame.changedBlocks.mark(x: 0..<16, y: 0..<16)
            try video.encode(frame, pts: Int64(tick), to: TrackOutputs())
            #expect(video.x264Activity == .busy, "picture \(tick)")
        }
    }

    @Test func marksTheMacroblocksAnAreaTouches() {
        var map = ChangedMacroblocks(width: 100, height: 40)   // 7 x 3 macroblocks
        #expect(map.columns == 7 && map.rows == 3 && map.all)
        map.removeAll()
        #expect(map.changedCount == 0)
        map.mark(x: 15..<17, y: 0..<1)   // across the edge of the first two
        #expect(map.isChanged(column: 0, row: 0) && map.isChanged(column: 1, row: 0) && !map.isChanged(column: 2, row: 0))
        map.mark(x: 96..<100, y: 32..<40)   // the partial ones at the edges
        #expect(map.isChanged(column: 6, row: 2) && map.changedCount == 3)
        var other = ChangedMacroblocks(width: 100, height: 40)
        other.removeAll()
        other.mark(x: 48..<49, y: 16..<17)
        map.formUnion(other)
        #expect(map.isChanged(column: 3, row: 1) && map.changedCount == 4)
        map.mark(x: 0..<100, y: 0..<40)
        #expect(map.all)
    }
}
