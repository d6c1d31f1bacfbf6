//! Registry and HTTPS pulls, off the generation thread.
//!
//! Resolving a remote plugin source (a tag to a digest, a URL to bytes) and fetching its
//! signature can take as long as the fetch timeout when a registry accepts connections and
//! never answers. Generations must not wait for that: a pull runs on a thread of its own, the
//! generation that asked for it goes on with the source's previous resolution, and the pull's
//! result is taken by the next generation, which the finished pull asks for. Only at start,
//! when nothing serves yet, does a generation wait for its pulls.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::generate::plugins::distribution::{FetchError, Fetcher, Resolved, SignatureError, Source, chain};

/// A plugin's detached signature as fetched (or why it could not be; shared, as the signature
/// is kept with the resolution it belongs to).
pub type Signature = Result<Vec<u8>, Arc<SignatureError>>;

/// Why a pull found nothing.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The fetch failed: its error and causes.
    #[error("{}", chain(.0))]
    Fetch(#[source] FetchError),
    /// No thread could be started to fetch `what`.
    #[error("cannot start a thread to fetch {what}: {cause}")]
    Thread {
        what: String,
        #[source]
        cause: std::io::Error,
    },
}

/// What a pull found.
pub struct Pulled {
    /// The resolution, or the error with what the source resolved to last (cached on disk).
    pub result: Result<Resolved, (PullError, Option<Resolved>)>,
    /// The signature for the resolved digest, when one was asked for and the pull succeeded.
    pub signature: Option<Signature>,
}

/// Pulls in flight and finished ones not yet taken, by key (a plugin's name and source).
#[derive(Clone)]
pub struct Pulls {
    fetcher: Fetcher,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    running: BTreeMap<String, Instant>,
    done: BTreeMap<String, Pulled>,
}

impl Pulls {
    pub fn new(fetcher: Fetcher) -> Pulls {
        Pulls { fetcher, state: Arc::default() }
    }

    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts pulling `source` under `key` unless a pull for `key` is already running or
    /// finished and not taken; `wake` is called once it finishes.
    pub fn start(&self, key: &str, source: &Source, with_signature: bool, wake: impl Fn() + Send + 'static) {
        {
            let mut st = self.state();
            if st.running.contains_key(key) || st.done.contains_key(key) {
                return;
            }
            st.running.insert(key.to_owned(), Instant::now());
        }
        let (pulls, owned_key, owned_source) = (self.clone(), key.to_owned(), source.clone());
        let spawned = std::thread::Builder::new().name("xdst-pull".into()).spawn(move || {
            let pulled = pulls.pull_now(&owned_source, with_signature);
            let mut st = pulls.state();
            st.running.remove(&owned_key);
            st.done.insert(owned_key, pulled);
            drop(st);
            wake();
        });
        if let Err(e) = spawned {
            let mut st = self.state();
            st.running.remove(key);
            let error = PullError::Thread { what: source.to_string(), cause: e };
            st.done.insert(key.to_owned(), Pulled { result: Err((error, None)), signature: None });
        }
    }

    /// The finished pull for `key`, if there is one (it is then forgotten).
    pub fn take(&self, key: &str) -> Option<Pulled> {
        self.state().done.remove(key)
    }

    /// How long the pull for `key` has been running, if it is.
    pub fn running_for(&self, key: &str) -> Option<Duration> {
        self.state().running.get(key).map(Instant::elapsed)
    }

    /// Pulls `source` on this thread.
    pub fn pull_now(&self, source: &Source, with_signature: bool) -> Pulled {
        match self.fetcher.resolve(source) {
            Ok(r) => {
                let signature = with_signature.then(|| self.fetcher.signature(source, &r.digest).map_err(Arc::new));
                Pulled { result: Ok(r), signature }
            }
            Err((e, fallback)) => {
                Pulled { result: Err((PullError::Fetch(e), fallback.map(|f| f.resolved))), signature: None }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// A server that accepts connections and never answers: a pull from it runs until the
    /// fetch timeout, and `start` returns at once all the same.
    #[test]
    fn a_pull_from_a_registry_that_never_answers_does_not_block_the_caller() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for mut conn in listener.incoming().flatten() {
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf);
                held.push(conn);
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let pulls = Pulls::new(Fetcher::new(dir.path().to_owned(), vec![], None).unwrap());
        let source = Source::parse(&format!("oci://{addr}/plugins/stalled:v1"), dir.path()).unwrap();
        let (tx, rx) = mpsc::channel();
        let t = Instant::now();
        pulls.start("p\0src", &source, false, move || {
            let _ = tx.send(());
        });
        assert!(t.elapsed() < Duration::from_secs(1), "start waited for the pull: {:?}", t.elapsed());
        // Still running (the server holds the request), and asking again starts nothing new.
        std::thread::sleep(Duration::from_millis(300));
        assert!(pulls.running_for("p\0src").is_some());
        assert!(pulls.take("p\0src").is_none());
        pulls.start("p\0src", &source, false, || panic!("a second pull was started"));
        assert!(rx.try_recv().is_err());
    }
}
