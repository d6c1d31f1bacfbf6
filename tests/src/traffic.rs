//! Steady HTTP traffic through a proxy, counting every failure: the evidence that a config
//! change dropped no request (issue 4). Requests go out at a fixed rate whatever the answers
//! take (an open-loop generator), each on its own connection, so a listener or cluster that
//! disappears shows up as a connection error or a non-2xx status, never as a slower test.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::upstream::{KeepAlive, http_request};

/// What the traffic saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub sent: u64,
    pub ok: u64,
    /// Answers with a status outside 200-299.
    pub non_2xx: u64,
    /// Requests that got no answer (refused, reset, timed out).
    pub errors: u64,
    /// With [`Traffic::start_when_listening`]: requests refused before the proxy first
    /// answered (the listener did not exist yet); not failures.
    pub not_listening_yet: u64,
    /// 2xx answers by body (the upstreams answer with their names).
    pub by_body: BTreeMap<String, u64>,
    /// With [`Traffic::start_checked`]: answers (or refusals) the expectation did not allow
    /// at any moment the request was out, including 2xx answers from the wrong upstream.
    pub unexpected: u64,
    /// With [`KeepAliveTraffic`]: connections the server closed (each is then left closed).
    pub closed: u64,
    /// The first few failures, for the test's message.
    pub first_failures: Vec<String>,
}

impl Report {
    pub fn failed(&self) -> u64 {
        self.non_2xx + self.errors
    }
}

/// What the intent allows a request to see: answers from these upstreams (by body), and
/// whether a refused connection is fine (the listener is not there, or not yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed {
    pub bodies: std::collections::BTreeSet<String>,
    pub refused: bool,
}

impl Allowed {
    pub fn answers(bodies: &[&str]) -> Allowed {
        Allowed { bodies: bodies.iter().map(|b| b.to_string()).collect(), refused: false }
    }
    pub fn or_refused(self) -> Allowed {
        Allowed { refused: true, ..self }
    }
}

/// What is allowed over time, as the test changes the intent: a request is judged against
/// every expectation in force at some moment between its start and its answer.
#[derive(Debug)]
pub struct Expect {
    timeline: Mutex<Vec<(Instant, Allowed)>>,
}

impl Expect {
    pub fn new(first: Allowed) -> Arc<Expect> {
        Arc::new(Expect { timeline: Mutex::new(vec![(Instant::now(), first)]) })
    }

    /// From now on, `allowed`.
    pub fn set(&self, allowed: Allowed) {
        self.timeline.lock().unwrap().push((Instant::now(), allowed));
    }

    /// Whether `ok` (an answer's body) or a refusal (`None`) was allowed at some moment in
    /// `[start, end]`.
    fn allows(&self, start: Instant, end: Instant, body: Option<&str>) -> bool {
        let t = self.timeline.lock().unwrap();
        t.iter().enumerate().any(|(i, (from, allowed))| {
            let until = t.get(i + 1).map(|(next, _)| *next);
            let overlaps = *from <= end && until.is_none_or(|u| u >= start);
            overlaps
                && match body {
                    Some(b) => allowed.bodies.contains(b),
                    None => allowed.refused,
                }
        })
    }
}

#[derive(Default)]
struct Shared {
    sent: AtomicU64,
    ok: AtomicU64,
    non_2xx: AtomicU64,
    errors: AtomicU64,
    not_listening_yet: AtomicU64,
    unexpected: AtomicU64,
    closed: AtomicU64,
    expect: Option<Arc<Expect>>,
    /// Set when waiting for a listener: whether any request has been answered yet.
    answered: Option<std::sync::atomic::AtomicBool>,
    /// The Host header every request carries (none: the address).
    host: Option<String>,
    by_body: Mutex<BTreeMap<String, u64>>,
    failures: Mutex<Vec<String>>,
}

impl Shared {
    fn fail(&self, what: String) {
        let mut fs = self.failures.lock().unwrap();
        if fs.len() < 10 {
            fs.push(what);
        }
    }

