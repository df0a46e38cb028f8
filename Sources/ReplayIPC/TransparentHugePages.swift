import CSocketShim

/// The kernel's transparent huge pages (2 MB pages for anonymous memory), for this process.
package enum TransparentHugePages {
    /// Turns them off for this process and the programs it starts (`prctl(PR_SET_THP_DISABLE)`),
    /// even where a library asks for them: libx264 gives each of its allocations of 1.75 MB and more
    /// `madvise(MADV_HUGEPAGE)`. A huge page is dirtied whole by its first write, so a buffer that is
    /// mostly unused (libx264's bitstream buffer, one a thread) counts 2 MB a page in `Private_Dirty`.
    /// Returns the errno when the kernel refuses, nil when done.
    @discardableResult
    package static func disable() -> Int32? {
        let result = ork_disable_transparent_huge_pages()
        return result == 0 ? nil : -result
    }
}
