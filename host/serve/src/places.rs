//! What one client may hold open on a port: connections (`--max-connections-per-client`) and
//! xDS streams across them (`--max-streams-per-client`). A client is its certificate identity
//! with mTLS, else its IP address ([`client_key`]): proxies behind one NAT address share it.
//!
//! A place is held by work, not by being open (issue 49, item 8). A connection's [`Place`]
//! knows its requests in flight and which of them are xDS streams that have not sent a
//! complete first request yet ([`HalfOpen`]); a connection carrying nothing else holds no
//! place worth keeping, and when its client's connections are all taken, the oldest such
//! connection is closed to make way for the new one ([`Connections::open`]). So connections
//! whose streams never finish a request cannot keep the real client of their address out.
//! Streams count against their client once their first request is complete
//! ([`Streams::admit`]); until then they are half-open, closed if they send no complete request
//! within the first-request time, and at most as many half-open as admitted are kept per client
//! (the oldest is closed when one more opens).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::identity::PeerIdentity;

/// The key a client is counted under: `identity "..."` with a client certificate, else its
/// address.
pub fn client_key(identity: Option<&PeerIdentity>, peer: Option<std::net::SocketAddr>) -> String {
    match (identity, peer) {
        (Some(id), _) => format!("identity {:?}", id.to_string()),
        (None, Some(peer)) => peer.ip().to_string(),
        (None, None) => "an unknown client".to_owned(),
    }
}

/// One connection: its requests in flight (until their response bodies end), which of them
/// are half-open streams, when the last one ended, and the signal that closes it.
#[derive(Debug)]
pub struct Place {
    opened: Instant,
    state: Mutex<PlaceState>,
    closing: AtomicBool,
    close: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct PlaceState {
    in_flight: usize,
    half_open: usize,
    last_ended: Option<Instant>,
}

/// A handle on the connection a request came on, in the request's extensions.
#[derive(Debug, Clone)]
pub struct ConnectionPlace(pub Arc<Place>);

/// A request of a connection in flight; dropped with its response body.
#[derive(Debug)]
pub struct InFlight(Arc<Place>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.0.state.lock().unwrap();
        s.in_flight -= 1;
        s.last_ended = Some(Instant::now());
    }
}

/// An xDS stream of a connection that has not sent a complete first request; dropped when it
/// has (or when it ends).
#[derive(Debug)]
pub struct HalfOpen(Arc<Place>);

impl Drop for HalfOpen {
    fn drop(&mut self) {
        self.0.state.lock().unwrap().half_open -= 1;
    }
}

impl Place {
    pub fn new() -> Arc<Place> {
        Arc::new(Place {
            opened: Instant::now(),
            state: Mutex::default(),
            closing: AtomicBool::new(false),
            close: tokio::sync::Notify::new(),
        })
    }

