//! Steady HTTP traffic through a proxy, counting every failure: the evidence that a config
//! change dropped no request (issue 4). Requests go out at a fixed rate whatever the answers
//! take (an open-loop generator), each on its own connection, so a listener or cluster that
//! disappears shows up as a connection error or a non-2xx status, never as a slower test.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::upstream::http_request;

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
    /// The first few failures, for the test's message.
    pub first_failures: Vec<String>,
}

impl Report {
    pub fn failed(&self) -> u64 {
        self.non_2xx + self.errors
    }
}

#[derive(Default)]
struct Shared {
    sent: AtomicU64,
    ok: AtomicU64,
    non_2xx: AtomicU64,
    errors: AtomicU64,
    not_listening_yet: AtomicU64,
    /// Set when waiting for a listener: whether any request has been answered yet.
    answered: Option<std::sync::atomic::AtomicBool>,
    by_body: Mutex<BTreeMap<String, u64>>,
    failures: Mutex<Vec<String>>,
}

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

    fn run(shared: Shared, addr: SocketAddr, path: &str, per_second: u32) -> Traffic {
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
                    let result = http_request(addr, &path, &[]).await;
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
                        let mut fs = s.failures.lock().unwrap();
                        if fs.len() < 10 {
                            fs.push(f);
                        }
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
        let s = &self.shared;
        Report {
            sent: s.sent.load(Ordering::Relaxed),
            ok: s.ok.load(Ordering::Relaxed),
            non_2xx: s.non_2xx.load(Ordering::Relaxed),
            errors: s.errors.load(Ordering::Relaxed),
            not_listening_yet: s.not_listening_yet.load(Ordering::Relaxed),
            by_body: s.by_body.lock().unwrap().clone(),
            first_failures: s.failures.lock().unwrap().clone(),
        }
    }

    /// Stops sending, waits for every request in flight, and reports.
    pub async fn stop(mut self) -> Report {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
        self.report()
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

        // Nothing listening: connection errors.
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let t = Traffic::start(gone, "/", 100);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = t.stop().await;
        assert!(r.errors > 0 && r.ok == 0, "{r:?}");
    }
}