    /// Counts one checked request's outcome.
    fn check(&self, expect: &Expect, start: Instant, result: &std::io::Result<crate::upstream::Response>) {
        let end = Instant::now();
        let at = |t: Instant| format!("{:.3}s", t.duration_since(*EPOCH).as_secs_f64());
        match result {
            Ok(r) if (200..300).contains(&r.status) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
                *self.by_body.lock().unwrap().entry(r.body.clone()).or_default() += 1;
                if !expect.allows(start, end, Some(&r.body)) {
                    self.unexpected.fetch_add(1, Ordering::Relaxed);
                    self.fail(format!("200 from {:?}, not allowed ({}-{})", r.body, at(start), at(end)));
                }
            }
            Ok(r) => {
                self.non_2xx.fetch_add(1, Ordering::Relaxed);
                self.fail(format!("{} {} ({}-{})", r.status, r.body.trim(), at(start), at(end)));
            }
            Err(e) if expect.allows(start, end, None) => {
                let _ = e;
                self.not_listening_yet.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                self.unexpected.fetch_add(1, Ordering::Relaxed);
                self.fail(format!("{e} ({}-{})", at(start), at(end)));
            }
        }
    }
}

/// When the test process first looked at the clock, for failure times in messages.
static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// Traffic running in the background until [`Traffic::stop`].
pub struct Traffic {
    shared: Arc<Shared>,
    stop: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Traffic {
    /// Sends `GET path` to `addr` `per_second` times a second.
    pub fn start(addr: SocketAddr, path: &str, per_second: u32) -> Traffic {
        Self::run(Shared::default(), addr, path, per_second)
    }

    /// Like [`start`](Self::start), for a listener about to be created: a request that fails
    /// to get an answer while nothing has answered yet (sent before the listener existed)
    /// is counted in `not_listening_yet`, not as a failure. From the first answer on, every
    /// failure counts, including a non-2xx first answer.
    pub fn start_when_listening(addr: SocketAddr, path: &str, per_second: u32) -> Traffic {
        Self::run(Shared { answered: Some(Default::default()), ..Default::default() }, addr, path, per_second)
    }

    /// Like [`start`](Self::start), every outcome checked against `expect`: a 2xx answer
    /// from an upstream it did not allow at any moment the request was out is `unexpected`
    /// (misrouted), and so is a refused connection it did not allow. Refusals it allowed are
    /// not failures; any non-2xx answer is.
    pub fn start_checked(addr: SocketAddr, path: &str, per_second: u32, expect: Arc<Expect>) -> Traffic {
        Self::run(Shared { expect: Some(expect), ..Default::default() }, addr, path, per_second)
    }

    /// [`start_checked`](Self::start_checked), every request for the Host `host`.
    pub fn start_checked_host(
        addr: SocketAddr,
        host: &str,
        path: &str,
        per_second: u32,
        expect: Arc<Expect>,
    ) -> Traffic {
        Self::run(
            Shared { expect: Some(expect), host: Some(host.to_owned()), ..Default::default() },
            addr,
            path,
            per_second,
        )
    }

    fn run(shared: Shared, addr: SocketAddr, path: &str, per_second: u32) -> Traffic {
        // The clock the failure messages count from starts no later than the traffic.
        std::sync::LazyLock::force(&EPOCH);
        let shared = Arc::new(shared);
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let path: Arc<str> = path.into();
        let s = shared.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut inflight = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                let (s, path) = (s.clone(), path.clone());
                s.sent.fetch_add(1, Ordering::Relaxed);
                inflight.spawn(async move {
                    let answered_before = s.answered.as_ref().map(|a| a.load(Ordering::SeqCst));
                    let start = Instant::now();
                    let host: Vec<(&str, &str)> = s.host.iter().map(|h| ("host", h.as_str())).collect();
                    let result = http_request(addr, &path, &host).await;
                    if let Some(expect) = &s.expect {
                        s.check(expect, start, &result);
                        return;
                    }
                    if let (Some(a), Ok(_)) = (&s.answered, &result) {
                        a.store(true, Ordering::SeqCst);
                    }
                    let failure = match result {
                        Err(_) if answered_before == Some(false) => {
                            s.not_listening_yet.fetch_add(1, Ordering::Relaxed);
                            None
                        }
                        Ok(r) if (200..300).contains(&r.status) => {
                            s.ok.fetch_add(1, Ordering::Relaxed);
                            *s.by_body.lock().unwrap().entry(r.body).or_default() += 1;
                            None
                        }
                        Ok(r) => {
                            s.non_2xx.fetch_add(1, Ordering::Relaxed);
                            Some(format!("{} {}", r.status, r.body.trim()))
                        }
                        Err(e) => {
                            s.errors.fetch_add(1, Ordering::Relaxed);
                            Some(e.to_string())
                        }
                    };
                    if let Some(f) = failure {
                        s.fail(f);
                    }
                });
                while inflight.try_join_next().is_some() {}
            }
            while inflight.join_next().await.is_some() {}
        });
        Traffic { shared, stop, task }
    }

    /// What was seen so far (requests still in flight are not counted yet).
    pub fn report(&self) -> Report {
        report_of(&self.shared)
    }

    /// Stops sending, waits for every request in flight, and reports.
    pub async fn stop(mut self) -> Report {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
        self.report()
    }
}

