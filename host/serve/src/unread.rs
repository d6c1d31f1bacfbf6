//! Bytes queued for a client that does not read (issue 49, item 8b): a budget per client
//! (`--max-unread-bytes-per-client`) on the xDS responses handed to its connections and not
//! yet written out to them.
//!
//! HTTP/2 flow control stops what is *sent* to a client that does not read, not what xdst
//! *queues* for it: hyper hands a response body's frame to h2 as soon as the stream has any
//! window, and h2 keeps the whole frame until the peer's window lets it out. A stream whose
//! client stopped reading so pins one whole response (its framed copy), and a client pins that
//! for every stream it opens. Here a response is handed out in pieces of [`PIECE`] bytes, one
//! piece in flight per stream at a time, and a response takes its size from its client's
//! budget until its last piece is written out:
//!
//! - a response that does not fit waits for room (the stream is not polled meanwhile, so what
//!   it will send merges into its next response; nothing piles up), and one larger than the
//!   whole budget goes out when nothing else of its client is unread;
//! - while a stream of the client waits for room, its streams whose bytes have not moved for
//!   [`STALL`] are reset (RST_STREAM ENHANCE_YOUR_CALM, which gRPC clients report as
//!   RESOURCE_EXHAUSTED), counted in `xdst_refusals_total{reason="unread_bytes"}` and logged
//!   once a minute per client; a stream whose piece hyper holds (waiting for window) cannot be
//!   reached by a reset, and its connection is closed instead. A client that reads, however
//!   slowly, moves its bytes and is never reset: it waits its turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use futures::task::AtomicWaker;

use crate::places::Place;

/// The most of a response handed to the transport at once; the next piece goes once this one
/// is written out, so a stream's progress shows every `PIECE` bytes.
pub const PIECE: usize = 64 << 10;

/// How long a stream's unread bytes may not move before it is reset, while another stream
/// of its client waits for room.
pub const STALL: Duration = Duration::from_secs(2);

/// Every client's budget.
#[derive(Debug)]
pub struct Unread {
    /// Bytes a client may have unread (0: no limit).
    max: usize,
    clients: Mutex<HashMap<Box<str>, Arc<Client>>>,
    /// The clock's start for the streams' `moved` stamps.
    epoch: Instant,
    next: AtomicU64,
}

/// One client's unread bytes and streams.
#[derive(Debug)]
struct Client {
    key: Box<str>,
    bytes: AtomicUsize,
    /// Woken whenever bytes are written out, while a stream of the client waits for room.
    room: tokio::sync::Notify,
    /// Streams of the client waiting for room: with none, bytes written out wake nobody (and
    /// take no lock on `room`).
    waiting: AtomicUsize,
    streams: Mutex<HashMap<u64, Weak<Stream>>>,
}

/// One stream's share of its client's budget.
#[derive(Debug)]
pub struct Stream {
    of: Arc<Unread>,
    client: Arc<Client>,
    id: u64,
    /// Bytes of its responses handed out and not yet written.
    unread: AtomicUsize,
    /// Milliseconds since the epoch when its unread bytes last moved (or began).
    moved: AtomicU64,
    /// A piece handed to the transport and not yet written.
    in_flight: AtomicBool,
    /// The body waiting for that piece to be written before it hands out the next.
    written: AtomicWaker,
    /// The body waiting for its next response while its last piece is not written: a reset
    /// must reach it, the piece written need not wake it.
    reset_waker: AtomicWaker,
    /// Whether the body is waiting in its own poll (a reset reaches it), not holding a piece
    /// hyper has taken.
    parked: AtomicBool,
    reset: AtomicBool,
    reset_signal: tokio::sync::Notify,
    connection: Option<Arc<Place>>,
}

/// Counts a stream reset for not reading (`xdst_refusals_total{reason="unread_bytes"}`) of a
/// client, and says whether to log it: the serving plane, or a test's stand-in.
pub trait Refusals: Send + Sync + 'static {
    fn unread_reset(&self, client: &str) -> bool;
}

impl Refusals for crate::Serving {
    fn unread_reset(&self, client: &str) -> bool {
        self.refused("unread_bytes", client)
    }
}

/// Why a stream was ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reset {
    pub max: usize,
}

/// A response's claim on its client's budget, held until all of it is written.
#[derive(Debug)]
pub struct Claim {
    stream: Arc<Stream>,
    len: usize,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.stream.unread.fetch_sub(self.len, Ordering::Relaxed);
        self.stream.touch();
        let client = &self.stream.client;
        // Sequentially consistent with the waiter's count and its try: either it sees these
        // bytes gone, or this sees it waiting.
        client.bytes.fetch_sub(self.len, Ordering::SeqCst);
        if client.waiting.load(Ordering::SeqCst) > 0 {
            client.room.notify_waiters();
        }
    }
}