    /// Counts a request in flight until the guard drops.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.state.lock().unwrap().in_flight += 1;
        InFlight(self.clone())
    }

    /// Marks one of its requests as a stream without a complete first request until the guard
    /// drops.
    pub fn half_open(self: &Arc<Self>) -> HalfOpen {
        self.state.lock().unwrap().half_open += 1;
        HalfOpen(self.clone())
    }

    /// Whether it carries work worth its place: a request in flight that is not a half-open
    /// stream.
    pub fn holds(&self) -> bool {
        let s = self.state.lock().unwrap();
        s.in_flight > s.half_open
    }

    /// Asks the connection's task to close it ([`Place::closed`]).
    pub fn close(&self) {
        if !self.closing.swap(true, Ordering::Relaxed) {
            self.close.notify_one();
        }
    }

    /// Resolves once [`Place::close`] was called.
    pub async fn closed(&self) {
        self.close.notified().await;
    }

    /// Resolves once the connection has had no request in flight for `idle` (for one that
    /// has not made one yet, `first`), with what it was.
    pub async fn idle(&self, idle: Duration, first: Duration) -> &'static str {
        loop {
            let (in_flight, last) = {
                let s = self.state.lock().unwrap();
                (s.in_flight, s.last_ended)
            };
            let deadline = match (in_flight, last) {
                (0, None) => self.opened + first.min(idle),
                (0, Some(t)) => t + idle,
                _ => Instant::now() + idle,
            };
            if Instant::now() >= deadline {
                return if last.is_none() { "no request" } else { "no request in flight" };
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

/// Open connections per client, each with its [`Place`].
#[derive(Debug)]
pub struct Connections {
    max: usize,
    open: Mutex<HashMap<Box<str>, Vec<Arc<Place>>>>,
}

/// One open connection; counted until dropped.
#[derive(Debug)]
pub struct Connection {
    of: Arc<Connections>,
    client: Box<str>,
    place: Arc<Place>,
}

/// What [`Connections::open`] made of a new connection.
#[derive(Debug)]
pub enum Opened {
    /// Counted; `evicted` tells whether another of its client's connections, carrying nothing
    /// but half-open streams or nothing at all, was closed to make way for it.
    Counted { connection: Connection, evicted: bool },
    /// Every place of the client is taken by a connection carrying work: closed at once.
    Refused,
}

impl Connections {
    pub fn new(max: usize) -> Connections {
        Connections { max, open: Mutex::default() }
    }

    /// Counts `place`, a new connection of `client`. At the client's limit, the oldest of its
    /// connections that holds no place worth keeping ([`Place::holds`]) is closed for it;
    /// when every one carries work, the new one is refused.
    pub fn open(self: &Arc<Self>, client: &str, place: &Arc<Place>) -> Opened {
        let mut open = self.open.lock().unwrap();
        let places = open.entry(client.into()).or_default();
        let live = places.iter().filter(|p| !p.closing.load(Ordering::Relaxed)).count();
        let mut evicted = false;
        if live >= self.max {
            let victim =
                places.iter().filter(|p| !p.closing.load(Ordering::Relaxed) && !p.holds()).min_by_key(|p| p.opened);
            match victim {
                Some(v) => {
                    v.close();
                    evicted = true;
                }
                None => {
                    if places.is_empty() {
                        open.remove(client);
                    }
                    return Opened::Refused;
                }
            }
        }
        places.push(place.clone());
        Opened::Counted {
            connection: Connection { of: self.clone(), client: client.into(), place: place.clone() },
            evicted,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut open = self.of.open.lock().unwrap();
        if let Some(places) = open.get_mut(&self.client) {
            places.retain(|p| !Arc::ptr_eq(p, &self.place));
            if places.is_empty() {
                open.remove(&self.client);
            }
        }
    }
}

/// xDS streams per client across its connections: at most `max` admitted (past their first
/// complete request) and `max` half-open.
#[derive(Debug)]
pub struct Streams {
    max: usize,
    /// How long a stream may take to send its first complete request.
    pub first_request: Duration,
    next: AtomicU64,
    clients: Mutex<HashMap<Box<str>, ClientStreams>>,
}

#[derive(Debug, Default)]
struct ClientStreams {
    admitted: usize,
    /// By age: the key is the order they opened in.
    half_open: BTreeMap<u64, Arc<tokio::sync::Notify>>,
}

impl ClientStreams {
    fn is_empty(&self) -> bool {
        self.admitted == 0 && self.half_open.is_empty()
    }
}

/// A stream counted as half-open until [`HalfOpenStream::admit`] or drop.
#[derive(Debug)]
pub struct HalfOpenStream {
    of: Arc<Streams>,
    client: Box<str>,
    id: u64,
    closed: Arc<tokio::sync::Notify>,
}

/// A stream counted against its client's `max` until dropped.
#[derive(Debug)]
pub struct AdmittedStream {
    of: Arc<Streams>,
    client: Box<str>,
}

/// A stream past its client's limit (`max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimit {
    pub max: usize,
}

impl Streams {
    /// The default `--max-streams-per-client`: four streams on each of the 1,024 connections a
    /// client may have (an Envoy with LDS, RDS, CDS and EDS streams of its own).
    pub const DEFAULT_MAX: usize = 4096;

    pub fn new(max: usize, first_request: Duration) -> Streams {
        Streams { max, first_request, next: AtomicU64::new(0), clients: Mutex::default() }
    }

    /// Counts a new stream of `client` as half-open; when the client then has more than `max`
    /// half-open, its oldest is told to close ([`HalfOpenStream::closed`]).
    pub fn open(self: &Arc<Self>, client: &str) -> HalfOpenStream {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let closed = Arc::new(tokio::sync::Notify::new());
        let mut clients = self.clients.lock().unwrap();
        let c = clients.entry(client.into()).or_default();
        c.half_open.insert(id, closed.clone());
        if c.half_open.len() > self.max.max(1)
            && let Some((_, oldest)) = c.half_open.pop_first()
        {
            oldest.notify_one();
        }
        HalfOpenStream { of: self.clone(), client: client.into(), id, closed }
    }

    #[cfg(test)]
    fn counts(&self, client: &str) -> (usize, usize) {
        self.clients.lock().unwrap().get(client).map_or((0, 0), |c| (c.admitted, c.half_open.len()))
    }
}

impl HalfOpenStream {
    /// The stream sent its first complete request: counted against its client's `max`, or
    /// refused when the client has that many.
    pub fn admit(self) -> Result<AdmittedStream, OverLimit> {
        let mut clients = self.of.clients.lock().unwrap();
        let c = clients.entry(self.client.clone()).or_default();
        if c.admitted >= self.of.max {
            return Err(OverLimit { max: self.of.max });
        }
        c.admitted += 1;
        Ok(AdmittedStream { of: self.of.clone(), client: self.client.clone() })
    }

    /// Resolves when the stream is closed to make way for a newer half-open one of its client.
    pub async fn closed(&self) {
        self.closed.notified().await;
    }
}

impl Drop for HalfOpenStream {
    fn drop(&mut self) {
        let mut clients = self.of.clients.lock().unwrap();
        if let Some(c) = clients.get_mut(&self.client) {
            c.half_open.remove(&self.id);
            if c.is_empty() {
                clients.remove(&self.client);
            }
        }
    }
}

impl Drop for AdmittedStream {
    fn drop(&mut self) {
        let mut clients = self.of.clients.lock().unwrap();
        if let Some(c) = clients.get_mut(&self.client) {
            c.admitted -= 1;
            if c.is_empty() {
                clients.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_counted_per_client_until_dropped() {
        let c = Arc::new(Connections::new(2));
        let busy = || {
            let p = Place::new();
            std::mem::forget(p.begin());
            p
        };
        let Opened::Counted { connection: a1, .. } = c.open("a", &busy()) else { panic!() };
        let _a2 = c.open("a", &busy());
        assert!(matches!(c.open("a", &busy()), Opened::Refused), "both carry work");
        assert!(matches!(c.open("b", &busy()), Opened::Counted { evicted: false, .. }));
        drop(a1);
        assert!(matches!(c.open("a", &busy()), Opened::Counted { evicted: false, .. }));
        assert!(c.open.lock().unwrap().get("b").is_none(), "a client with no connection is forgotten");
    }

    /// Issue 49, item 8: at its limit, a client's oldest connection that carries nothing but
    /// half-open streams makes way for a new one; one carrying an admitted stream never does.
    #[test]
    fn a_connection_holding_only_half_open_streams_makes_way() {
        let c = Arc::new(Connections::new(3));
        let working = Place::new();
        let _request = working.begin();
        let (old, young) = (Place::new(), Place::new());
        let (_r1, _h1) = (old.begin(), old.half_open());
        let (_r2, _h2) = (young.begin(), young.half_open());
        let _held: Vec<_> = [&working, &old, &young].map(|p| c.open("a", p)).into();
        let Opened::Counted { evicted: true, connection: _new } = c.open("a", &Place::new()) else { panic!() };
        assert!(old.closing.load(Ordering::Relaxed) && !young.closing.load(Ordering::Relaxed), "the oldest went");
        assert!(!working.closing.load(Ordering::Relaxed));
        // The evicted one is not chosen twice while it closes; then the new, idle one goes.
        assert!(matches!(c.open("a", &Place::new()), Opened::Counted { evicted: true, .. }));
        assert!(young.closing.load(Ordering::Relaxed));
        assert!(working.holds() && !young.holds());
    }

    #[test]
    fn streams_count_once_admitted_and_half_open_ones_are_bounded() {
        let s = Arc::new(Streams::new(2, Duration::from_secs(10)));
        let a = s.open("a").admit().unwrap();
        let _b = s.open("a").admit().unwrap();
        assert_eq!(s.open("a").admit().unwrap_err(), OverLimit { max: 2 });
        assert!(s.open("b").admit().is_ok(), "another client's streams are its own");
        drop(a);
        let _c = s.open("a").admit().unwrap();
        // Half-open: the third closes the first.
        let h1 = s.open("a");
        let _h2 = s.open("a");
        assert_eq!(s.counts("a"), (2, 2));
        let _h3 = s.open("a");
        assert!(h1.closed().now_or_never().is_some(), "the oldest half-open stream is closed");
        assert_eq!(s.counts("a"), (2, 2));
        drop(h1);
        assert_eq!(s.counts("a"), (2, 2), "dropping the closed one changes nothing more");
        assert_eq!(s.counts("b"), (0, 0), "a client with no stream is forgotten");
    }

    use futures::FutureExt as _;
}
