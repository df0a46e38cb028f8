import Testing
@testable import ReplayMedia

/// `MovieDurations` on hand-built headers: version-0 and version-1 boxes, the mehd, and the rule
/// that a value too big for its field stays unstated. (`MovieWriterTests` checks it on real files.)
@Suite struct MovieDurationsTests {
    static func box(_ type: String, _ content: [UInt8]) -> [UInt8] {
        be(UInt64(8 + content.count), 4) + Array(type.utf8) + content
    }
    static func be(_ value: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - $0))) }
    }
    /// mvhd or mdhd: version, flags, times, timescale, duration (0), then `tail` filler.
    static func timeBox(_ type: String, version: UInt8, timescale: UInt64, tail: Int) -> [UInt8] {
        let wide = version == 1 ? 8 : 4
        return box(type, [version, 0, 0, 0] + be(0, 2 * wide) + be(timescale, 4) + be(0, wide) + [UInt8](repeating: 0, count: tail))
    }
    static func tkhd(version: UInt8, id: UInt64) -> [UInt8] {
        let wide = version == 1 ? 8 : 4
        return box("tkhd", [version, 0, 0, 3] + be(0, 2 * wide) + be(id, 4) + be(0, 4) + be(0, wide) + [UInt8](repeating: 0, count: 60))
    }
    static func trak(version: UInt8, id: UInt64, timescale: UInt64) -> [UInt8] {
        box("trak", tkhd(version: version, id: id) + box("mdia", timeBox("mdhd", version: version, timescale: timescale, tail: 4)))
    }
    static func header(version: UInt8, mehd: Bool) -> [UInt8] {
        let mvex = box("mvex", (mehd ? box("mehd", [version, 0, 0, 0] + be(0, version == 1 ? 8 : 4)) : []) + box("trex", [UInt8](repeating: 0, count: 24)))
        let moov = box("moov", timeBoxMovie(version) + trak(version: version, id: 1, timescale: 15_360) + trak(version: version, id: 2, timescale: 48_000) + mvex)
        return box("ftyp", Array("isom".utf8) + be(512, 4)) + moov + box("moof", [1, 2, 3])
    }
    static func timeBoxMovie(_ version: UInt8) -> [UInt8] { timeBox("mvhd", version: version, timescale: 1000, tail: 80) }

    static func apply(_ patches: [MovieDurations.Patch], to bytes: [UInt8]) -> [UInt8] {
        var result = bytes
        for patch in patches { result.replaceSubrange(patch.offset..<(patch.offset + patch.bytes.count), with: patch.bytes) }
        return result
    }
    static func read(_ bytes: [UInt8], after marker: String, skip: Int, count: Int, occurrence: Int = 0) -> UInt64 {
        let type = Array(marker.utf8)
        var found = -1
        var start = 0
        for i in 0...(bytes.count - 4) where Array(bytes[i..<(i + 4)]) == type {
            found += 1
            if found == occurrence { start = i + 4; break }
        }
        return bytes[(start + skip)..<(start + skip + count)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    // 10 s of video in half ticks of 1/30 s, 10.005333 s of sound at 48 kHz.
    let ends = [MovieDurations.End(600, numerator: 1, denominator: 60), MovieDurations.End(480_256, numerator: 1, denominator: 48_000)]

    @Test(arguments: [UInt8(0), 1])
    func everyDurationIsStated(version: UInt8) throws {
        let header = Self.header(version: version, mehd: true)
        let patched = Self.apply(try MovieDurations.patches(header: header, ends: ends), to: header)
        let wide = version == 1 ? 8 : 4
        // mvhd: after version+flags, two times, the timescale.
        #expect(Self.read(patched, after: "mvhd", skip: 4 + 2 * wide + 4, count: wide) == 10_006, "the longest track, in ms rounded up")
        #expect(Self.read(patched, after: "tkhd", skip: 4 + 2 * wide + 8, count: wide, occurrence: 0) == 10_000)
        #expect(Self.read(patched, after: "tkhd", skip: 4 + 2 * wide + 8, count: wide, occurrence: 1) == 10_006)
        #expect(Self.read(patched, after: "mdhd", skip: 4 + 2 * wide + 4, count: wide, occurrence: 0) == 153_600)
        #expect(Self.read(patched, after: "mdhd", skip: 4 + 2 * wide + 4, count: wide, occurrence: 1) == 480_256)
        #expect(Self.read(patched, after: "mehd", skip: 4, count: wide) == 10_006)
        #expect(patched.count == header.count)
        // Nothing else moved: the timescales are intact.
        #expect(Self.read(patched, after: "mdhd", skip: 4 + 2 * wide, count: 4, occurrence: 1) == 48_000)
    }

    @Test func withoutMehdTheRestIsStated() throws {
        let header = Self.header(version: 0, mehd: false)
        let patches = try MovieDurations.patches(header: header, ends: ends)
        #expect(patches.count == 5)
    }

    @Test func aValueTooBigForAVersion0FieldStaysUnstated() throws {
        // 25 hours of sound: 4.32e9 units of 1/48000 s do not fit in 32 bits; the movie's ms do.
        let long = [ends[0], MovieDurations.End(25 * 3600 * 48_000, numerator: 1, denominator: 48_000)]
        let header = Self.header(version: 0, mehd: false)
        let patched = Self.apply(try MovieDurations.patches(header: header, ends: long), to: header)
        #expect(Self.read(patched, after: "mdhd", skip: 16, count: 4, occurrence: 1) == 0)
        #expect(Self.read(patched, after: "tkhd", skip: 20, count: 4, occurrence: 1) == 90_000_000)
    }

    @Test func aFragmentCutShortIsLeftOut() {
        let boxes: [(type: String, size: Int64)] = [("ftyp", 28), ("moov", 700), ("moof", 100), ("mdat", 1000), ("moof", 100), ("mdat", 5000)]
        #expect(MovieDurations.completeLength(of: boxes, fileSize: 6928) == 6928, "all complete")
        #expect(MovieDurations.completeLength(of: boxes, fileSize: 6000) == 1828, "the last mdat is cut short")
        #expect(MovieDurations.completeLength(of: Array(boxes.prefix(5)), fileSize: 1928) == 1828, "a moof without its mdat")
        #expect(MovieDurations.completeLength(of: boxes + [("mfra", 50)], fileSize: 6978) == 6978, "the trailer counts")
        #expect(MovieDurations.completeLength(of: [("ftyp", 28), ("moov", 700)], fileSize: 500) == 28)
    }

    @Test func aFileWithoutMoovIsAnError() {
        #expect(throws: MovieDurations.FormatError.self) { try MovieDurations.patches(header: Self.box("ftyp", [0, 0, 0, 0]), ends: ends) }
        let header = Self.header(version: 0, mehd: false)
        #expect(throws: MovieDurations.FormatError.self) { try MovieDurations.patches(header: Array(header.prefix(200)), ends: ends) }
        #expect(throws: MovieDurations.FormatError.self) { try MovieDurations.patches(header: header, ends: [ends[0]]) }
    }
}