impl Unread {
    /// The default `--max-unread-bytes-per-client`.
    pub const DEFAULT_MAX: usize = 64 << 20;

    pub fn new(max: usize) -> Arc<Unread> {
        Arc::new(Unread { max, clients: Mutex::default(), epoch: Instant::now(), next: AtomicU64::new(0) })
    }

    /// The budget share of a new stream of `client` on `connection`; None without a limit.
    pub fn stream(self: &Arc<Self>, client: &str, connection: Option<Arc<Place>>) -> Option<Arc<Stream>> {
        if self.max == 0 {
            return None;
        }
        let client = self
            .clients
            .lock()
            .unwrap()
            .entry(client.into())
            .or_insert_with(|| {
                Arc::new(Client {
                    key: client.into(),
                    bytes: AtomicUsize::new(0),
                    room: tokio::sync::Notify::new(),
                    waiting: AtomicUsize::new(0),
                    streams: Mutex::default(),
                })
            })
            .clone();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let stream = Arc::new(Stream {
            of: self.clone(),
            client: client.clone(),
            id,
            unread: AtomicUsize::new(0),
            moved: AtomicU64::new(0),
            in_flight: AtomicBool::new(false),
            written: AtomicWaker::new(),
            reset_waker: AtomicWaker::new(),
            parked: AtomicBool::new(false),
            reset: AtomicBool::new(false),
            reset_signal: tokio::sync::Notify::new(),
            connection,
        });
        client.streams.lock().unwrap().insert(id, Arc::downgrade(&stream));
        Some(stream)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The client's bytes unread now.
    #[cfg(test)]
    pub(crate) fn bytes(&self, client: &str) -> usize {
        self.clients.lock().unwrap().get(client).map_or(0, |c| c.bytes.load(Ordering::Relaxed))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let empty = {
            let mut streams = self.client.streams.lock().unwrap();
            streams.remove(&self.id);
            streams.is_empty()
        };
        if empty {
            let mut clients = self.of.clients.lock().unwrap();
            if let Some(c) = clients.get(&self.client.key)
                && Arc::ptr_eq(c, &self.client)
                && c.streams.lock().unwrap().is_empty()
            {
                clients.remove(&self.client.key);
            }
        }
    }
}

impl Stream {
    fn touch(&self) {
        self.moved.store(self.of.now_ms(), Ordering::Relaxed);
    }

    /// Its client's budget.
    pub fn max(&self) -> usize {
        self.of.max
    }

    /// Whether the stream was reset for not reading.
    pub fn is_reset(&self) -> bool {
        self.reset.load(Ordering::Relaxed)
    }

    /// Resolves once the stream is reset.
    pub async fn reset(&self) {
        loop {
            let notified = self.reset_signal.notified();
            if self.is_reset() {
                return;
            }
            notified.await;
        }
    }

    /// The body is waiting in its own poll (true) or handed a piece that hyper holds (false).
    pub fn set_parked(&self, parked: bool) {
        self.parked.store(parked, Ordering::Relaxed);
    }

    /// Whether [`Stream::poll_piece_written`] has anything to wait for (a piece in flight, or
    /// a reset to report).
    pub fn waits_for_piece(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) || self.is_reset()
    }

    /// Ready once the piece in flight is written (or the stream is reset).
    pub fn poll_piece_written(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Reset>> {
        if !self.waits_for_piece() {
            // Not registered: a waker left behind would be woken by the next piece written.
            return std::task::Poll::Ready(Ok(()));
        }
        // Registered before the checks again: a piece written or a reset after them wakes it.
        self.written.register(cx.waker());
        if self.is_reset() {
            return std::task::Poll::Ready(Err(Reset { max: self.of.max }));
        }
        if self.in_flight.load(Ordering::Acquire) {
            return std::task::Poll::Pending;
        }
        std::task::Poll::Ready(Ok(()))
    }

    /// Ready once the stream is reset; a piece written does not wake it.
    pub fn poll_reset(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Reset> {
        self.reset_waker.register(cx.waker());
        if self.is_reset() {
            return std::task::Poll::Ready(Reset { max: self.of.max });
        }
        std::task::Poll::Pending
    }

    /// Waits until the piece in flight is written (or the stream is reset).
    #[cfg(test)]
    pub async fn piece_written(&self) -> Result<(), Reset> {
        std::future::poll_fn(|cx| self.poll_piece_written(cx)).await
    }

    /// Takes `len` bytes from the client's budget for a response, waiting for room; while it
    /// waits, resets the client's streams whose bytes have not moved for [`STALL`], telling
    /// `refused` (the client's key) of each (it counts the refusal, and says whether to log
    /// it). `Err` when this stream is reset meanwhile.
    pub async fn claim(self: &Arc<Self>, len: usize, refused: &(dyn Fn(&str) -> bool + Sync)) -> Result<Claim, Reset> {
        let max = self.of.max;
        if let Some(claim) = self.try_claim(len) {
            return Ok(claim);
        }
        let _waiting = Waiting::on(&self.client);
        let mut waited = None;
        loop {
            let room = self.client.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if self.is_reset() {
                return Err(Reset { max });
            }
            if let Some(claim) = self.try_claim(len) {
                return Ok(claim);
            }
            let since = *waited.get_or_insert_with(Instant::now);
            if since.elapsed() >= STALL / 2 {
                self.client.reset_stalled(&self.of, refused, self.id);
            }
            tokio::select! {
                () = &mut room => {}
                () = tokio::time::sleep(STALL / 4) => {}
                () = self.reset() => {}
            }
        }
    }

    /// Takes `len` bytes from the client's budget if they fit now.
    pub fn try_claim(self: &Arc<Self>, len: usize) -> Option<Claim> {
        let max = self.of.max;
        let taken = self.client.bytes.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
            (now == 0 || now.saturating_add(len) <= max).then_some(now + len)
        });
        taken.ok()?;
        if self.unread.fetch_add(len, Ordering::Relaxed) == 0 {
            self.touch();
        }
        Some(Claim { stream: self.clone(), len })
    }

