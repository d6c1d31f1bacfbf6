//! Waiting in tests (issue 34): one way to wait for something to become true, with a patience
//! that `$XDST_TEST_PATIENCE` stretches on slow machines, and an error that names what was
//! awaited and what was seen last.
//!
//! ```no_run
//! # async fn f(admin: std::net::SocketAddr) -> anyhow::Result<()> {
//! use std::time::Duration;
//! use xdst_tests::wait::{self, Seen};
//! let ok = wait::until("a good generation", Duration::from_secs(30), || async {
//!     let n = xdst_tests::admin::generations(admin, "generations_ok").await?;
//!     Ok(if n > 0 { Seen::Done(n) } else { Seen::Not(format!("generations_ok = {n}")) })
//! })
//! .await?;
//! # Ok(()) }
//! ```
//!
//! A check that nothing wrong happened waits for something right that was caused later (a
//! response to a later request on the same stream, a later change served, a counter that
//! moved): a fixed sleep proves nothing on a loaded machine. Sleeping here is only the
//! interval between two looks.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use anyhow::bail;
use tokio::time::Instant;

/// How often [`until`] looks again.
pub const POLL: Duration = Duration::from_millis(20);

/// What a look found: the awaited value, or what was seen instead (kept for the error).
#[derive(Debug)]
pub enum Seen<T> {
    Done(T),
    Not(String),
}

impl<T> Seen<T> {
    /// `Done(value)` when `cond` holds, else `Not(observed)`.
    pub fn when(cond: bool, value: T, observed: impl Display) -> Self {
        if cond { Seen::Done(value) } else { Seen::Not(observed.to_string()) }
    }
}

impl Seen<()> {
    /// `Done(())` when `cond` holds, else `Not(observed)`.
    pub fn holds(cond: bool, observed: impl Display) -> Self {
        Seen::when(cond, (), observed)
    }
}

/// `$XDST_TEST_PATIENCE` (default 1): every deadline of the tests is multiplied by it. Set it
/// to 3 on a machine three times slower than a 2-core developer machine.
pub fn factor() -> f64 {
    static FACTOR: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *FACTOR.get_or_init(|| match std::env::var("XDST_TEST_PATIENCE") {
        Err(_) => 1.0,
        Ok(v) if v.trim().is_empty() => 1.0,
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && f >= 1.0 => f,
            _ => panic!("XDST_TEST_PATIENCE={v:?}: expected a number of at least 1 (a multiplier of every deadline)"),
        },
    })
}

/// `d` stretched by [`factor`].
pub fn patience(d: Duration) -> Duration {
    d.mul_f64(factor())
}

/// Looks with `probe` every [`POLL`] until it finds `Seen::Done`, for up to `patience`
/// (stretched by [`factor`]); then an error naming `what` and the last observation. An error
/// from `probe` ends the wait at once.
pub async fn until<T>(
    what: impl Display,
    patience: Duration,
    mut probe: impl AsyncFnMut() -> anyhow::Result<Seen<T>>,
) -> anyhow::Result<T> {
    let limit = self::patience(patience);
    let deadline = Instant::now() + limit;
    loop {
        let last = match probe().await? {
            Seen::Done(v) => return Ok(v),
            Seen::Not(seen) => seen,
        };
        if Instant::now() >= deadline {
            bail!("timed out after {limit:?} waiting for {what}; last seen: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`until`] for a condition with nothing to report but itself.
pub async fn until_true(
    what: impl Display,
    patience: Duration,
    mut probe: impl AsyncFnMut() -> bool,
) -> anyhow::Result<()> {
    until(what, patience, async || Ok(Seen::holds(probe().await, "not yet"))).await
}

/// `fut`'s output, or an error naming `what` after `patience` (stretched by [`factor`]).
pub async fn within<T>(what: impl Display, patience: Duration, fut: impl Future<Output = T>) -> anyhow::Result<T> {
    let limit = self::patience(patience);
    match tokio::time::timeout(limit, fut).await {
        Ok(v) => Ok(v),
        Err(_) => bail!("timed out after {limit:?} waiting for {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34: a wait returns the value once the probe finds it.
    #[tokio::test]
    async fn until_returns_what_the_probe_found() {
        let mut n = 0;
        let v = until("n to reach 3", Duration::from_secs(5), || {
            n += 1;
            let seen = n;
            async move { Ok(Seen::when(seen >= 3, seen, format!("n = {seen}"))) }
        })
        .await
        .unwrap();
        assert_eq!(v, 3);
    }

    /// Issue 34: a wait that times out names what it waited for and what it saw last.
    #[tokio::test]
    async fn a_timeout_names_what_was_awaited_and_the_last_observation() {
        let err = until("the moon", Duration::from_millis(100), || async { Ok(Seen::<()>::Not("clouds".into())) })
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("waiting for the moon") && err.contains("last seen: clouds"), "{err}");
        let err = within("a reply", Duration::from_millis(10), std::future::pending::<()>()).await.unwrap_err();
        assert!(err.to_string().contains("waiting for a reply"), "{err}");
    }

    /// Issue 34: an error from the probe ends the wait at once.
    #[tokio::test]
    async fn a_probe_error_ends_the_wait() {
        let err = until("x", Duration::from_secs(60), || async { Err::<Seen<()>, _>(anyhow::anyhow!("refused")) })
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "refused");
    }
}
