//! The one generation loop.
//!
//! Every trigger (a watched file, a plugin that finished compiling, a node group that
//! appeared, `POST /reload` or SIGHUP, an intent API write) is a request to one thread, and only
//! that thread translates and publishes. So two generations never run at once: an older
//! translation can never publish after a newer one, a burst of triggers becomes one
//! generation, and an API write gets the outcome of the generation that included it.
//!
//! A panic inside a generation is caught by the generation itself (`IntentSource::generate`), which reports it and
//! drops the incremental state the panic may have left half-updated; this loop also guards the
//! work it runs for the API, so the thread itself never dies.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use tokio::sync::watch;
use tracing::error;

enum Request {
    /// Something changed: run a generation (requests queued together are merged).
    Generate,
    /// Work that runs generations of its own (an API write), in arrival order.
    Run(Box<dyn FnOnce() + Send>),
}

/// The handle to the generation thread.
pub struct Generations {
    tx: mpsc::Sender<Request>,
}

impl Generations {
    /// Starts the thread, which ends after the server shuts down; `generate` runs one generation (and reports its own failures).
    pub fn start(
        shutdown: watch::Receiver<bool>,
        generate: impl Fn() + Send + 'static,
    ) -> std::io::Result<Generations> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new().name("xdst-generations".into()).spawn(move || serve(&shutdown, &generate, &rx))?;
        Ok(Generations { tx })
    }

    /// Asks for a generation and returns at once.
    pub fn request(&self) {
        let _ = self.tx.send(Request::Generate);
    }

    /// Runs `f` on the generation thread after what is already queued, and returns what it
    /// returned; `None` if it panicked (the panic is logged).
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.tx.send(Request::Run(job)).ok()?;
        rx.await.ok()
    }
}

fn serve(shutdown: &watch::Receiver<bool>, generate: &dyn Fn(), rx: &mpsc::Receiver<Request>) {
    loop {
        let first = match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) if !*shutdown.borrow() => continue,
            Err(_) => return,
        };
        let mut requested = false;
        for request in std::iter::once(first).chain(rx.try_iter()) {
            match request {
                Request::Generate => requested = true,
                Request::Run(job) => guarded(job),
            }
        }
        if requested {
            // Failures are reported by `generate` itself (log, status, metrics).
            generate();
        }
    }
}

fn guarded(job: Box<dyn FnOnce() + Send>) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
        error!(cause = %panic_message(payload.as_ref()), "a request on the generation thread panicked; nothing it did is kept");
    }
}

/// The text a panic was raised with.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "a panic with no message".to_owned(),
    }
}