    /// Hands out the first [`PIECE`] of `framed` (or all of it), keeping the rest for
    /// [`Pieces::next_piece`].
    pub fn pieces(self: &Arc<Self>, framed: Vec<u8>, claim: Claim) -> Pieces {
        let framed = Framed { bytes: framed, _claim: claim };
        let left = if framed.bytes.len() <= PIECE {
            Left::Whole(Some(framed))
        } else {
            Left::Parts { framed: Arc::new(framed), at: 0 }
        };
        Pieces { left, stream: self.clone() }
    }
}

/// A stream of the client counted as waiting for room while this lives.
struct Waiting<'a>(&'a Client);

impl<'a> Waiting<'a> {
    fn on(client: &'a Client) -> Self {
        client.waiting.fetch_add(1, Ordering::SeqCst);
        Waiting(client)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Client {
    /// Resets the streams of the client (other than `waiting`) whose unread bytes have not
    /// moved for [`STALL`].
    fn reset_stalled(&self, unread: &Unread, refused: &(dyn Fn(&str) -> bool + Sync), waiting: u64) {
        let now = unread.now_ms();
        let stall = u64::try_from(STALL.as_millis()).unwrap_or(u64::MAX);
        let streams: Vec<Arc<Stream>> = self.streams.lock().unwrap().values().filter_map(Weak::upgrade).collect();
        for s in streams {
            if s.id == waiting
                || s.is_reset()
                || s.unread.load(Ordering::Relaxed) == 0
                || now.saturating_sub(s.moved.load(Ordering::Relaxed)) < stall
            {
                continue;
            }
            s.reset.store(true, Ordering::Relaxed);
            let reached = s.parked.load(Ordering::Relaxed);
            s.reset_signal.notify_one();
            s.written.wake();
            s.reset_waker.wake();
            if !reached && let Some(c) = &s.connection {
                // hyper holds a piece of it, waiting for window: only closing the connection
                // frees it.
                c.close();
            }
            if refused(&self.key) {
                tracing::warn!(
                    client = %self.key,
                    unread = s.unread.load(Ordering::Relaxed),
                    max = unread.max,
                    how = if reached { "stream reset" } else { "connection closed" },
                    "a stream whose responses were not read for {STALL:?} was closed: its client has more unread \
                     than --max-unread-bytes-per-client (logged once a minute per client)"
                );
            }
        }
    }
}

/// A framed response and its claim on the budget, freed when its last piece is written.
#[derive(Debug)]
struct Framed {
    bytes: Vec<u8>,
    _claim: Claim,
}

/// A response being handed out piece by piece.
#[derive(Debug)]
pub struct Pieces {
    left: Left,
    stream: Arc<Stream>,
}

/// What is left of a response to hand out.
#[derive(Debug)]
enum Left {
    /// All of it, in one piece (most responses): handed out without a shared copy.
    Whole(Option<Framed>),
    /// More than a piece: shared by its pieces, from `at` on.
    Parts { framed: Arc<Framed>, at: usize },
}

/// One piece: written out when the transport drops it.
struct Piece {
    held: Held,
    stream: Arc<Stream>,
}

enum Held {
    Whole(Framed),
    Part(Arc<Framed>, std::ops::Range<usize>),
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        match &self.held {
            Held::Whole(framed) => &framed.bytes,
            Held::Part(framed, range) => &framed.bytes[range.clone()],
        }
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        self.stream.touch();
        self.stream.in_flight.store(false, Ordering::Release);
        self.stream.written.wake();
        // The claim goes with the last piece, after this.
    }
}

impl Pieces {
    /// Whether a piece is left to hand out.
    pub fn has_more(&self) -> bool {
        match &self.left {
            Left::Whole(framed) => framed.is_some(),
            Left::Parts { framed, at } => *at < framed.bytes.len(),
        }
    }

