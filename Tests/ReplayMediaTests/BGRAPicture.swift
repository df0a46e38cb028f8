@testable import ReplayMedia

/// A test picture in BGRA, as the capture hands them over: filled with a colour, rectangles painted
/// on it, converted into a `VideoFrame` for an encoder. What the writer, clip, stream and encoder
/// tests draw.
struct BGRAPicture {
    let width: Int
    let height: Int
    private(set) var bytes: [UInt8]

    /// All of it `bgr` (blue, green, red).
    init(width: Int, height: Int, bgr: [UInt8]) {
        self.width = width
        self.height = height
        bytes = [UInt8](repeating: 255, count: width * height * 4)
        fill(x: 0..<width, y: 0..<height, bgr)
    }

    /// The left half red, the right half blue: every test's still background.
    static func redAndBlue(width: Int, height: Int) -> BGRAPicture {
        var picture = BGRAPicture(width: width, height: height, bgr: [0, 0, 255])
        picture.fill(x: width / 2..<width, y: 0..<height, [255, 0, 0])
        return picture
    }

    /// Paints the rectangle (clipped to the picture) `bgr`.
    mutating func fill(x: Range<Int>, y: Range<Int>, _ bgr: [UInt8]) {
        for row in y.clamped(to: 0..<height) {
            for column in x.clamped(to: 0..<width) {
                let i = (row * width + column) * 4
                bytes[i] = bgr[0]; bytes[i + 1] = bgr[1]; bytes[i + 2] = bgr[2]
            }
        }
    }

    /// Converted into `frame` (a new one of this size when nil), as the capture converts.
    func frame(into frame: VideoFrame? = nil) -> VideoFrame {
        let frame = frame ?? VideoFrame(width: width, height: height)
        bytes.withUnsafeBufferPointer { frame.convert(fromBGRA: $0.baseAddress!, stride: width * 4, rows: 0..<height) }
        return frame
    }
}
