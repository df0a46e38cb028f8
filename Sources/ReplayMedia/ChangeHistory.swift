/// Which macroblocks a pooled picture lacks against the capture's latest picture, so that handing a
/// picture to the encoder copies only those (on a still desktop, a small part of the picture). The
/// capture thread numbers each picture it sends and records the
/// macroblocks that changed since the one sent before (`VideoFrame.changedBlocks`), before it fills
/// a pooled picture with it: a pooled picture that last held picture `n` lacks the union of the
/// changes recorded after `n`, the new picture's own included. Only the last `depth` records are
/// kept: a picture older than that, or one that never held a sent picture, takes everything.
package struct ChangeHistory: Sendable {
    package let depth: Int
    /// The changes of the last sent pictures, oldest first; the last is picture `latest`'s.
    private var records: [ChangedMacroblocks] = []
    /// The number of the latest sent picture (0 before any).
    package private(set) var latest: Int64 = 0

    package init(depth: Int) {
        precondition(depth > 0)
        self.depth = depth
    }

    /// Records that a picture went out with `changes` since the one sent before it; returns its number.
    package mutating func record(_ changes: ChangedMacroblocks) -> Int64 {
        if records.count == depth { records.removeFirst() }
        records.append(changes)
        latest += 1
        return latest
    }

    /// The macroblocks a picture holding picture `number` (nil: none) must take to equal the
    /// latest: the union of what changed after it; nil when that is not known (take it all).
    package func changes(since number: Int64?) -> ChangedMacroblocks? {
        guard let number, number > 0, number <= latest, let first = records.first else { return nil }
        let missing = Int(latest - number)
        guard missing < records.count else { return nil }
        var union = first
        union.removeAll()
        for record in records.suffix(missing) {
            union.formUnion(record)
            if union.all { return nil }
        }
        return union
    }
}
