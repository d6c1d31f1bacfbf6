//! Every wait a plugin can start on the host ends by its call's deadline, and the WASI
//! functions xdst does not provide answer without writing to xdst's log.
//!
//! The deadline is epoch interruption, which only fires while wasm code runs. A plugin that
//! asks the host to wait (WASI preview 1 `poll_oneoff` with a clock subscription, which is
//! Go's `time.Sleep` on `wasip1`; a component's `wasi:io/poll` `poll` or `pollable.block` on a
//! `wasi:clocks` pollable) would otherwise sit in a host timer, up to for ever
//! (`u64::MAX` nanoseconds). So those functions are replaced here:
//!
//! - a component's `poll` and `[method]pollable.block` wait as wasmtime-wasi's do, but at
//!   most until the call's deadline;
//! - a core module's `poll_oneoff` is xdst's own: the empty WASI has no files or sockets, so a
//!   subscription on stdin, stdout or stderr is ready at once, any other descriptor is `EBADF`,
//!   and a clock subscription (read on the plugin's own clocks: stopped unless granted) is
//!   waited for on the host thread if it ends before the deadline.
//!
//! A wait that would outlast the deadline lasts until the deadline, and the call then fails as
//! [`Failure::Deadline`](crate::Failure::Deadline) (the trap is `Trap::Interrupt`, as if the
//! epoch had fired), logged with the plugin's name.
//!
//! WASI preview 1's socket functions (`sock_accept`, `sock_recv`, `sock_send`,
//! `sock_shutdown`) are not implemented by wasmtime-wasi, which logs a warning naming no
//! plugin on every call. They are replaced by functions that answer `ENOTSOCK` (`EBADF` for a
//! descriptor that is not open) and note the first call of each in the call's plugin log,
//! under the per-call log limits; later calls add to the dropped log lines.

use std::future::Future;
use std::time::{Duration, Instant};

use tracing::warn;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{Caller, Extern, StoreContextMut, Trap};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll::{Host as _, HostPollable as _};

use super::CallState;
use crate::core_abi::WASI_P1;

/// The `wasi:io/poll` interface as wasmtime-wasi's linker names it (components importing an
/// older 0.2 version are linked to it). A wasmtime upgrade that changes it fails
/// `a_component_blocked_on_a_clock_is_stopped_at_the_deadline`.
const POLL: &str = "wasi:io/poll@0.2.12";

/// The WASI preview 1 socket functions, which the empty WASI does not provide.
const SOCKETS: [&str; 4] = ["sock_accept", "sock_recv", "sock_send", "sock_shutdown"];

/// What one call's plugin did with the WASI functions xdst does not provide.
#[derive(Default)]
pub(crate) struct Unsupported {
    /// The functions of [`SOCKETS`] already noted in this call's log, by index.
    noted: [bool; SOCKETS.len()],
}

