//! The sandbox against core-module plugins (`proto/core-abi`), written in WAT: the same limits
//! and the same failures as for components (`sandbox.rs`), plus the ways a module can break
//! the ABI itself. The AssemblyScript port of the reference translator
//! (`plugins/reference-assemblyscript`, `tests/it/conformance.rs`) is the real-toolchain proof.

mod common;

use std::time::{Duration, Instant};

use common::runtime;

use xdst_plugin::wit::{IntentDocument, TranslateRequest};
use xdst_plugin::{Abi, Failure, Fault, Limits, Plugin};

const DESCRIBE: &str = r#"{"name": "core-adversary", "version": "0.1.0", "kinds": ["Adversary"], "phase": "translate", "granularity": "whole-set"}"#;
const OK: &str = r#"{"ok": {"resources": [{"typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c1", "document": "Adversary/one", "body": {"json": {"name": "c1", "connect_timeout": "1s"}}}], "diagnostics": [{"severity": "warning", "message": "careful", "document": "Adversary/one", "field": "spec"}]}}"#;

/// A core-ABI module whose `xdst_translate` body is `translate` (it may use `$out`, which
/// returns the bytes at 4096 of length `len`, written by a data segment holding `data`).
fn module(translate: &str, data: &str) -> Vec<u8> {
    module_with("", translate, data)
}

fn module_with(extra: &str, translate: &str, data: &str) -> Vec<u8> {
    common::core_plugin(DESCRIBE, extra, translate, data)
}

fn returning(json: &str) -> Vec<u8> {
    module(&format!("(call $out (i32.const {}))", json.len()), json)
}

fn load(bytes: &[u8], limits: Limits) -> Plugin {
    runtime().load_any("core.wasm", bytes, limits).unwrap()
}

fn request() -> TranslateRequest {
    TranslateRequest {
        node_group: String::new(),
        documents: vec![IntentDocument {
            kind: "Adversary".into(),
            name: "one".into(),
            origin: "intent.yaml#1".into(),
            json: r#"{"kind": "Adversary", "metadata": {"name": "one"}, "spec": {}}"#.into(),
        }],
        resources: vec![],
        config: "null".into(),
    }
}

#[test]
fn a_core_module_is_described_and_translates_like_a_component() {
    let p = load(&returning(OK), Limits::default());
    assert_eq!(p.abi(), Abi::CoreModule);
    assert_eq!(p.info().name, "core-adversary");
    assert_eq!(p.info().kinds, ["Adversary"]);
    assert!(p.imports().is_empty());
    let out = p.translate(&request()).unwrap();
    assert_eq!(out.resources.len(), 1);
    assert_eq!(out.resources[0].name, "c1");
    assert_eq!(out.resources[0].document.as_deref(), Some("Adversary/one"));
    assert!(matches!(&out.resources[0].body, xdst_plugin::wit::Body::Json(j) if j.contains("connect_timeout")));
    assert_eq!(out.diagnostics[0].field.as_deref(), Some("spec"));
}

