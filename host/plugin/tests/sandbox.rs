//! The sandbox against a real plugin built from source (`tests/plugins/adversarial`, Rust,
//! compiled to wasm32 and made a component here) and hand-written WAT components: every
//! misbehaviour is stopped, reported with the plugin's name and digest, and attributed.

mod common;

use std::time::{Duration, Instant};

use common::{adversary_component, runtime};

use xdst_plugin::wit::{IntentDocument, TranslateRequest};
use xdst_plugin::{Failure, Fault, Limits, Plugin, Runtime, RuntimeConfig};

fn load(limits: Limits) -> Plugin {
    runtime().load("adversary.wasm", adversary_component(), limits).unwrap()
}

fn request(mode: &str) -> TranslateRequest {
    TranslateRequest {
        node_group: String::new(),
        documents: vec![IntentDocument {
            kind: "Adversary".into(),
            name: "one".into(),
            origin: "intent.yaml#1".into(),
            json: r#"{"kind": "Adversary", "metadata": {"name": "one"}, "spec": {}}"#.into(),
        }],
        resources: vec![],
        config: format!("{mode:?}"),
    }
}

#[test]
fn describe_and_translate() {
    let p = load(Limits::default());
    assert_eq!(p.info().name, "adversary");
    assert_eq!(p.info().kinds, ["Adversary"]);
    assert!(p.digest().starts_with("sha256:") && p.digest().len() == 71);
    let out = p.translate(&request("ok")).unwrap();
    assert_eq!(out.resources.len(), 1);
    assert_eq!(out.resources[0].name, "c1");
    assert_eq!(out.resources[0].document.as_deref(), Some("Adversary/one"));
}

#[test]
fn an_infinite_loop_is_stopped_by_the_deadline() {
    let p = load(Limits { deadline: Duration::from_millis(100), ..Limits::default() });
    let start = Instant::now();
    let e = p.translate(&request("loop")).unwrap_err();
    assert_eq!(e.failure, Failure::Deadline { limit_ms: 100 });
    assert!(start.elapsed() < Duration::from_secs(2), "stopped in {:?}", start.elapsed());
    assert_eq!(e.fault(), Fault::Guest);
    let msg = e.to_string();
    assert!(msg.starts_with("plugin \"adversary\" (sha256:") && msg.contains("100 ms deadline"), "{msg}");
    // The plugin is still usable: every call has a fresh store.
    assert!(p.translate(&request("ok")).is_ok());
}

#[test]
fn a_memory_bomb_is_stopped_at_the_cap() {
    let p = load(Limits { memory_bytes: 32 << 20, ..Limits::default() });
    let e = p.translate(&request("bomb")).unwrap_err();
    assert_eq!(e.failure, Failure::Memory { limit_bytes: 32 << 20 }, "{e}");
    assert!(e.to_string().contains("memory cap of 32 MiB"));
    assert!(p.translate(&request("ok")).is_ok());
}

#[test]
fn an_oversized_output_is_refused() {
    let p = load(Limits { output_bytes: 1 << 20, ..Limits::default() });
    let e = p.translate(&request("big")).unwrap_err();
    assert!(
        matches!(e.failure, Failure::OutputTooLarge { limit_bytes, bytes } if limit_bytes == 1 << 20 && bytes > 4 << 20),
        "{e}"
    );
}

/// Issue 15: a result's strings may alias (10,000 resources naming one 1 MiB string: 10 GB
/// if copied naively). The output cap is counted while the result is copied, before each
/// string, so the call stops just past the cap.
#[test]
fn aliased_output_is_counted_before_it_is_copied() {
    let p = load(Limits { output_bytes: 8 << 20, ..Limits::default() });
    let e = p.translate(&request("alias:10000")).unwrap_err();
    assert!(
        matches!(e.failure, Failure::OutputTooLarge { bytes, limit_bytes } if limit_bytes == 8 << 20 && bytes <= 10 << 20),
        "{e}"
    );
    // The plugin is still usable: every call has a fresh store.
    assert!(p.translate(&request("ok")).is_ok());
}

#[test]
fn a_panic_is_a_trap_naming_the_plugin() {
    let e = load(Limits::default()).translate(&request("panic")).unwrap_err();
    assert!(matches!(e.failure, Failure::Trap(_)), "{e}");
    assert!(e.to_string().contains("plugin \"adversary\""), "{e}");
}

#[test]
fn a_reported_error_is_kept_apart_from_traps_and_names_document_and_field() {
    let e = load(Limits::default()).translate(&request("error")).unwrap_err();
    assert_eq!(
        e.failure,
        Failure::Reported {
            message: "spec.port must be a number".into(),
            document: Some("Adversary/one".into()),
            field: Some("spec.port".into())
        }
    );
    assert!(e.to_string().ends_with("Adversary/one field spec.port: spec.port must be a number"), "{e}");
}

#[test]
fn a_chatty_plugin_is_rate_limited_not_failed() {
    assert!(load(Limits::default()).translate(&request("chatty")).is_ok());
}

