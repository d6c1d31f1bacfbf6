//! Handing memory back to the system after a crowd of streams leaves, or a burst of responses.
//!
//! Thousands of streams that close (a fleet moving to another replica, or a client opening
//! streams it abandons) free their memory inside the allocator, which keeps most of it for
//! reuse: the process stays at its peak size. So do the responses of a burst (a fleet
//! connecting, each stream sent every cluster and endpoint: hundreds of KiB each, freed as
//! they are written): measured at 2,000 streams and 1,000 clusters, a third of the resident
//! memory after the first convergence was free pages kept (issue 51). When many streams have
//! closed since the last look, or many bytes of responses were framed, the allocator is asked
//! to return its free pages (glibc's `malloc_trim`), so resident memory follows what is in
//! use.

use std::sync::Arc;
use std::time::Duration;

use crate::Serving;

/// How often the stream count is looked at.
const EVERY: Duration = Duration::from_secs(1);
/// Streams closed since the last trim (from the peak in between) that make a trim worth it.
const CLOSED_ENOUGH: usize = 256;
/// Bytes of responses framed since the last trim that make one worth it: once the burst is
/// over (a look with few framed since the last), or every [`BURST_EVERY`] while it lasts (a
/// trim walks the heap: tens of milliseconds on a large one).
const FRAMED_ENOUGH: u64 = 32 << 20;
const BURST_EVERY: Duration = Duration::from_secs(10);

/// Runs until shutdown.
pub async fn return_freed(serving: Arc<Serving>) {
    let mut shutdown = serving.shutdown.clone();
    let mut peak = 0usize;
    let framed = || crate::codec::FRAMED_BYTES.load(std::sync::atomic::Ordering::Relaxed);
    let (mut framed_at_trim, mut trimmed_at) = (framed(), tokio::time::Instant::now());
    let mut framed_at_look = framed_at_trim;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = shutdown.changed() => return,
        }
        let open = serving.nodes.stream_count();
        peak = peak.max(open);
        let now_framed = framed();
        let quiet = now_framed - framed_at_look < FRAMED_ENOUGH / 16;
        framed_at_look = now_framed;
        let burst = now_framed - framed_at_trim >= FRAMED_ENOUGH && (quiet || trimmed_at.elapsed() >= BURST_EVERY);
        if peak - open >= CLOSED_ENOUGH || burst {
            let trimmed = tokio::task::spawn_blocking(xdst_core::heap::return_free_pages).await.unwrap_or(false);
            tracing::debug!(closed = peak - open, open, burst, trimmed, "free memory handed back");
            peak = open;
            (framed_at_trim, trimmed_at) = (framed(), tokio::time::Instant::now());
        }
    }
}
