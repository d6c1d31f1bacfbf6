//! Per-client limits: request rate per stream ([`Bucket`]), new streams a second
//! ([`StreamAdmission`]), node groups, rejections' analyses, and the log of refusals (what a
//! client may hold open is [`crate::places`]'s): a refusal or a limit hit is logged
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

    #[test]
    fn new_streams_take_turns_at_the_rate_after_a_burst() {
        let a = StreamAdmission::new(100); // 10 ms apart, 10 at once
        let t0 = Instant::now();
        let waits: Vec<Duration> = (0..15).map(|_| a.reserve(t0)).collect();
        assert!(waits[..10].iter().all(Duration::is_zero), "{waits:?}");
        assert_eq!(waits[10..], (1..=5).map(|k| Duration::from_millis(10 * k)).collect::<Vec<_>>()[..]);
        // Once the queue has drained, a stream goes straight through again.
        assert_eq!(a.reserve(t0 + Duration::from_secs(1)), Duration::ZERO);
        // Without a limit, nobody waits.
        let free = StreamAdmission::new(0);
        assert!((0..1000).all(|_| free.reserve(t0).is_zero()));
    }
}

/// Requests a stream may send: `rate` a second on average, `burst` at once (a token bucket).
#[derive(Debug, Clone, Copy)]
pub struct RequestRate {
    pub rate: u32,
    pub burst: u32,
}

impl RequestRate {
    /// The default: 100 a second, 1,000 at once. Envoy sends one request per response (an
    /// ACK or NACK) and one per subscription change, so a whole fleet's push is a handful per
    /// stream.
    pub const DEFAULT: RequestRate = RequestRate { rate: 100, burst: 1000 };
}

/// One stream's token bucket.
#[derive(Debug)]
pub struct Bucket {
    tokens: f32,
    at: std::time::Instant,
}

impl Bucket {
    pub fn full(limit: RequestRate) -> Bucket {
        Bucket { tokens: limit.burst as f32, at: std::time::Instant::now() }
    }