#[test]
fn imports_outside_the_contract_and_the_empty_wasi_are_refused_at_load() {
    let wat = r#"(component
        (import "wasi:http/outgoing-handler@0.2.0" (instance
            (export "handle" (func (result u32)))))
    )"#;
    let bytes = wat::parse_str(wat).unwrap();
    let e = runtime().load("sneaky.wasm", &bytes, Limits::default()).unwrap_err();
    assert!(matches!(e.failure, Failure::Incompatible(_)), "{e}");
    assert!(e.to_string().contains("imports wasi:http/outgoing-handler@0.2.0, which is not granted"), "{e}");
}

/// Issue 6: interpreters and libc import WASI; they get an empty one instead of a refusal.
#[test]
fn wasi_imports_link_to_the_empty_wasi() {
    let wat = r#"(component
        (import "wasi:cli/environment@0.2.0" (instance
            (export "get-environment" (func (result (list (tuple string string)))))))
    )"#;
    let bytes = wat::parse_str(wat).unwrap();
    let e = runtime().load("interpreter.wasm", &bytes, Limits::default()).unwrap_err();
    // Linked: what is missing now is the plugin world itself, not a grant.
    assert!(
        e.to_string().contains("does not implement the xdst:plugin world (versions 0.1.0, 0.2.0, 0.3.0, 0.4.0)"),
        "{e}"
    );
}

/// Issue 5: a plugin built against another version of the contract is refused, saying which.
#[test]
fn another_contract_version_is_refused_naming_both_versions() {
    let wat = r#"(component
        (import "xdst:plugin/log@0.9.0" (instance
            (export "log" (func (param "message" string)))))
    )"#;
    let bytes = wat::parse_str(wat).unwrap();
    let e = runtime().load("future.wasm", &bytes, Limits::default()).unwrap_err();
    assert!(matches!(e.failure, Failure::Incompatible(_)), "{e}");
    assert!(
        e.to_string().contains(
            "speaks version 0.9.0 of the xdst:plugin contract (xdst:plugin/log@0.9.0); this xdst speaks 0.1.0, 0.2.0, 0.3.0 and 0.4.0"
        ),
        "{e}"
    );
}

#[test]
fn garbage_and_non_plugins_are_refused_with_the_file_name() {
    let e = runtime().load("garbage.wasm", b"not wasm at all", Limits::default()).unwrap_err();
    assert!(matches!(e.failure, Failure::Compile(_)));
    assert!(e.to_string().starts_with("plugin \"garbage.wasm\""), "{e}");
    let empty = wat::parse_str("(component)").unwrap();
    let e = runtime().load("empty.wasm", &empty, Limits::default()).unwrap_err();
    assert!(
        e.to_string().contains("does not implement the xdst:plugin world (versions 0.1.0, 0.2.0, 0.3.0, 0.4.0)"),
        "{e}"
    );
}

#[test]
fn compiled_components_are_cached_by_digest() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeConfig { cache_dir: Some(dir.path().to_owned()), fuel: false, ..Default::default() })
        .unwrap();
    let p = rt.load("adversary.wasm", adversary_component(), Limits::default()).unwrap();
    let hex = p.digest().trim_start_matches("sha256:").to_owned();
    let cached: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(cached.len(), 1);
    assert!(cached[0].starts_with(&hex) && cached[0].ends_with(".cwasm"), "{cached:?}");
    // A second runtime loads from the cache and behaves the same.
    let rt2 = Runtime::new(RuntimeConfig { cache_dir: Some(dir.path().to_owned()), fuel: false, ..Default::default() })
        .unwrap();
    let p2 = rt2.load("adversary.wasm", adversary_component(), Limits::default()).unwrap();
    assert_eq!(p2.digest(), p.digest());
    assert_eq!(p2.translate(&request("ok")).unwrap().resources[0].name, "c1");
}

#[test]
fn fuel_limits_the_work_of_a_call() {
    let rt = Runtime::new(RuntimeConfig { cache_dir: None, fuel: true, ..Default::default() }).unwrap();
    let p = rt
        .load("adversary.wasm", adversary_component(), Limits { fuel: Some(10_000_000), ..Limits::default() })
        .unwrap();
    let e = p.translate(&request("loop")).unwrap_err();
    assert_eq!(e.failure, Failure::Fuel { limit: 10_000_000 });
}

/// A component importing something not granted is refused before it is compiled: the check
/// reads the import section, so a refused interpreter component costs no minute of Cranelift.
#[test]
fn ungranted_imports_are_refused_before_compiling() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeConfig { cache_dir: Some(dir.path().to_owned()), fuel: false, ..Default::default() })
        .unwrap();
    let wat = r#"(component
        (import "wasi:http/outgoing-handler@0.2.0" (instance
            (export "handle" (func (result u32))))))"#;
    let e = rt.load("early.wasm", &wat::parse_str(wat).unwrap(), Limits::default()).unwrap_err();
    assert!(e.to_string().contains("imports wasi:http/outgoing-handler@0.2.0, which is not granted"), "{e}");
    // Nothing was compiled into the cache.
    assert_eq!(std::fs::read_dir(dir.path()).map(|d| d.count()).unwrap_or(0), 0);
}
