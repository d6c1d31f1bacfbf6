//! A plugin's stdout and stderr: kept up to a cap per call, the rest dropped and counted.
//!
//! A plugin that writes more than the cap goes on running: its output beyond the cap is
//! dropped (the log says how much), never a trap. The bytes kept are logged line by line
//! after the call, within the per-call log limits.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes plugins wrote to stdout and stderr beyond the per-call cap, since start.
pub static DROPPED_BYTES: AtomicU64 = AtomicU64::new(0);

/// One call's stdout (or stderr).
#[derive(Clone)]
pub struct CappedPipe {
    cap: usize,
    captured: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: usize,
}

impl CappedPipe {
    pub fn new(cap: usize) -> CappedPipe {
        CappedPipe { cap, captured: Arc::default() }
    }

    fn accept(&self, bytes: &[u8]) {
        let mut c = self.captured.lock().unwrap_or_else(PoisonError::into_inner);
        let room = self.cap.saturating_sub(c.kept.len());
        let keep = bytes.len().min(room);
        c.kept.extend_from_slice(&bytes[..keep]);
        let dropped = bytes.len() - keep;
        if dropped > 0 {
            c.dropped += dropped;
            DROPPED_BYTES.fetch_add(dropped as u64, Ordering::Relaxed);
        }
    }

    /// What was kept, and how many bytes were dropped.
    pub fn contents(&self) -> (Vec<u8>, usize) {
        let c = self.captured.lock().unwrap_or_else(PoisonError::into_inner);
        (c.kept.clone(), c.dropped)
    }
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.accept(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    /// Always room: what does not fit is dropped, so the stream never fills up or closes.
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 << 10)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.accept(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl wasmtime_wasi::cli::IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_beyond_the_cap_are_dropped_and_counted_never_refused() {
        let mut pipe = CappedPipe::new(1000);
        let before = DROPPED_BYTES.load(Ordering::Relaxed);
        for _ in 0..300 {
            assert_eq!(pipe.check_write().unwrap(), 64 << 10, "the stream must not fill up");
            pipe.write(bytes::Bytes::from(vec![b'x'; 100])).unwrap();
        }
        let (kept, dropped) = pipe.contents();
        assert_eq!((kept.len(), dropped), (1000, 29_000));
        assert!(DROPPED_BYTES.load(Ordering::Relaxed) - before >= 29_000);
    }
}