/// Replaces the component linker's `poll` and `pollable.block` with deadline-bound ones.
pub(crate) fn bound_component_waits(linker: &mut wasmtime::component::Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut poll = linker.instance(POLL)?;
    poll.func_wrap(
        "poll",
        |mut store: StoreContextMut<'_, CallState>, (pollables,): (Vec<Resource<DynPollable>>,)| {
            let (plugin, deadline, table) = waiting(store.data_mut());
            let ready = until_deadline(&plugin, deadline, "wasi:io/poll.poll", table.poll(pollables))?;
            Ok((ready,))
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |mut store: StoreContextMut<'_, CallState>, (pollable,): (Resource<DynPollable>,)| {
            let (plugin, deadline, table) = waiting(store.data_mut());
            until_deadline(&plugin, deadline, "wasi:io/poll.pollable.block", table.block(pollable))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The plugin's name, the call's deadline and the resource table of its WASI.
fn waiting(state: &mut CallState) -> (String, Instant, &mut ResourceTable) {
    let (plugin, deadline) = (state.plugin.clone(), state.deadline);
    (plugin, deadline, WasiView::ctx(state).table)
}

/// Runs `wait` (wasmtime-wasi's own) on its runtime, but no later than `deadline`.
fn until_deadline<T>(
    plugin: &str,
    deadline: Instant,
    what: &str,
    wait: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    let left = deadline.saturating_duration_since(Instant::now());
    // The timer is made inside the runtime `in_tokio` enters (it needs its clock).
    match wasmtime_wasi::runtime::in_tokio(async move { tokio::time::timeout(left, wait).await }) {
        Ok(done) => done,
        Err(_) => Err(stopped(plugin, what)),
    }
}

/// The call's deadline passed while the plugin waited in `what`.
fn stopped(plugin: &str, what: &str) -> wasmtime::Error {
    warn!(plugin, wait = what, "plugin was waiting on the host at its deadline; stopped");
    wasmtime::Error::new(Trap::Interrupt)
}

/// Replaces the core linker's `poll_oneoff` and socket functions (see the module's comment).
pub(crate) fn bound_core_waits(linker: &mut wasmtime::Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap(WASI_P1, "poll_oneoff", poll_oneoff)?;
    linker.func_wrap(WASI_P1, "sock_accept", |mut c: Caller<'_, CallState>, fd: i32, _flags: i32, _out: i32| {
        unsupported(&mut c, 0, fd)
    })?;
    linker.func_wrap(
        WASI_P1,
        "sock_recv",
        |mut c: Caller<'_, CallState>, fd: i32, _data: i32, _len: i32, _flags: i32, _out: i32, _oflags: i32| {
            unsupported(&mut c, 1, fd)
        },
    )?;
    linker.func_wrap(
        WASI_P1,
        "sock_send",
        |mut c: Caller<'_, CallState>, fd: i32, _data: i32, _len: i32, _flags: i32, _out: i32| {
            unsupported(&mut c, 2, fd)
        },
    )?;
    linker.func_wrap(WASI_P1, "sock_shutdown", |mut c: Caller<'_, CallState>, fd: i32, _how: i32| {
        unsupported(&mut c, 3, fd)
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

/// WASI preview 1 error numbers (`errno`).
mod errno {
    pub const SUCCESS: i32 = 0;
    pub const BADF: i32 = 8;
    pub const FAULT: i32 = 21;
    pub const INVAL: i32 = 28;
    pub const NOTSOCK: i32 = 57;
}

/// The descriptors of the empty WASI: stdin, stdout, stderr.
fn is_stdio(fd: i32) -> bool {
    (0..=2).contains(&fd)
}

/// A socket function of [`SOCKETS`] (by index) was called: noted once per call in the plugin's
/// log, then counted as a dropped log line.
fn unsupported(caller: &mut Caller<'_, CallState>, which: usize, fd: i32) -> i32 {
    let state = caller.data_mut();
    if std::mem::replace(&mut state.unsupported.noted[which], true) {
        super::DROPPED_LOG_LINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    } else {
        state.write_log(
            crate::wit::xdst::plugin::log::Level::Warn,
            format!(
                "called WASI {WASI_P1}.{}, which xdst does not provide: answered ENOTSOCK (further calls in this \
                 call are counted as dropped log lines)",
                SOCKETS[which]
            ),
        );
    }
    if is_stdio(fd) { errno::NOTSOCK } else { errno::BADF }
}

/// Bytes of a preview 1 `subscription` and of an `event`.
const SUBSCRIPTION: usize = 48;
const EVENT: usize = 32;

/// One subscription of a `poll_oneoff` call.
struct Subscription {
    userdata: u64,
    /// The event type: 0 clock, 1 fd_read, 2 fd_write.
    kind: u8,
    /// For a clock: how long until it fires, in nanoseconds.
    wait: Option<u64>,
}

/// `poll_oneoff(in, out, nsubscriptions, nevents) -> errno`, bounded by the call's deadline.
fn poll_oneoff(
    mut caller: Caller<'_, CallState>,
    subs: i32,
    events: i32,
    n: i32,
    nevents: i32,
) -> wasmtime::Result<i32> {
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        return Ok(errno::INVAL);
    };
    let n = n as u32 as usize;
    if n == 0 {
        return Ok(errno::INVAL);
    }
    let Some(bytes) = n
        .checked_mul(SUBSCRIPTION)
        .and_then(|len| memory.data(&caller).get(subs as u32 as usize..)?.get(..len))
        .map(<[u8]>::to_vec)
    else {
        return Ok(errno::FAULT);
    };
    let (wall, monotonic) = plugin_clocks(caller.data_mut())?;
    let mut parsed = Vec::with_capacity(n);
    for s in bytes.chunks_exact(SUBSCRIPTION) {
        let u64_at = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or_default());
        let u32_at = |at: usize| u32::from_le_bytes(s[at..at + 4].try_into().unwrap_or_default());
        let (kind, wait) = match s[8] {
            0 => {
                let (clock, timeout, absolute) = (u32_at(16), u64_at(24), s[40] & 1 != 0);
                let wait = match (clock, absolute) {
                    (0 | 1, false) => timeout,
                    (0, true) => timeout.saturating_sub(wall),
                    (1, true) => timeout.saturating_sub(monotonic),
                    _ => return Ok(errno::INVAL),
                };
                (0, Some(wait))
            }
            kind @ (1 | 2) => {
                let fd = u32_at(16);
                if (kind == 1 && fd != 0) || (kind == 2 && !(fd == 1 || fd == 2)) {
                    return Ok(errno::BADF);
                }
                (kind, None)
            }
            _ => return Ok(errno::INVAL),
        };
        parsed.push(Subscription { userdata: u64_at(0), kind, wait });
    }
    // A descriptor is always ready (stdin is empty, stdout and stderr never fill up); else the
    // earliest clock.
    let wait = if parsed.iter().any(|s| s.wait.is_none()) {
        0
    } else {
        parsed.iter().filter_map(|s| s.wait).min().unwrap_or(0)
    };
    if wait > 0 {
        let state = caller.data();
        let left = state.deadline.saturating_duration_since(Instant::now());
        let wait = Duration::from_nanos(wait);
        if wait >= left {
            std::thread::sleep(left);
            return Err(stopped(&state.plugin, "wasi_snapshot_preview1.poll_oneoff"));
        }
        std::thread::sleep(wait);
    }
    let mut out = Vec::with_capacity(n * EVENT);
    for s in parsed.iter().filter(|s| s.wait.is_none_or(|w| w <= wait)) {
        let mut event = [0u8; EVENT];
        event[..8].copy_from_slice(&s.userdata.to_le_bytes());
        event[10] = s.kind;
        if s.kind != 0 {
            event[16] = 1; // nbytes: one, as wasmtime-wasi answers for its pipes
        }
        out.extend_from_slice(&event);
    }
    let count = (out.len() / EVENT) as u32;
    if memory.write(&mut caller, events as u32 as usize, &out).is_err()
        || memory.write(&mut caller, nevents as u32 as usize, &count.to_le_bytes()).is_err()
    {
        return Ok(errno::FAULT);
    }
    Ok(errno::SUCCESS)
}