    /// Takes one request's token; false when the stream is over its rate.
    pub fn take(&mut self, limit: RequestRate, now: std::time::Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f32();
        self.at = now;
        self.tokens = (self.tokens + elapsed * limit.rate as f32).min(limit.burst as f32);
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// New streams the server admits a second (`--max-new-streams-per-second`): when a fleet
/// reconnects at once (xdst restarted, a network partition healed), serving every stream its
/// full configuration at once shares the cores among all of them, and each waits as long as
/// the last. Admitting them in arrival order at a bounded rate serves the first ones at once
/// and bounds what each later one waits. A stream over the rate waits for its turn; none is
/// refused. The first `burst` go through at once.
#[derive(Debug)]
pub struct StreamAdmission {
    /// Between two admissions at the rate (zero: no limit).
    interval: Duration,
    /// How far ahead of the rate the schedule may run: `burst - 1` intervals.
    tolerance: Duration,
    /// When the next stream is due at the rate (the theoretical arrival time of the generic
    /// cell rate algorithm); streams reserve their turn by moving it on.
    next: Mutex<Option<Instant>>,
}

impl StreamAdmission {
    /// The default rate: see docs/PERFORMANCE.md, "Reconnect storm", for the curve it was
    /// chosen from.
    pub const DEFAULT_RATE: u32 = 10_000;

    /// `rate` streams a second (0: no limit), a tenth of a second's worth at once.
    pub fn new(rate: u32) -> StreamAdmission {
        if rate == 0 {
            return StreamAdmission { interval: Duration::ZERO, tolerance: Duration::ZERO, next: Mutex::new(None) };
        }
        let interval = Duration::from_secs(1) / rate;
        let burst = (rate / 10).max(1);
        StreamAdmission { interval, tolerance: interval * (burst - 1), next: Mutex::new(None) }
    }

    /// Reserves the next turn for a stream arriving `now`: how long it waits first (zero:
    /// admitted at once).
    pub fn reserve(&self, now: Instant) -> Duration {
        if self.interval.is_zero() {
            return Duration::ZERO;
        }
        let mut next = self.next.lock().unwrap();
        let due = next.map_or(now, |t| t.max(now));
        *next = Some(due + self.interval);
        (due.checked_sub(self.tolerance).unwrap_or(due)).saturating_duration_since(now)
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let limit = RequestRate { rate: 10, burst: 5 };
        let mut b = Bucket::full(limit);
        let t0 = b.at;
        assert_eq!((0..20).filter(|_| b.take(limit, t0)).count(), 5, "the burst");
        assert!(!b.take(limit, t0 + Duration::from_millis(50)), "half a token");
        assert!(b.take(limit, t0 + Duration::from_millis(100)), "one token a tenth of a second later");
        assert_eq!((0..20).filter(|_| b.take(limit, t0 + Duration::from_secs(60))).count(), 5, "capped at the burst");
    }
}

/// How long a node group nodes created by naming it counts against
/// `--max-unlisted-node-groups` after it was last admitted: a client cycling made-up groups
/// (open a stream, close it, name the next) gets no more translations than one holding them.
pub const UNLISTED_GROUP_WINDOW: Duration = Duration::from_secs(600);

/// Node groups admitted without being listed, and when each was last admitted.
#[derive(Debug, Default)]
pub struct UnlistedGroups {
    seen: Mutex<HashMap<Box<str>, Instant>>,
    /// The `namespace/name` (or `name`) of every intent document of the last generation: a
    /// group named after a document is one the intent defines (a `per-gateway` Gateway's
    /// group), always served as its own whatever made-up groups used up the quota.
    /// Each name with how many documents have it (kinds share names).
    named: std::sync::RwLock<HashMap<Box<str>, u32>>,
}

impl UnlistedGroups {
    /// The documents of the intent now, by qualified name (`namespace/name` or `name`), one
    /// name per document.
    pub fn set_named<'a>(&self, names: impl Iterator<Item = &'a str>) {
        let mut named: HashMap<Box<str>, u32> = HashMap::new();
        for n in names {
            *named.entry(n.into()).or_default() += 1;
        }
        *self.named.write().unwrap() = named;
    }

    /// The documents that came and went since the names were last set or changed, by
    /// qualified name (a generation tells what changed, not every name).
    pub fn change_named<'a>(&self, added: impl Iterator<Item = &'a str>, removed: impl Iterator<Item = &'a str>) {
        let mut named = self.named.write().unwrap();
        for n in added {
            *named.entry(n.into()).or_default() += 1;
        }
        for n in removed {
            if let Some(count) = named.get_mut(n) {
                *count -= 1;
                if *count == 0 {
                    named.remove(n);
                }
            }
        }
    }

    /// Whether an intent document is named `group` (see [`UnlistedGroups::set_named`]).
    pub fn is_named(&self, group: &str) -> bool {
        self.named.read().unwrap().contains_key(group)
    }

    /// Whether `group` may be served as its own: it was admitted within the window, or fewer
    /// than `max` groups were.
    pub fn admit(&self, group: &str, max: usize, now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap();
        if let Some(t) = seen.get_mut(group) {
            *t = now;
            return true;
        }
        if seen.len() >= max {
            seen.retain(|_, t| now.duration_since(*t) < UNLISTED_GROUP_WINDOW);
            if seen.len() >= max {
                return false;
            }
        }
        seen.insert(group.into(), now);
        true
    }
}

#[cfg(test)]
mod group_tests {
    use super::*;

    #[test]
    fn unlisted_groups_are_capped_within_the_window() {
        let g = UnlistedGroups::default();
        let t0 = Instant::now();
        assert!(g.admit("a", 2, t0) && g.admit("b", 2, t0));
        assert!(!g.admit("c", 2, t0), "a third group within the window");
        assert!(g.admit("a", 2, t0 + Duration::from_secs(1)), "one already admitted stays admitted");
        assert!(!g.admit("c", 2, t0 + UNLISTED_GROUP_WINDOW - Duration::from_secs(1)), "b is still within its window");
        assert!(g.admit("c", 2, t0 + UNLISTED_GROUP_WINDOW + Duration::from_secs(1)), "b's time is over");
        g.set_named(["infra/gw", "web"].into_iter());
        assert!(g.is_named("infra/gw") && g.is_named("web") && !g.is_named("gw") && !g.is_named("infra"));
        // Two documents of one name (a Service and an HTTPRoute `web`): named until both go.
        g.change_named(["web", "team/x"].into_iter(), std::iter::empty());
        g.change_named(std::iter::empty(), ["web", "infra/gw"].into_iter());
        assert!(g.is_named("web") && g.is_named("team/x") && !g.is_named("infra/gw"));
        g.change_named(std::iter::empty(), ["web", "nothing"].into_iter());
        assert!(!g.is_named("web"));
    }
}

