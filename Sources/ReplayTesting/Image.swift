/// An 8-bit RGB colour.
public struct RGB: Equatable, Hashable, Sendable, CustomStringConvertible {
    public var r: UInt8
    public var g: UInt8
    public var b: UInt8

    public init(_ r: UInt8, _ g: UInt8, _ b: UInt8) {
        self.r = r
        self.g = g
        self.b = b
    }

    /// Each channel within `tolerance` of `other`'s (compression moves colours a little).
    public func isClose(to other: RGB, tolerance: Int = 40) -> Bool {
        abs(Int(r) - Int(other.r)) <= tolerance && abs(Int(g) - Int(other.g)) <= tolerance
            && abs(Int(b) - Int(other.b)) <= tolerance
    }

    /// The indicator's red: r > 200, g < 60, b < 60.
    public var isReddish: Bool { r > 200 && g < 60 && b < 60 }

    /// BT.601 luma, 0…255.
    public var luma: Double { 0.299 * Double(r) + 0.587 * Double(g) + 0.114 * Double(b) }

    public var description: String { "(\(r), \(g), \(b))" }
}

/// A rectangle of pixels.
public struct PixelRect: Equatable, Sendable, CustomStringConvertible {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public var maxX: Int { x + width }
    public var maxY: Int { y + height }
    public var isEmpty: Bool { width <= 0 || height <= 0 }

    public func contains(x px: Int, y py: Int) -> Bool { px >= x && px < maxX && py >= y && py < maxY }

    /// Grown by `margin` on each side and clipped to `bounds`.
    public func insetBy(_ margin: Int, clippedTo bounds: PixelRect) -> PixelRect {
        let x0 = max(bounds.x, x - margin), y0 = max(bounds.y, y - margin)
        let x1 = min(bounds.maxX, maxX + margin), y1 = min(bounds.maxY, maxY + margin)
        return PixelRect(x: x0, y: y0, width: max(0, x1 - x0), height: max(0, y1 - y0))
    }

    public var description: String { "\(width)x\(height)+\(x)+\(y)" }
}

/// An RGB24 picture: a screenshot or a decoded video frame.
public struct RGBImage: Sendable {
    public var width: Int
    public var height: Int
    /// Rows top to bottom, 3 bytes a pixel, no padding.
    public var pixels: [UInt8]
    /// The frame's presentation time in seconds, when it came from a file.
    public var time: Double?

    public init(width: Int, height: Int, pixels: [UInt8], time: Double? = nil) {
        precondition(pixels.count >= width * height * 3, "RGBImage: \(pixels.count) bytes for \(width)x\(height)")
        self.width = width
        self.height = height
        self.pixels = pixels
        self.time = time
    }

    public var bounds: PixelRect { PixelRect(x: 0, y: 0, width: width, height: height) }

    public func pixel(x: Int, y: Int) -> RGB {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside \(width)x\(height)")
        let i = (y * width + x) * 3
        return RGB(pixels[i], pixels[i + 1], pixels[i + 2])
    }

    /// Mean luma of the whole picture, 0…255.
    public var meanLuma: Double {
        var sum = 0.0
        var i = 0
        while i + 2 < pixels.count {
            sum += 0.299 * Double(pixels[i]) + 0.587 * Double(pixels[i + 1]) + 0.114 * Double(pixels[i + 2])
            i += 3
        }
        return sum / Double(max(1, width * height))
    }

    /// The smallest rectangle holding every pixel in `area` that satisfies `predicate`; nil if none does.
    public func boundingBox(in area: PixelRect? = nil, where predicate: (RGB) -> Bool) -> PixelRect? {
        let area = area ?? bounds
        var minX = Int.max, minY = Int.max, maxX = -1, maxY = -1
        for y in max(0, area.y)..<min(height, area.maxY) {
            for x in max(0, area.x)..<min(width, area.maxX) where predicate(pixel(x: x, y: y)) {
                minX = min(minX, x)
                minY = min(minY, y)
                maxX = max(maxX, x)
                maxY = max(maxY, y)
            }
        }
        guard maxX >= 0 else { return nil }
        return PixelRect(x: minX, y: minY, width: maxX - minX + 1, height: maxY - minY + 1)
    }

    /// How many pixels in `area` satisfy `predicate`.
    public func count(in area: PixelRect? = nil, where predicate: (RGB) -> Bool) -> Int {
        let area = area ?? bounds
        var n = 0
        for y in max(0, area.y)..<min(height, area.maxY) {
            for x in max(0, area.x)..<min(width, area.maxX) where predicate(pixel(x: x, y: y)) { n += 1 }
        }
        return n
    }
}

/// What `replay-testcontent` draws where, on a `width` x `height` screen (it mirrors the program's
/// `Layout`): a top band (the top quarter) with the eight bars in reverse order, so that the
/// top-right corner is white; the eight bars down to 5/8 of the height; then a grey panel with the
/// frame counter and the moving square. From 1 s on, the first 100 ms of every second are all white.
public struct TestPattern: Sendable {
    /// White, yellow, cyan, green, magenta, red, blue, black.
    public static let barColours: [RGB] = [
        RGB(255, 255, 255), RGB(255, 255, 0), RGB(0, 255, 255), RGB(0, 255, 0),
        RGB(255, 0, 255), RGB(255, 0, 0), RGB(0, 0, 255), RGB(0, 0, 0),
    ]
    public static let barNames = ["white", "yellow", "cyan", "green", "magenta", "red", "blue", "black"]
    public static let panelColour = RGB(40, 40, 40)
    /// The system tone, between beeps.
    public static let systemToneFrequency = 440.0
    /// The beep played with each flash.
    public static let beepFrequency = 1000.0
    /// The private PulseAudio's microphone (`module-sine-source`).
    public static let microphoneFrequency = 3000.0

    public let width: Int
    public let height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public func barX(_ index: Int) -> Int { index * width / 8 }
    public var topBandBottom: Int { height / 4 }
    public var barsBottom: Int { height * 5 / 8 }

    /// A point in the middle of main bar `index` (0 = white … 7 = black), clear of everything else.
    public func barCentre(_ index: Int) -> (x: Int, y: Int) {
        ((barX(index) + barX(index + 1)) / 2, (topBandBottom + barsBottom) / 2)
    }

    /// The colour the still part of the pattern has at (x, y) in a frame that is not a flash; nil
    /// in the panel (the counter and the square move).
    public func expectedColour(x: Int, y: Int) -> RGB? {
        guard x >= 0, x < width, y >= 0 else { return nil }
        if y < topBandBottom {
            // Reversed: bar i covers width - barX(i + 1) ..< width - barX(i).
            for i in 0..<8 where x >= width - barX(i + 1) && x < width - barX(i) { return Self.barColours[i] }
        } else if y < barsBottom {
            for i in 0..<8 where x >= barX(i) && x < barX(i + 1) { return Self.barColours[i] }
        }
        return nil
    }

    /// Whether `image` is one of the all-white flash frames.
    public static func isFlash(_ image: RGBImage) -> Bool {
        let pattern = TestPattern(width: image.width, height: image.height)
        // The black and blue bars are white only in a flash.
        let black = pattern.barCentre(7), blue = pattern.barCentre(6)
        return image.pixel(x: black.x, y: black.y).luma > 200 && image.pixel(x: blue.x, y: blue.y).luma > 200
    }
}
