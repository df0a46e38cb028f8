/// Where everything is on a `width` x `height` screen. `ReplayTesting.TestPattern` mirrors these
/// numbers so that tests know which colour to expect where: change both together.
struct Layout {
    struct RGB: Equatable {
        var r: UInt8, g: UInt8, b: UInt8
    }

    struct Rect {
        var x: Int, y: Int, width: Int, height: Int
    }

    /// White, yellow, cyan, green, magenta, red, blue, black: 8-bit values of 0 or 255 only.
    static let barColours: [RGB] = [
        RGB(r: 255, g: 255, b: 255), RGB(r: 255, g: 255, b: 0), RGB(r: 0, g: 255, b: 255),
        RGB(r: 0, g: 255, b: 0), RGB(r: 255, g: 0, b: 255), RGB(r: 255, g: 0, b: 0),
        RGB(r: 0, g: 0, b: 255), RGB(r: 0, g: 0, b: 0),
    ]
    static let panelColour = RGB(r: 40, g: 40, b: 40)
    static let digitColour = RGB(r: 255, g: 255, b: 255)
    static let squareColour = RGB(r: 255, g: 128, b: 0)
    static let white = RGB(r: 255, g: 255, b: 255)

    let width: Int
    let height: Int

    /// Bar `i` spans x in `barX(i) ..< barX(i + 1)`.
    func barX(_ index: Int) -> Int { index * width / 8 }
    /// The top band (bars in reverse order, so that the top-right corner is white): y in 0 ..< topBandBottom.
    var topBandBottom: Int { height / 4 }
    /// The main bars: y in topBandBottom ..< barsBottom.
    var barsBottom: Int { height * 5 / 8 }
    /// The panel with the counter and the moving square: y in barsBottom ..< height.
    var panel: Rect { Rect(x: 0, y: barsBottom, width: width, height: height - barsBottom) }

    var digitHeight: Int { max(14, panel.height * 7 / 10) }
    var digitWidth: Int { digitHeight / 2 }
    var segmentThickness: Int { max(2, digitHeight / 8) }
    var digitSpacing: Int { digitWidth / 3 }
    static let digitCount = 6
    var counterOrigin: (x: Int, y: Int) { (width / 32, panel.y + (panel.height - digitHeight) / 2) }
    var counterRight: Int { counterOrigin.x + Self.digitCount * (digitWidth + digitSpacing) }

    var squareSize: Int { max(8, panel.height / 2) }

    /// The moving square of frame `n`: 8 px a frame (scaled to the height), back and forth.
    func square(frame n: Int) -> Rect {
        let minX = counterRight + digitSpacing
        let range = max(1, width - squareSize - minX)
        let step = max(1, height / 90)
        let travel = (n * step) % (2 * range)
        let x = minX + (travel < range ? travel : 2 * range - travel)
        return Rect(x: x, y: panel.y + (panel.height - squareSize) / 2, width: squareSize, height: squareSize)
    }

    /// The seven segments (a…g) of a digit whose top-left corner is (x, y).
    func segments(of digit: Int, x: Int, y: Int) -> [Rect] {
        let w = digitWidth, h = digitHeight, t = segmentThickness
        let all: [Rect] = [
            Rect(x: x, y: y, width: w, height: t),                       // a top
            Rect(x: x + w - t, y: y, width: t, height: h / 2),           // b upper right
            Rect(x: x + w - t, y: y + h / 2, width: t, height: h - h / 2), // c lower right
            Rect(x: x, y: y + h - t, width: w, height: t),               // d bottom
            Rect(x: x, y: y + h / 2, width: t, height: h - h / 2),       // e lower left
            Rect(x: x, y: y, width: t, height: h / 2),                   // f upper left
            Rect(x: x, y: y + (h - t) / 2, width: w, height: t),         // g middle
        ]
        let lit: [[Int]] = [
            [0, 1, 2, 3, 4, 5], [1, 2], [0, 1, 3, 4, 6], [0, 1, 2, 3, 6], [1, 2, 5, 6],
            [0, 2, 3, 5, 6], [0, 2, 3, 4, 5, 6], [0, 1, 2], [0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 5, 6],
        ]
        return lit[digit % 10].map { all[$0] }
    }

    /// Frames `0 ..< flashFrames(fps)` of every whole second from 1 s on are all white (100 ms).
    static func flashFrames(framesPerSecond fps: Int) -> Int { max(1, (fps + 5) / 10) }

    static func isFlash(frame n: Int, framesPerSecond fps: Int) -> Bool {
        n >= fps && n % fps < flashFrames(framesPerSecond: fps)
    }
}