/// The plugin's wall clock and monotonic clock now, in nanoseconds: what it reads itself.
fn plugin_clocks(state: &mut CallState) -> wasmtime::Result<(u64, u64)> {
    use wasmtime_wasi::clocks::WasiClocksView;
    use wasmtime_wasi::p2::bindings::clocks::{monotonic_clock, wall_clock};
    let wasi = state.wasi_p1();
    let wall = wall_clock::Host::now(&mut wasi.clocks())?;
    let monotonic = monotonic_clock::Host::now(&mut wasi.clocks())?;
    Ok((wall.seconds.saturating_mul(1_000_000_000).saturating_add(u64::from(wall.nanoseconds)), monotonic))
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::wit::{IntentDocument, TranslateRequest};
    use crate::{Failure, Limits, Plugin, Runtime};

    const CORE: &str = include_str!("../../../../tests/plugins/wat/waiter-core.wat");
    const COMPONENT: &str = include_str!("../../../../tests/plugins/wat/waiter-component.wat");

    /// The core-module waiter (`tests/plugins/wat/waiter-core.wat`) running `wait`.
    fn core(wait: &str) -> Vec<u8> {
        let describe = r#"{"name": "waiter", "version": "0.1.0", "kinds": ["Waiter"], "phase": "translate", "granularity": "whole-set"}"#;
        let wat = CORE
            .replace("@DESCRIBE_LEN@", &describe.len().to_string())
            .replace("@DESCRIBE@", &describe.replace('"', "\\\""))
            .replace("@WAIT@", wait);
        wat::parse_str(wat).unwrap()
    }

    /// The component waiter (`tests/plugins/wat/waiter-component.wat`) running `wait`.
    fn component(wait: &str) -> Vec<u8> {
        let wat = COMPONENT
            .replace("@NAME_LEN@", "6")
            .replace("@NAME@", "waiter")
            .replace("@KIND_LEN@", "6")
            .replace("@KIND@", "Waiter")
            .replace("@WAIT@", wait);
        wat::parse_str(wat).unwrap()
    }

    fn load(bytes: &[u8], deadline_ms: u64) -> Plugin {
        static RT: OnceLock<Runtime> = OnceLock::new();
        let limits = Limits { deadline: Duration::from_millis(deadline_ms), ..Limits::default() };
        RT.get_or_init(|| Runtime::new(Default::default()).unwrap()).load_any("waiter.wasm", bytes, limits).unwrap()
    }

    fn request() -> TranslateRequest {
        TranslateRequest {
            node_group: String::new(),
            documents: vec![IntentDocument {
                kind: "Waiter".into(),
                name: "one".into(),
                origin: "intent.yaml#1".into(),
                json: r#"{"kind": "Waiter", "metadata": {"name": "one"}, "spec": {}}"#.into(),
            }],
            resources: vec![],
            config: "null".into(),
        }
    }

    /// The call fails as a deadline, at the deadline: neither before nor long after.
    fn stopped_at_the_deadline(bytes: &[u8], what: &str) {
        let p = load(bytes, 300);
        let start = Instant::now();
        let e = p.translate(&request()).unwrap_err();
        let took = start.elapsed();
        assert_eq!(e.failure, Failure::Deadline { limit_ms: 300 }, "{what}: {e}");
        assert_eq!(e.plugin, "waiter", "{what}");
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_millis(1500),
            "{what}: stopped in {took:?}"
        );
    }

    /// Issue 33, item 1: `poll_oneoff` on a clock, for ever, for 30 s, or until an instant that
    /// never comes, is stopped at the deadline.
    #[test]
    fn a_core_module_sleeping_in_poll_oneoff_is_stopped_at_the_deadline() {
        for wait in ["(call $sleep_forever)", "(call $sleep_30s)", "(call $sleep_until_the_end)"] {
            stopped_at_the_deadline(&core(wait), wait);
        }
    }

    /// Issue 33, item 1: a component waiting on a `wasi:clocks` pollable, through
    /// `pollable.block` and through `poll`, is stopped at the deadline.
    #[test]
    fn a_component_blocked_on_a_clock_is_stopped_at_the_deadline() {
        for wait in ["(call $block_forever)", "(call $poll_30s)"] {
            stopped_at_the_deadline(&component(wait), wait);
        }
    }

    /// Waits that end before the deadline still work: a short sleep returns its event, a
    /// subscription on stdout is ready at once even beside a clock of an hour.
    #[test]
    fn waits_within_the_deadline_return_their_events() {
        let short = "(if (call $sleep (i32.const 1) (i64.const 1000000) (i32.const 0)) (then unreachable))
            (if (i32.ne (i32.load (i32.const 1184)) (i32.const 1)) (then unreachable))
            (if (i64.ne (i64.load (i32.const 1152)) (i64.const 7)) (then unreachable))";
        load(&core(short), 2000).translate(&request()).unwrap();
        // Subscriptions at 1024 (an hour on the wall clock) and 1072 (stdout writable).
        let stdout = "(i64.store (i32.const 1024) (i64.const 7))
            (i64.store (i32.const 1048) (i64.const 3600000000000))
            (i64.store (i32.const 1072) (i64.const 8))
            (i32.store8 (i32.const 1080) (i32.const 2))
            (i32.store (i32.const 1088) (i32.const 1))
            (if (call $poll_oneoff (i32.const 1024) (i32.const 1152) (i32.const 2) (i32.const 1184)) (then unreachable))
            (if (i32.ne (i32.load (i32.const 1184)) (i32.const 1)) (then unreachable))
            (if (i64.ne (i64.load (i32.const 1152)) (i64.const 8)) (then unreachable))
            (if (i32.ne (i32.load8_u (i32.const 1162)) (i32.const 2)) (then unreachable))";
        let start = Instant::now();
        load(&core(stdout), 2000).translate(&request()).unwrap();
        assert!(start.elapsed() < Duration::from_secs(1), "waited {:?}", start.elapsed());
        load(&component("(call $poll_1ms)"), 2000).translate(&request()).unwrap();
    }

    /// Issue 33, item 2: a million `sock_accept` calls answer ENOTSOCK, write one line to the
    /// plugin's log and count the rest as dropped log lines.
    #[test]
    fn unimplemented_socket_calls_are_noted_once_and_counted() {
        let expect_notsock =
            "(if (i32.ne (call $sock_accept (i32.const 0) (i32.const 0) (i32.const 1200)) (i32.const 57))
                (then unreachable))
            (if (i32.ne (call $sock_accept (i32.const 9) (i32.const 0) (i32.const 1200)) (i32.const 8))
                (then unreachable))
            (call $sock_accept_loop)";
        let before = super::super::DROPPED_LOG_LINES.load(Ordering::Relaxed);
        let start = Instant::now();
        load(&core(expect_notsock), 10_000).translate(&request()).unwrap();
        let dropped = super::super::DROPPED_LOG_LINES.load(Ordering::Relaxed) - before;
        assert!(dropped >= 1_000_001, "{dropped} dropped");
        assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    }
}
