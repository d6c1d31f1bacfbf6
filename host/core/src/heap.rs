//! Handing the allocator's free pages back to the system.

/// Asks the allocator to return its free heap pages to the system (glibc's `malloc_trim`);
/// whether any were. glibc keeps what is freed for reuse, in one arena per thread that
/// allocated it, so a burst of work (streams that close, a plugin compiled on several threads)
/// otherwise leaves the process at the size of its peak.
pub fn return_free_pages() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks the allocator's own free lists.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// What the allocator holds: bytes in use by the program, and bytes it keeps free for reuse
/// (in its heaps, not yet handed back). Resident memory well above `in_use` is free memory
/// the allocator keeps; close to it, memory the program holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub in_use: u64,
    pub free: u64,
}

/// The allocator's figures (glibc's `mallinfo2`; `None` elsewhere). It walks each arena's
/// free lists under its lock: for a scrape, not for a hot path.
pub fn usage() -> Option<Usage> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's own bookkeeping.
        let m = unsafe { libc::mallinfo2() };
        Some(Usage { in_use: (m.uordblks + m.hblkhd) as u64, free: m.fordblks as u64 })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    /// A large block held shows in `in_use`, and goes from it once freed. (Other tests run
    /// beside this one: the first check holds whatever they free meanwhile.)
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn usage_counts_what_is_held() {
        let block = vec![7u8; 64 << 20];
        let held = super::usage().unwrap();
        assert!(held.in_use >= 64 << 20, "{held:?}");
        drop(std::hint::black_box(block));
        let after = super::usage().unwrap();
        assert!(after.in_use + (32 << 20) <= held.in_use, "{held:?} -> {after:?}");
    }
}
