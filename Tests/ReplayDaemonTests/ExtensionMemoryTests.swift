import Testing
import Glibc
@testable import ReplayDaemon

/// replayd's measure of an extension's memory (its limit, `--extension-memory-mb`): its own dirtied
/// pages, read from `/proc/PID/smaps`, without the frame ring.
@Suite struct ExtensionMemoryTests {
    /// Three mappings of a real upload extension's smaps as it finished a 1080p broadcast: an
    /// anonymous one, the frame ring (left to the extension alone once replayd unmapped it) and
    /// libc's data.
    static let smaps = """
7f52ec000000-7f52ec021000 rw-p 00000000 00:00 0 
Size:                132 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                 132 kB
Pss:                 132 kB
Pss_Dirty:           132 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:       132 kB
Referenced:          132 kB
Anonymous:           132 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
VmFlags: rd wr mr mw me nr 
7f5302f25000-7f5304000000 rw-s 00000000 00:01 619                        /memfd:openreplaykit-ring-:240 (deleted)
Size:              17260 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:               16740 kB
Pss:               16740 kB
Pss_Dirty:         16740 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:     16740 kB
Referenced:        16740 kB
Anonymous:             0 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
VmFlags: rd wr sh mr mw me ms 
7f5327018000-7f532701a000 rw-p 001d3000 fe:00 333151                     /usr/lib/x86_64-linux-gnu/libc.so.6
Size:                  8 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   8 kB
Pss:                   8 kB
Pss_Dirty:             8 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:         8 kB
Referenced:            8 kB
Anonymous:             8 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
VmFlags: rd wr mr mw me ac 
"""

    @Test func countsTheExtensionsOwnDirtyPagesButNotTheFrameRing() {
        #expect(RecordingSessions.ownDirtyKilobytes(smaps: Self.smaps) == 132 + 8)
    }

    @Test func theRingsNameIsTheOneRecordingSessionsGivesIt() {
        #expect(Self.smaps.contains("/memfd:\(RecordingSessions.ringName)-:240"))
    }

    /// This test process's own figure, read whole from /proc (its smaps runs to hundreds of
    /// kilobytes): it grows by what the test holds, 64 MB written.
    @Test func measuresAProcessFromItsWholeSmaps() throws {
        let pid = getpid()
        let smaps = try #require(RecordingSessions.readProcFile("/proc/\(pid)/smaps"))
        #expect(smaps.hasSuffix("\n") && smaps.contains("[stack]"), "the whole file, up to its last mapping")
        let before = try #require(RecordingSessions.residentMegabytes(of: pid))
        let held = [UInt8](repeating: 1, count: 64 << 20)
        let after = try #require(RecordingSessions.residentMegabytes(of: pid))
        #expect(after - before >= 60, "\(before) MB, then \(after) MB holding \(held.count >> 20) MB")
    }

    @Test func isNilForTextWithoutTheField() {
        #expect(RecordingSessions.ownDirtyKilobytes(smaps: "") == nil)
        #expect(RecordingSessions.ownDirtyKilobytes(smaps: "VmRSS: 1000 kB\n") == nil)
    }
}