#[test]
fn a_reported_error_names_document_and_field() {
    let e = load(&returning(r#"{"error": {"message": "spec.port must be a number", "document": "Adversary/one", "field": "spec.port"}}"#), Limits::default())
        .translate(&request())
        .unwrap_err();
    assert_eq!(
        e.failure,
        Failure::Reported {
            message: "spec.port must be a number".into(),
            document: Some("Adversary/one".into()),
            field: Some("spec.port".into())
        }
    );
    assert!(e.to_string().starts_with("plugin \"core-adversary\" (sha256:"), "{e}");
}

#[test]
fn an_infinite_loop_is_stopped_by_the_deadline() {
    let p = load(
        &module("(loop (br 0)) (unreachable)", ""),
        Limits { deadline: Duration::from_millis(100), ..Limits::default() },
    );
    let start = Instant::now();
    let e = p.translate(&request()).unwrap_err();
    assert_eq!(e.failure, Failure::Deadline { limit_ms: 100 });
    assert!(start.elapsed() < Duration::from_secs(2), "stopped in {:?}", start.elapsed());
    assert_eq!(e.fault(), Fault::Guest);
}

/// A module that never finishes instantiating (a start function that loops) is stopped by the
/// deadline when it is loaded: the epoch advances while any plugin code runs, instantiation
/// included, and stands still otherwise (`runtime/ticker.rs`).
#[test]
fn a_start_function_that_loops_is_stopped_at_load() {
    let bytes = module_with("(func $spin (loop (br 0))) (start $spin)", "(unreachable)", "");
    let start = Instant::now();
    let limits = Limits { deadline: Duration::from_millis(100), ..Limits::default() };
    let e = runtime().load_any("spin.wasm", &bytes, limits).unwrap_err();
    assert_eq!(e.failure, Failure::Deadline { limit_ms: 100 });
    assert!(start.elapsed() < Duration::from_secs(2), "stopped in {:?}", start.elapsed());
}

/// A plugin outliving the runtime that loaded it (as `xdst translate` and the plugin tool do)
/// still has its deadline enforced.
#[test]
fn the_deadline_holds_after_the_runtime_is_dropped() {
    let rt = xdst_plugin::Runtime::new(Default::default()).unwrap();
    let p = rt
        .load_any(
            "loop.wasm",
            &module("(loop (br 0)) (unreachable)", ""),
            Limits { deadline: Duration::from_millis(100), ..Limits::default() },
        )
        .unwrap();
    drop(rt);
    let start = Instant::now();
    assert_eq!(p.translate(&request()).unwrap_err().failure, Failure::Deadline { limit_ms: 100 });
    assert!(start.elapsed() < Duration::from_secs(2), "stopped in {:?}", start.elapsed());
}

#[test]
fn a_memory_bomb_is_stopped_at_the_cap() {
    // Grows until refused, then gives up (as a language runtime aborts when allocation fails).
    let bomb = "(loop (br_if 0 (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) (unreachable)";
    let p = load(&module(bomb, ""), Limits { memory_bytes: 32 << 20, ..Limits::default() });
    let e = p.translate(&request()).unwrap_err();
    assert_eq!(e.failure, Failure::Memory { limit_bytes: 32 << 20 }, "{e}");
    assert!(e.to_string().contains("memory cap of 32 MiB"), "{e}");
}

/// The memory cap holds for all of a plugin's memories together: with a 32 MiB cap, 24 MiB
/// in the first memory leaves no room for 16 MiB in a second one.
#[test]
fn the_memory_cap_holds_across_memories() {
    let grow = "(if (i32.eq (memory.grow 0 (i32.const 384)) (i32.const -1)) (then (unreachable)))
        (if (i32.eq (memory.grow $second (i32.const 256)) (i32.const -1)) (then (unreachable)))
        (call $out (i32.const LEN))"
        .replace("LEN", &OK.len().to_string());
    let bytes = common::core_plugin_with(DESCRIBE, "", "(memory $second 1)", &grow, OK);
    let p = load(&bytes, Limits { memory_bytes: 32 << 20, ..Limits::default() });
    let e = p.translate(&request()).unwrap_err();
    assert_eq!(e.failure, Failure::Memory { limit_bytes: 32 << 20 }, "{e}");
    // Each alone fits.
    let p = load(&bytes, Limits { memory_bytes: 41 << 20, ..Limits::default() });
    assert_eq!(p.translate(&request()).unwrap().resources.len(), 1);
}

#[test]
fn an_oversized_output_is_refused_before_it_is_read() {
    // Claims 5 MiB of response (memory grown to hold it).
    let big = "(drop (memory.grow (i32.const 80))) (call $out (i32.const 5242880))";
    let p = load(&module(big, ""), Limits { output_bytes: 1 << 20, ..Limits::default() });
    let e = p.translate(&request()).unwrap_err();
    assert_eq!(e.failure, Failure::OutputTooLarge { bytes: 5 << 20, limit_bytes: 1 << 20 }, "{e}");
}

#[test]
fn a_trap_names_the_plugin() {
    let e = load(&module("(unreachable)", ""), Limits::default()).translate(&request()).unwrap_err();
    assert!(matches!(e.failure, Failure::Trap(_)), "{e}");
    assert!(e.to_string().contains("plugin \"core-adversary\"") && e.to_string().contains("unreachable"), "{e}");
}

#[test]
fn responses_that_break_the_abi_are_refused_with_the_reason() {
    let cases = [
        (returning("not json"), "returned JSON the core-module ABI does not allow"),
        (
            returning(r#"{"ok": {"resources": [{"typeUrl": "t", "name": "n", "body": {"yaml": "x"}}]}}"#),
            "at ok.resources[0].body",
        ),
        (returning(r#"{"ok": {"resources": []}, "error": {"message": "m"}}"#), "both `ok` and `error`"),
        (returning(r#"{"result": 1}"#), "unknown field `result`"),
        (returning("{}"), "neither `ok` nor `error`"),
        (module("(i64.const 0x7fff000000000010)", ""), "outside memory"),
    ];
    for (bytes, want) in cases {
        let e = load(&bytes, Limits::default()).translate(&request()).unwrap_err();
        assert!(matches!(e.failure, Failure::Malformed(_)), "{e}");
        assert!(e.to_string().contains("broke the core-module ABI") && e.to_string().contains(want), "{e}");
    }
}

#[test]
fn proto_bodies_arrive_as_bytes() {
    // base64 of the Cluster {name: "c1"}: field 1, length 2, "c1".
    let p = load(
        &returning(
            r#"{"ok": {"resources": [{"typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c1", "body": {"proto": "CgJjMQ=="}}]}}"#,
        ),
        Limits::default(),
    );
    let out = p.translate(&request()).unwrap();
    assert!(matches!(&out.resources[0].body, xdst_plugin::wit::Body::Proto(b) if b == &[10, 2, b'c', b'1']));
}

#[test]
fn a_chatty_plugin_is_rate_limited_not_failed() {
    let chatty = r#"(local $i i32)
        (loop
            (call $log (i32.const 1) (i32.const 4096) (i32.const 5))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if 0 (i32.lt_u (local.get $i) (i32.const 1000))))
        (call $out (i32.const LEN))"#
        .replace("LEN", &OK.len().to_string());
    let bytes = module_with(r#"(import "xdst" "log" (func $log (param i32 i32 i32)))"#, &chatty, OK);
    let p = load(&bytes, Limits::default());
    assert_eq!(p.imports(), ["xdst.log"]);
    assert_eq!(p.translate(&request()).unwrap().resources.len(), 1);
}

#[test]
fn imports_other_than_xdst_log_and_wasi_preview1_are_refused_at_load() {
    let bytes = module_with(r#"(import "env" "abort" (func (param i32 i32 i32 i32)))"#, "(unreachable)", "");
    let e = runtime().load_any("abort.wasm", &bytes, Limits::default()).unwrap_err();
    assert!(matches!(e.failure, Failure::Incompatible(_)), "{e}");
    assert!(e.to_string().contains("imports env.abort, which is not granted"), "{e}");
    // A function WASI preview 1 does not have is refused by name too.
    let bytes = module_with(
        r#"(import "wasi_snapshot_preview1" "sock_listen" (func (param i32) (result i32)))"#,
        "(unreachable)",
        "",
    );
    let e = runtime().load_any("wasi.wasm", &bytes, Limits::default()).unwrap_err();
    assert!(e.to_string().contains("imports wasi_snapshot_preview1.sock_listen, which is not granted"), "{e}");
    // WASI preview 1's own functions link to the empty WASI (Go's wasip1 runtime needs them).
    let bytes = module_with(
        r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
           (import "wasi_snapshot_preview1" "clock_time_get" (func (param i32 i64 i32) (result i32)))"#,
        &format!("(call $out (i32.const {}))", OK.len()),
        OK,
    );
    let p = runtime().load_any("wasi.wasm", &bytes, Limits::default()).unwrap();
    assert_eq!(p.imports(), ["wasi_snapshot_preview1.fd_write", "wasi_snapshot_preview1.clock_time_get"]);
    assert_eq!(p.translate(&request()).unwrap().resources.len(), 1);
}

#[test]
fn another_abi_version_is_refused_naming_both() {
    let wat = r#"(module (memory (export "memory") 1) (func (export "xdst_plugin_abi_0_2_0")))"#;
    let e = runtime().load_any("future.wasm", &wat::parse_str(wat).unwrap(), Limits::default()).unwrap_err();
    assert!(matches!(e.failure, Failure::Incompatible(_)), "{e}");
    assert!(
        e.to_string().contains("speaks version 0.2.0 of the core-module ABI")
            && e.to_string().contains("this xdst speaks 0.1.0"),
        "{e}"
    );
}

#[test]
fn a_marker_without_the_functions_is_refused_naming_what_is_missing() {
    let wat = r#"(module (memory (export "memory") 1) (func (export "xdst_plugin_abi_0_1_0")))"#;
    let e = runtime().load_any("half.wasm", &wat::parse_str(wat).unwrap(), Limits::default()).unwrap_err();
    assert!(e.to_string().contains("not a function named xdst_alloc"), "{e}");
}

#[test]
fn a_bad_describe_is_refused_at_load() {
    let wat = r#"(module (memory (export "memory") 1)
        (data (i32.const 0) "{\"name\": \"x\"}")
        (func (export "xdst_plugin_abi_0_1_0"))
        (func (export "xdst_alloc") (param i32) (result i32) (i32.const 0))
        (func (export "xdst_describe") (result i64) (i64.const 13))
        (func (export "xdst_translate") (param i32 i32) (result i64) (i64.const 0)))"#;
    let e = runtime().load_any("nameonly.wasm", &wat::parse_str(wat).unwrap(), Limits::default()).unwrap_err();
    assert!(
        e.to_string().contains("xdst_describe returned JSON the core-module ABI does not allow")
            && e.to_string().contains("missing field `version`"),
        "{e}"
    );
}
