import Testing
@testable import ReplayMedia

/// A pooled picture takes from the capture's picture only the macroblocks it lacks: the union of
/// what changed after the picture it holds, and everything when that is not known.
@Suite struct ChangeHistoryTests {
    let width = 100, height = 50   // 7 x 4 macroblocks, the last column and row partial

    private func changes(_ areas: [(x: Range<Int>, y: Range<Int>)]) -> ChangedMacroblocks {
        var map = ChangedMacroblocks(width: width, height: height)
        map.removeAll()
        for area in areas { map.mark(x: area.x, y: area.y) }
        return map
    }

    @Test func aPictureLacksWhatChangedAfterIt() throws {
        var history = ChangeHistory(depth: 4)
        #expect(history.changes(since: nil) == nil)
        let first = history.record(ChangedMacroblocks(width: width, height: height))   // all
        let second = history.record(changes([(0..<16, 0..<16)]))
        let third = history.record(changes([(40..<50, 20..<30)]))
        #expect((first, second, third) == (1, 2, 3))
        // Holding the latest: nothing to take.
        #expect(try #require(history.changes(since: third)).changedCount == 0)
        // Holding the second: the third's block only.
        let sinceSecond = try #require(history.changes(since: second))
        #expect(sinceSecond.changedCount == 2)   // x 40..<50 spans columns 2 and 3, y 20..<30 row 1
        #expect(sinceSecond.isChanged(column: 2, row: 1) && sinceSecond.isChanged(column: 3, row: 1))
        // Holding the first: the union of the second's and the third's.
        let sinceFirst = try #require(history.changes(since: first))
        #expect(sinceFirst.changedCount == 3 && sinceFirst.isChanged(column: 0, row: 0))
        // A change of everything since: take it all.
        _ = history.record(ChangedMacroblocks(width: width, height: height))
        #expect(history.changes(since: third) == nil)
    }

    @Test func aPictureOlderThanTheHistoryTakesEverything() throws {
        var history = ChangeHistory(depth: 2)
        let first = history.record(changes([(0..<16, 0..<16)]))
        let second = history.record(changes([(16..<32, 0..<16)]))
        _ = history.record(changes([(32..<48, 0..<16)]))
        #expect(history.changes(since: first) == nil)   // its successor's record is gone
        #expect(try #require(history.changes(since: second)).changedCount == 1)
        #expect(history.changes(since: 9) == nil)       // not a sent picture
    }

    /// Copying only the marked blocks gives the same picture as copying all of it, when the rest
    /// was the same: the partial last column and row and the chroma planes included.
    @Test func copyingTheChangedBlocksMakesTheSamePicture() {
        func painted(_ colour: (Int, Int) -> UInt32) -> VideoFrame {
            let frame = VideoFrame(width: width, height: height)
            var pixels = [UInt32](repeating: 0, count: width * height)
            for y in 0..<height { for x in 0..<width { pixels[y * width + x] = colour(x, y) } }
            pixels.withUnsafeBytes { frame.convert(fromBGRA: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), stride: width * 4, rows: 0..<height) }
            return frame
        }
        let before = painted { x, y in 0xff00_0000 | UInt32((x * 2) & 0xff) << 16 | UInt32((y * 4) & 0xff) << 8 }
        // Changed: a block in the middle and the bottom-right corner's partial block.
        let changedArea = { (x: Int, y: Int) in (20..<40).contains(x) && (10..<20).contains(y) || (x >= 96 && y >= 48) }
        let after = painted { x, y in changedArea(x, y) ? 0xff30_c050 : 0xff00_0000 | UInt32((x * 2) & 0xff) << 16 | UInt32((y * 4) & 0xff) << 8 }
        let pooled = painted { x, y in 0xff00_0000 | UInt32((x * 2) & 0xff) << 16 | UInt32((y * 4) & 0xff) << 8 }
        let map = changes([(20..<40, 10..<20), (96..<100, 48..<50)])
        pooled.copy(from: after, blocks: map)
        func planes(_ frame: VideoFrame) -> [[UInt8]] {
            let (y, u, v) = frame.planes
            let (ys, us, vs) = frame.strides
            return (0..<height).map { Array(UnsafeBufferPointer(start: y + $0 * ys, count: width)) }
                + (0..<height / 2).map { Array(UnsafeBufferPointer(start: u + $0 * us, count: width / 2)) }
                + (0..<height / 2).map { Array(UnsafeBufferPointer(start: v + $0 * vs, count: width / 2)) }
        }
        #expect(planes(pooled) == planes(after))
        #expect(planes(before) != planes(after))
        // Without the map's blocks the copy would be wrong: the test can fail.
        let stale = painted { x, y in 0xff00_0000 | UInt32((x * 2) & 0xff) << 16 | UInt32((y * 4) & 0xff) << 8 }
        stale.copy(from: after, blocks: changes([(20..<40, 10..<20)]))
        #expect(planes(stale) != planes(after))
    }
}
