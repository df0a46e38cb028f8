#if canImport(Glibc)
import Glibc
#endif

/// glibc's allocator tuned for a long-running daemon that allocates pictures of megabytes per session.
/// `malloc_trim` and `mallopt` are not in Swift's Glibc module: they are looked up by name.
package enum GlibcMalloc {
    /// Gives the free memory of every arena back to the system (`malloc_trim(0)`).
    package static func trim() {
        typealias Trim = @convention(c) (Int) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
    }

    /// Blocks of `bytes` and more are mapped on their own and unmapped when freed (`mallopt(M_MMAP_THRESHOLD)`,
    /// which also stops glibc from raising the threshold after the first such free): a session's
    /// pictures go back to the system when it ends, instead of staying in an arena.
    package static func mapBlocks(ofAtLeast bytes: Int32) {
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        let mmapThreshold: Int32 = -3   // M_MMAP_THRESHOLD
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
        _ = unsafeBitCast(symbol, to: Mallopt.self)(mmapThreshold, bytes)
    }
}
