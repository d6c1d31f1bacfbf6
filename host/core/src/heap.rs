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
