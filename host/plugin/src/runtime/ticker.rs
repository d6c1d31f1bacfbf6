//! The engine's epoch, which plugin deadlines count (`epoch_interruption`): advanced every
//! [`TICK`] by a thread of its own while a plugin runs, and not at all while none does, so an
//! idle xdst wakes no thread for it (it was 200 wake-ups a second, about 4% of xdst's CPU
//! under EndpointSlice churn). Every place that runs wasm holds a [`Running`] for the time it
//! does: a plugin's fresh-store call (instantiation included) and a kept instance's call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use wasmtime::Engine;

/// How often the engine's epoch advances while a plugin runs; deadlines are rounded up to it.
pub const TICK: Duration = Duration::from_millis(5);

#[derive(Default)]
struct Shared {
    /// (calls running now, stopped).
    state: Mutex<(usize, bool)>,
    changed: Condvar,
    /// How often the epoch advanced.
    ticks: AtomicU64,
}

/// The ticking thread's owner: dropped (with the runtime and every plugin it loaded), it stops
/// the thread.
pub struct Ticker(Arc<Shared>);

/// A plugin running: the epoch advances while one is held.
pub struct Running(Arc<Shared>);

impl Ticker {
    /// Starts the thread that advances `engine`'s epoch.
    pub fn start(engine: Engine) -> std::io::Result<Ticker> {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        std::thread::Builder::new().name("xdst-plugin-epoch".into()).spawn(move || {
            loop {
                {
                    let mut state = theirs.state.lock().unwrap_or_else(PoisonError::into_inner);
                    while state.0 == 0 && !state.1 {
                        state = theirs.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
                    }
                    if state.1 {
                        return;
                    }
                }
                std::thread::sleep(TICK);
                engine.increment_epoch();
                theirs.ticks.fetch_add(1, Ordering::Relaxed);
            }
        })?;
        Ok(Ticker(shared))
    }

    /// How often the epoch advanced since the start.
    #[cfg(test)]
    pub fn ticks(&self) -> u64 {
        self.0.ticks.load(Ordering::Relaxed)
    }

    /// Marks a plugin running until the guard is dropped.
    pub fn running(&self) -> Running {
        let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 += 1;
        if state.0 == 1 {
            self.0.changed.notify_one();
        }
        Running(self.0.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner).0 -= 1;
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.0.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The epoch advances while a plugin runs (a loop is interrupted by its deadline) and stands
    /// still while none does.
    #[test]
    fn the_epoch_moves_only_while_a_plugin_runs() {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let ticker = Ticker::start(engine.clone()).unwrap();
        let module = wasmtime::Module::new(&engine, r#"(module (func (export "f") (loop (br 0))))"#).unwrap();
        let mut store = wasmtime::Store::new(&engine, ());
        store.set_epoch_deadline(2);
        store.epoch_deadline_trap();
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let f = instance.get_typed_func::<(), ()>(&mut store, "f").unwrap();
        {
            let _running = ticker.running();
            assert!(f.call(&mut store, ()).is_err(), "a loop was not interrupted while running");
        }
        std::thread::sleep(TICK * 2);
        let idle = ticker.ticks();
        std::thread::sleep(TICK * 10);
        assert_eq!(ticker.ticks(), idle, "the epoch moved with nothing running");
        let running = ticker.running();
        std::thread::sleep(TICK * 10);
        assert!(ticker.ticks() > idle, "the epoch stood still while running");
        drop(running);
    }
}
