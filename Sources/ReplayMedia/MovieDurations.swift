/// The durations a fragmented MP4's `moov` states, filled in once the movie is finished.
///
/// With `empty_moov` libavformat writes the movie header before any sample and never rewrites it:
/// `mvhd`, each `tkhd` and `mdhd` say 0 ("unknown"), and readers add up the fragments they find.
/// FFmpeg's reader does so only for the fragments it parses while probing, so a still screen's
/// last fragment (seconds after the one before) went uncounted: a 10 s recording showed 8.47 s.
/// At a clean stop `MovieWriter` therefore writes every track's end and the movie's, in place (the
/// fields keep their size, nothing moves). Pure: bytes in, the bytes to overwrite out.
package struct MovieDurations: Sendable, Equatable {
    /// An overwrite of `bytes` at `offset` from the start of the file.
    package struct Patch: Sendable, Equatable {
        package var offset: Int
        package var bytes: [UInt8]
    }

    /// A track's end: `value` units of `numerator/denominator` seconds.
    package struct End: Sendable, Equatable {
        package var value: Int64
        package var numerator: Int64
        package var denominator: Int64

        package init(_ value: Int64, numerator: Int64, denominator: Int64) {
            self.value = value
            self.numerator = numerator
            self.denominator = denominator
        }

        /// In units of 1/`timescale` s, rounded up (a stated duration never cuts a sample short).
        func units(timescale: Int64) -> Int64 {
            let scaled = value * numerator * timescale
            return scaled >= 0 ? (scaled + denominator - 1) / denominator : scaled / denominator
        }
    }

    package struct FormatError: Error, Sendable, Equatable, CustomStringConvertible {
        package var description: String
    }

    /// The patches that make the `moov` in `header` (the file's first bytes, holding its `ftyp` and
    /// `moov`) state `ends[i]` for the track with ID `i + 1` (libavformat numbers them so) and the
    /// longest of them for the movie (`mvhd`, and `mehd` when there is one). A version-0 field too
    /// small for its value (a track of more than a day) is left at 0: unknown rather than wrong.
    package static func patches(header: [UInt8], ends: [End]) throws(FormatError) -> [Patch] {
        let top = try boxes(in: header, from: 0, to: header.count, allowingTruncatedLast: true)
        guard let moov = top.first(where: { $0.type == "moov" }) else { throw FormatError(description: "no moov box at the start of the file") }
        guard moov.end <= header.count else { throw FormatError(description: "the moov box (\(moov.end) bytes in) does not fit in the header read") }
        let children = try boxes(in: header, from: moov.contentStart, to: moov.end)
        guard let mvhd = children.first(where: { $0.type == "mvhd" }) else { throw FormatError(description: "no mvhd box in the moov") }
        let movieTimescale = Int64(try field(header, box: mvhd, version0: 8, version1: 16, bytes: 4))
        guard movieTimescale > 0 else { throw FormatError(description: "the mvhd box has no timescale") }

        var patches: [Patch] = []
        var longest: Int64 = 0
        for trak in children where trak.type == "trak" {
            let parts = try boxes(in: header, from: trak.contentStart, to: trak.end)
            guard let tkhd = parts.first(where: { $0.type == "tkhd" }),
                  let mdia = parts.first(where: { $0.type == "mdia" }),
                  let mdhd = try boxes(in: header, from: mdia.contentStart, to: mdia.end).first(where: { $0.type == "mdhd" })
            else { throw FormatError(description: "a trak box without tkhd or mdhd") }
            let trackID = Int(try field(header, box: tkhd, version0: 8, version1: 16, bytes: 4))
            guard trackID >= 1, trackID <= ends.count else { throw FormatError(description: "track \(trackID) has no end given") }
            let end = ends[trackID - 1]
            let mediaTimescale = Int64(try field(header, box: mdhd, version0: 8, version1: 16, bytes: 4))
            guard mediaTimescale > 0 else { throw FormatError(description: "track \(trackID)'s mdhd has no timescale") }
            let movieUnits = end.units(timescale: movieTimescale)
            longest = max(longest, movieUnits)
            patches += try patch(header, box: tkhd, version0: 16, version1: 24, value: movieUnits)
            patches += try patch(header, box: mdhd, version0: 12, version1: 20, value: end.units(timescale: mediaTimescale))
        }
        patches += try patch(header, box: mvhd, version0: 12, version1: 20, value: longest)
        if let mvex = children.first(where: { $0.type == "mvex" }),
           let mehd = try boxes(in: header, from: mvex.contentStart, to: mvex.end).first(where: { $0.type == "mehd" }) {
            patches += try patch(header, box: mehd, version0: 0, version1: 0, value: longest)
        }
        return patches
    }

    /// How much of a fragmented MP4 plays whole: up to the end of its last complete fragment
    /// (`moof` then `mdat`) or other complete top-level box, given its top-level boxes in order
    /// (type and size; a size of 0 runs to the end) and the file's size. After a write error (a full
    /// disk) the last fragment may be cut short: its `moof` promises samples that are not there, and
    /// readers then state a duration that no packet reaches. `MovieWriter` cuts the file here.
    package static func completeLength(of boxes: [(type: String, size: Int64)], fileSize: Int64) -> Int64 {
        var offset: Int64 = 0
        var complete: Int64 = 0
        var inFragment = false
        for (type, size) in boxes {
            guard size >= 8, offset + size <= fileSize else { break }
            offset += size
            switch type {
            case "moof": inFragment = true
            case "mdat":
                if inFragment { complete = offset }
                inFragment = false
            default:
                if !inFragment { complete = offset }
            }
        }
        return complete
    }

    // MARK: boxes

    struct Box {
        var type: String
        var start: Int
        var contentStart: Int
        var end: Int
    }

    /// A box's header read from `bytes` at `offset` (8 bytes, or 16 with a 64-bit size): its type,
    /// whole size (`size` 0 means "to `end`") and header length; nil when the header is not all there.
    package static func header(in bytes: [UInt8], at offset: Int, end: Int) -> (type: String, size: Int, headerLength: Int)? {
        guard offset + 8 <= min(end, bytes.count) else { return nil }
        let type = String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self)
        switch Int(read(bytes, at: offset, count: 4)) {
        case 1:
            guard offset + 16 <= min(end, bytes.count) else { return nil }
            return (type, Int(read(bytes, at: offset + 8, count: 8)), 16)
        case 0:
            return (type, end - offset, 8)
        case let size:
            return (type, size, 8)
        }
    }

    private static func boxes(in bytes: [UInt8], from start: Int, to end: Int, allowingTruncatedLast: Bool = false) throws(FormatError) -> [Box] {
        var result: [Box] = []
        var offset = start
        while let (type, size, header) = header(in: bytes, at: offset, end: end) {
            guard size >= header else { throw FormatError(description: "a \(type) box of \(size) bytes at \(offset)") }
            if offset + size > end, !allowingTruncatedLast { throw FormatError(description: "the \(type) box at \(offset) runs past its parent") }
            result.append(Box(type: type, start: offset, contentStart: offset + header, end: offset + size))
            offset += size
        }
        return result
    }

    /// A full box's field `version0`/`version1` bytes after its version and flags.
    private static func field(_ bytes: [UInt8], box: Box, version0: Int, version1: Int, bytes count: Int) throws(FormatError) -> UInt64 {
        let offset = try fieldOffset(bytes, box: box, version0: version0, version1: version1, size: count)
        return read(bytes, at: offset, count: count)
    }

    /// The overwrite of a duration field (4 bytes in a version-0 box, 8 in a version-1 one).
    private static func patch(_ bytes: [UInt8], box: Box, version0: Int, version1: Int, value: Int64) throws(FormatError) -> [Patch] {
        let wide = bytes[box.contentStart] == 1
        let size = wide ? 8 : 4
        guard value >= 0, wide || value <= Int64(UInt32.max) else { return [] }
        let offset = try fieldOffset(bytes, box: box, version0: version0, version1: version1, size: size)
        return [Patch(offset: offset, bytes: (0..<size).map { UInt8(truncatingIfNeeded: UInt64(value) >> (8 * UInt64(size - 1 - $0))) })]
    }

    private static func fieldOffset(_ bytes: [UInt8], box: Box, version0: Int, version1: Int, size: Int) throws(FormatError) -> Int {
        guard box.contentStart + 4 <= box.end else { throw FormatError(description: "an empty \(box.type) box") }
        let version = bytes[box.contentStart]
        guard version <= 1 else { throw FormatError(description: "a \(box.type) box of version \(version)") }
        let offset = box.contentStart + 4 + (version == 1 ? version1 : version0)
        guard offset + size <= box.end else { throw FormatError(description: "the \(box.type) box is too short") }
        return offset
    }

    private static func read(_ bytes: [UInt8], at offset: Int, count: Int) -> UInt64 {
        bytes[offset..<(offset + count)].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
