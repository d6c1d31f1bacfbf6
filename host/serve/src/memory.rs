//! Handing memory back to the system after a crowd of streams leaves.
//!
//! Thousands of streams that close (a fleet moving to another replica, or a client opening
//! streams it abandons) free their memory inside the allocator, which keeps most of it for
//! reuse: the process stays at its peak size. When many streams have closed since the last
//! look, the allocator is asked to return its free pages (glibc's `malloc_trim`), so resident
//! memory follows the streams that are actually open.

use std::sync::Arc;
use std::time::Duration;

use crate::Serving;

/// How often the stream count is looked at.
const EVERY: Duration = Duration::from_secs(2);
/// Streams closed since the last trim (from the peak in between) that make a trim worth it.
const CLOSED_ENOUGH: usize = 256;

/// Runs until shutdown.
pub async fn return_freed(serving: Arc<Serving>) {
    let mut shutdown = serving.shutdown.clone();
    let mut peak = 0usize;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = shutdown.changed() => return,
        }
        let open = serving.nodes.stream_count();
        peak = peak.max(open);
        if peak - open >= CLOSED_ENOUGH {
            let trimmed = tokio::task::spawn_blocking(xdst_core::heap::return_free_pages).await.unwrap_or(false);
            tracing::debug!(closed = peak - open, open, trimmed, "streams closed: free memory handed back");
            peak = open;
        }
    }
}
