/// Which 16x16 macroblocks of a picture changed since the picture before it that went to the
/// encoder: the capture marks what it converted, the encoder tells libx264 the rest is unchanged
/// (`X264_MBINFO_CONSTANT`), and libx264 skips its analysis there. A picture from anywhere else
/// (a test, a scaled screen) counts as changed everywhere.
package struct ChangedMacroblocks: Sendable, Equatable {
    package static let size = 16
    package let columns: Int
    package let rows: Int
    /// One flag a macroblock, row by row; empty while `all`.
    private var flags: [Bool]
    /// Everything changed (or nothing is known).
    package private(set) var all: Bool

    /// A map of a `width` x `height` picture in which everything changed.
    package init(width: Int, height: Int) {
        columns = (width + Self.size - 1) / Self.size
        rows = (height + Self.size - 1) / Self.size
        flags = []
        all = true
    }

    /// Nothing changed (after the picture went to the encoder).
    package mutating func removeAll() {
        all = false
        flags = [Bool](repeating: false, count: columns * rows)
    }

    package mutating func markAll() {
        all = true
        flags = []
    }

    /// Marks the macroblocks that the pixels `x` × `y` touch.
    package mutating func mark(x: Range<Int>, y: Range<Int>) {
        guard !all else { return }
        let left = max(0, x.lowerBound / Self.size), right = min(columns, (x.upperBound + Self.size - 1) / Self.size)
        let top = max(0, y.lowerBound / Self.size), bottom = min(rows, (y.upperBound + Self.size - 1) / Self.size)
        guard left < right, top < bottom else { return }
        if left == 0, top == 0, right == columns, bottom == rows { return markAll() }
        for row in top..<bottom {
            for column in left..<right { flags[row * columns + column] = true }
        }
    }

    /// Adds what changed in `other` (a map of the same picture size).
    package mutating func formUnion(_ other: ChangedMacroblocks) {
        guard !all else { return }
        guard !other.all, other.columns == columns, other.rows == rows else { return markAll() }
        for index in flags.indices where other.flags[index] { flags[index] = true }
    }

    package func isChanged(column: Int, row: Int) -> Bool {
        all || flags[row * columns + column]
    }

    /// How many macroblocks changed.
    package var changedCount: Int { all ? columns * rows : flags.reduce(0) { $0 + ($1 ? 1 : 0) } }
}