/// Which node groups nodes may use as their own (see `--node-groups`).
#[derive(Debug, Default, Clone)]
pub struct NodeGroups {
    /// Listed groups; empty: any group a node names, up to `max_unlisted` at once.
    pub listed: Vec<crate::identity::Pattern>,
    pub max_unlisted: usize,
}

/// What a client's rejections (NACKs) may cost: each is split into the documents in play
/// (xdst_core::node_holds) at most `per_minute` times a minute per client (its identity, or
/// its address without mTLS); past that a rejection only stops the node's plan. The
/// rejections are logged at most once a minute per client, and always counted.
#[derive(Debug)]
pub struct Nacks {
    /// Analyses a client may have a minute (0: none at all).
    pub per_minute: u32,
    /// Without mTLS, whether every client counts as its group's proxy
    /// (`--nack-holds-without-mtls`).
    pub holds_without_mtls: bool,
    budgets: Mutex<HashMap<Box<str>, (f64, Instant)>>,
    /// Rejections logged at most once a minute per client.
    pub log: LogOncePerMinute,
}

impl Nacks {
    /// The default of `--max-nack-analyses-per-minute`.
    pub const DEFAULT_PER_MINUTE: u32 = 60;

    pub fn new(per_minute: u32, holds_without_mtls: bool) -> Nacks {
        Nacks { per_minute, holds_without_mtls, budgets: Mutex::default(), log: LogOncePerMinute::default() }
    }

    /// Whether `client` may have one more analysis now (taking it if so).
    pub fn analyse(&self, client: &str, now: Instant) -> bool {
        if self.per_minute == 0 {
            return false;
        }
        let full = f64::from(self.per_minute);
        let per_second = full / 60.0;
        let mut budgets = self.budgets.lock().unwrap();
        if !budgets.contains_key(client) && budgets.len() >= MAX_CLIENTS {
            // A client whose budget has refilled is as good as forgotten; else the oldest half.
            budgets.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * per_second < full);
            if budgets.len() >= MAX_CLIENTS {
                let mut times: Vec<Instant> = budgets.values().map(|(_, at)| *at).collect();
                let (_, median, _) = times.select_nth_unstable(MAX_CLIENTS / 2);
                let median = *median;
                budgets.retain(|_, (_, at)| *at > median);
            }
        }
        let (tokens, at) = budgets.entry(client.into()).or_insert((full, now));
        *tokens = (*tokens + now.saturating_duration_since(*at).as_secs_f64() * per_second).min(full);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Default for Nacks {
    fn default() -> Self {
        Nacks::new(Nacks::DEFAULT_PER_MINUTE, false)
    }
}

#[cfg(test)]
mod nack_tests {
    use super::*;

    /// A client NACKing as fast as it can gets its analyses a minute, then none until its
    /// budget refills; another client's budget is its own; the map is bounded.
    #[test]
    fn analyses_are_rationed_per_client_and_the_clients_remembered_are_bounded() {
        let n = Nacks::new(60, false);
        let t0 = Instant::now();
        let first: usize = (0..1000).filter(|_| n.analyse("hostile", t0)).count();
        assert_eq!(first, 60, "a minute's worth at once, then nothing");
        assert!(n.analyse("envoy", t0), "another client is not charged for it");
        assert!(!n.analyse("hostile", t0 + Duration::from_millis(500)));
        assert!(n.analyse("hostile", t0 + Duration::from_secs(1)), "one a second comes back");
        for i in 0..3 * MAX_CLIENTS {
            n.analyse(&format!("c{i}"), t0 + Duration::from_secs(2));
        }
        assert!(n.budgets.lock().unwrap().len() <= MAX_CLIENTS);
        assert!(!Nacks::new(0, false).analyse("a", t0), "0: never analysed");
    }
}