    /// The next piece, marked in flight; None once all were handed out.
    pub fn next_piece(&mut self) -> Option<Bytes> {
        let held = match &mut self.left {
            Left::Whole(framed) => Held::Whole(framed.take()?),
            Left::Parts { framed, at } => {
                let len = framed.bytes.len();
                if *at >= len {
                    return None;
                }
                let end = (*at + PIECE).min(len);
                let range = *at..end;
                *at = end;
                if end < len {
                    Held::Part(framed.clone(), range)
                } else {
                    // The last piece takes the response along: its claim ends when it is written.
                    let Left::Parts { framed, .. } = std::mem::replace(&mut self.left, Left::Whole(None)) else {
                        unreachable!("matched above")
                    };
                    Held::Part(framed, range)
                }
            }
        };
        self.stream.in_flight.store(true, Ordering::Release);
        Some(Bytes::from_owner(Piece { held, stream: self.stream.clone() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(_: &str) -> bool {
        false
    }

    /// A response that does not fit waits for room; bytes written out make room; one larger
    /// than the budget goes alone.
    #[tokio::test]
    async fn responses_wait_for_room_and_a_large_one_goes_alone() {
        let u = Unread::new(100);
        let (a, b) = (u.stream("c", None).unwrap(), u.stream("c", None).unwrap());
        let first = a.claim(60, &quiet).await.unwrap();
        assert_eq!(u.bytes("c"), 60);
        let waiting = tokio::spawn({
            let b = b.clone();
            async move { b.claim(60, &quiet).await.map(|c| c.len) }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "60 + 60 is over 100");
        drop(first);
        assert_eq!(waiting.await.unwrap(), Ok(60));
        assert_eq!(u.bytes("c"), 0, "the claim was dropped with its task's result");
        let big = a.claim(500, &quiet).await.unwrap();
        assert_eq!(u.bytes("c"), 500, "alone, a response over the budget goes");
        drop(big);
        assert!(u.stream("other", None).is_some());
        assert_eq!(Unread::new(0).stream("c", None).map(|_| ()), None, "0: no limit");
    }

    /// Bytes written out wake a stream of the client waiting for room at once, not at its
    /// next look a quarter of STALL later: written-out bytes notify only while a stream waits,
    /// and a stream counts as waiting before its first look (issue 51).
    #[tokio::test(start_paused = true)]
    async fn bytes_written_out_wake_a_stream_waiting_for_room_at_once() {
        let u = Unread::new(100);
        let (a, b) = (u.stream("c", None).unwrap(), u.stream("c", None).unwrap());
        let first = a.claim(60, &quiet).await.unwrap();
        let waiting = tokio::spawn(async move { b.claim(60, &quiet).await.map(|c| c.len) });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "60 + 60 is over 100");
        drop(first);
        let woken = tokio::time::timeout(STALL / 40, waiting).await;
        assert_eq!(woken.expect("not woken by the bytes written out").unwrap(), Ok(60));
        assert_eq!(u.bytes("c"), 0);
    }

    /// Issue 49, item 8b: while a stream waits for room, a stream of the same client whose
    /// bytes have not moved for STALL is reset (a parked one by its signal; one hyper holds a
    /// piece of by closing its connection); a stream that moves is not.
    #[tokio::test(start_paused = true)]
    async fn stalled_streams_are_reset_when_another_waits() {
        let u = Unread::new(100);
        let place = Place::new();
        let stuck = u.stream("c", Some(place.clone())).unwrap();
        let held = stuck.claim(80, &quiet).await.unwrap();
        let mut pieces = stuck.pieces(vec![0; 80], held);
        let piece = pieces.next_piece().unwrap();
        stuck.set_parked(false);
        let waiter = u.stream("c", None).unwrap();
        let claim = tokio::spawn({
            let waiter = waiter.clone();
            async move { waiter.claim(50, &quiet).await.map(|c| c.len) }
        });
        tokio::time::sleep(STALL / 2).await;
        assert!(!stuck.is_reset(), "its bytes have not been stuck for long");
        tokio::time::sleep(STALL).await;
        assert!(stuck.is_reset(), "stuck past STALL while another waits");
        let closed = place.closed();
        tokio::pin!(closed);
        assert!(futures::FutureExt::now_or_never(closed.as_mut()).is_some(), "hyper held its piece: connection closed");
        assert!(!claim.is_finished(), "its bytes are freed only when the transport lets go");
        drop((piece, pieces));
        assert_eq!(claim.await.unwrap(), Ok(50));
        assert_eq!(stuck.piece_written().await, Err(Reset { max: 100 }));
    }
}