/// Requests on kept-alive connections, each connection sending one request after another
/// at its share of `per_second`, as a client with a connection pool does. A connection the
/// server closes is counted in `closed` and left closed: what matters is what is answered
/// on connections that stay open (a listener draining keeps serving them). Every non-2xx
/// answer is a failure.
pub struct KeepAliveTraffic {
    shared: Arc<Shared>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl KeepAliveTraffic {
    /// Opens `connections` connections to `addr` (failing if one cannot be opened) and
    /// starts sending.
    pub async fn start(addr: SocketAddr, path: &str, connections: u32, per_second: u32) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        let every = Duration::from_secs(1) * connections / per_second.max(1);
        for _ in 0..connections {
            let mut conn = KeepAlive::connect(addr).await?;
            let (s, path, mut stopped) = (shared.clone(), path.to_owned(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = stopped.changed() => break,
                    }
                    s.sent.fetch_add(1, Ordering::Relaxed);
                    match conn.get(&path).await {
                        Ok(Some(r)) if (200..300).contains(&r.status) => {
                            s.ok.fetch_add(1, Ordering::Relaxed);
                            *s.by_body.lock().unwrap().entry(r.body.clone()).or_default() += 1;
                            if r.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
                                s.closed.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                        }
                        Ok(Some(r)) => {
                            s.non_2xx.fetch_add(1, Ordering::Relaxed);
                            s.fail(format!("{} {}", r.status, r.body.trim()));
                        }
                        Ok(None) => {
                            s.closed.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Err(e) => {
                            s.errors.fetch_add(1, Ordering::Relaxed);
                            s.fail(e.to_string());
                            break;
                        }
                    }
                }
            }));
        }
        Ok(KeepAliveTraffic { shared, stop, tasks })
    }

    pub fn report(&self) -> Report {
        report_of(&self.shared)
    }

    pub async fn stop(self) -> Report {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        report_of(&self.shared)
    }
}

fn report_of(s: &Shared) -> Report {
    Report {
        sent: s.sent.load(Ordering::Relaxed),
        ok: s.ok.load(Ordering::Relaxed),
        non_2xx: s.non_2xx.load(Ordering::Relaxed),
        errors: s.errors.load(Ordering::Relaxed),
        not_listening_yet: s.not_listening_yet.load(Ordering::Relaxed),
        unexpected: s.unexpected.load(Ordering::Relaxed),
        closed: s.closed.load(Ordering::Relaxed),
        by_body: s.by_body.lock().unwrap().clone(),
        first_failures: s.failures.lock().unwrap().clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::Upstream;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_every_answer_and_every_failure() {
        let up = Upstream::start("a").await.unwrap();
        let t = Traffic::start(up.addr, "/", 200);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let r = t.stop().await;
        assert!(r.sent >= 150, "{r:?}");
        assert_eq!((r.ok, r.failed()), (r.sent, 0), "{r:?}");
        assert_eq!(r.by_body.get("a"), Some(&r.sent));

        // Every other /flaky answer is a 503: counted, with the first few kept.
        let t = Traffic::start(up.addr, "/flaky", 100);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let r = t.stop().await;
        assert!(r.non_2xx >= r.sent / 2 - 1 && r.non_2xx > 0, "{r:?}");
        assert!(r.first_failures[0].starts_with("503"), "{r:?}");

        // Checked: answers from an upstream the expectation does not allow are counted as
        // unexpected (misrouted), refusals only where it allows them.
        let expect = Expect::new(Allowed::answers(&["b"]));
        let t = Traffic::start_checked(up.addr, "/", 100, expect.clone());
        tokio::time::sleep(Duration::from_millis(300)).await;
        expect.set(Allowed::answers(&["a"]));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = t.stop().await;
        assert!(r.unexpected > 0 && r.unexpected < r.sent, "{r:?}");
        assert!(r.first_failures[0].contains("200 from \"a\", not allowed"), "{r:?}");
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let t = Traffic::start_checked(gone, "/", 100, Expect::new(Allowed::default().or_refused()));
        tokio::time::sleep(Duration::from_millis(200)).await;
        let r = t.stop().await;
        assert!(r.unexpected == 0 && r.not_listening_yet > 0, "refusals allowed: {r:?}");

        // Nothing listening: connection errors.
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let t = Traffic::start(gone, "/", 100);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = t.stop().await;
        assert!(r.errors > 0 && r.ok == 0, "{r:?}");
    }
}
