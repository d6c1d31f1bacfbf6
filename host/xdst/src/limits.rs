//! What keeps one client from flooding the server's log: a refusal or a limit hit is logged
//! at most once a minute per client (its identity, or its address without mTLS), and always
//! counted in `xdst_refusals_total`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often one client's refusals are logged.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// The most clients remembered; past it, entries older than [`LOG_EVERY`] are dropped, and
/// if none are, the oldest half (a flood of distinct clients then logs more, never grows
/// memory).
const MAX_CLIENTS: usize = 10_000;

/// When each client was last logged.
#[derive(Debug, Default)]
pub struct LogOncePerMinute {
    last: Mutex<HashMap<Box<str>, Instant>>,
}

impl LogOncePerMinute {
    /// Whether to log for `client` now (and if so, the minute starts again).
    pub fn allow(&self, client: &str) -> bool {
        self.allow_at(client, Instant::now())
    }

    fn allow_at(&self, client: &str, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap();
        if let Some(t) = last.get_mut(client) {
            if now.duration_since(*t) < LOG_EVERY {
                return false;
            }
            *t = now;
            return true;
        }
        if last.len() >= MAX_CLIENTS {
            last.retain(|_, t| now.duration_since(*t) < LOG_EVERY);
            if last.len() >= MAX_CLIENTS {
                let mut times: Vec<Instant> = last.values().copied().collect();
                let (_, median, _) = times.select_nth_unstable(MAX_CLIENTS / 2);
                let median = *median;
                last.retain(|_, t| *t > median);
            }
        }
        last.insert(client.into(), now);
        true
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.last.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_a_minute_per_client_and_bounded() {
        let log = LogOncePerMinute::default();
        let t0 = Instant::now();
        assert!(log.allow_at("a", t0));
        assert!(!log.allow_at("a", t0 + Duration::from_secs(59)));
        assert!(log.allow_at("b", t0 + Duration::from_secs(1)));
        assert!(log.allow_at("a", t0 + Duration::from_secs(61)));
        for i in 0..3 * MAX_CLIENTS {
            log.allow_at(&format!("c{i}"), t0 + Duration::from_secs(62));
        }
        assert!(log.len() <= MAX_CLIENTS, "{}", log.len());
    }
}
