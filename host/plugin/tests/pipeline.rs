//! The translation pipeline with a real plugin built from source: resources are decoded,
//! canonicalised and attributed; every failure names the plugin, the document and the field.

mod common;

use std::sync::Arc;

use common::{adversary_component, runtime};
use xdst_core::intent::{IntentSet, parse_file};
use xdst_plugin::pipeline::{Configured, PipelineError, translate};
use xdst_plugin::{Failure, Limits};

fn adversary(mode: &str) -> Configured {
    let plugin = runtime().load("adversary.wasm", adversary_component(), Limits::default()).unwrap();
    Configured::new(Arc::new(plugin), format!("{mode:?}"))
}

fn intent(text: &str) -> IntentSet {
    let mut set = IntentSet::default();
    for d in parse_file("intent.yaml", text).unwrap() {
        set.add(d).unwrap();
    }
    set
}

const ONE: &str = "kind: Adversary\nmetadata: {name: one}\nspec: {}\n";

#[test]
fn resources_are_decoded_canonicalised_and_attributed() {
    let out = translate(&[adversary("ok")], &intent(ONE), "").unwrap();
    assert_eq!(out.snapshot.len(), 1);
    let r = out.snapshot.resource(xdst_core::types::CLUSTER, "c1").unwrap();
    assert_eq!((r.type_url().as_ref(), r.name().as_ref()), (xdst_core::types::CLUSTER, "c1"));
    assert_eq!(r.origin(), Some("plugin adversary from Adversary/one"));
    // Determinism: the same intent gives the same bytes and version.
    let again = translate(&[adversary("ok")], &intent(ONE), "").unwrap();
    let r2 = again.snapshot.resource(xdst_core::types::CLUSTER, "c1").unwrap();
    assert_eq!(r2.delta_bytes(), r.delta_bytes());
}

#[test]
fn a_wrongly_typed_field_is_refused_naming_plugin_document_and_field() {
    let e = translate(&[adversary("badjson")], &intent(ONE), "").unwrap_err();
    assert!(matches!(&e, PipelineError::InvalidResource(r) if r.field.as_deref() == Some("connect_timeout")), "{e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with("plugin \"adversary\" (sha256:")
            && msg.contains("cds \"c1\" from Adversary/one field connect_timeout"),
        "{msg}"
    );
}

#[test]
fn plugin_errors_and_traps_pass_through_attributed() {
    let e = translate(&[adversary("error")], &intent(ONE), "").unwrap_err();
    assert!(
        matches!(&e, PipelineError::Plugin { error: p, .. } if matches!(p.failure, Failure::Reported { .. })),
        "{e}"
    );
    let e = translate(&[adversary("panic")], &intent(ONE), "").unwrap_err();
    assert!(matches!(&e, PipelineError::Plugin { error: p, .. } if matches!(p.failure, Failure::Trap(_))), "{e}");
}

#[test]
fn unclaimed_kinds_and_conflicts_are_refused() {
    let e = translate(&[adversary("ok")], &intent("kind: Gateway\nmetadata: {name: g}\n"), "").unwrap_err();
    assert_eq!(
        e.to_string(),
        "intent.yaml#1 field kind: no plugin translates kind \"Gateway\" (loaded plugins translate: Adversary)"
    );
    let e = translate(&[adversary("ok"), adversary("ok")], &intent(ONE), "").unwrap_err();
    assert!(matches!(e, PipelineError::KindClaimedTwice { .. }), "{e}");
}

/// Only what changed runs again: an unchanged generation calls no plugin; a whole-set plugin
/// whose documents changed gets all of them again; a removed document's resources go.
#[test]
fn a_pipeline_reruns_only_what_changed() {
    use xdst_plugin::pipeline::Pipeline;
    let plugins = [adversary("ok")];
    let mut p = Pipeline::new("");
    let first = p.run(&plugins, &intent(ONE)).unwrap();
    assert_eq!(counted(&first.calls), vec![("adversary".to_owned(), 1)]);
    let again = p.run(&plugins, &intent(ONE)).unwrap();
    assert!(again.calls.is_empty(), "nothing changed, yet {:?} ran", again.calls);
    assert_eq!(again.snapshot.version(), first.snapshot.version());
    let two = format!("{ONE}---\nkind: Adversary\nmetadata: {{name: two}}\nspec: {{}}\n");
    let changed = p.run(&plugins, &intent(&two)).unwrap();
    assert_eq!(counted(&changed.calls), vec![("adversary".to_owned(), 2)], "a whole-set plugin gets every document");
    // A different configuration is a change too.
    let spaced = Configured { config: " \"ok\"".into(), ..adversary("ok") };
    let changed = p.run(std::slice::from_ref(&spaced), &intent(&two)).unwrap();
    assert_eq!(changed.calls.len(), 1);
    // A failed generation leaves the remembered state alone.
    let failed = p.run(&[adversary("panic")], &intent(&two));
    assert!(failed.is_err());
    let after = p.run(&[spaced], &intent(&two)).unwrap();
    assert!(after.calls.is_empty(), "{:?}", after.calls);
}

/// Contract 0.3.0 and later (design 019): a translate plugin whose resources name their node groups is
/// called once for every group of a generation, with node group `""`; each group keeps what
/// names it or names none. The next generation, unchanged, calls nothing.
#[test]
fn a_plugin_naming_node_groups_is_called_once_for_every_group() {
    use xdst_plugin::pipeline::{CallMemo, Holding, Pipeline};
    let plugin = runtime().load("adversary.wasm", adversary_component(), Limits::default()).unwrap();
    assert_eq!(plugin.contract(), "0.4.0", "the Rust SDK speaks 0.4.0; node groups came with 0.3.0");
    let plugins = [Configured::new(Arc::new(plugin), "\"groups\"")];
    let set = intent(ONE);
    let mut pipelines: Vec<Pipeline> = ["", "blue", "green"].into_iter().map(Pipeline::new).collect();
    for round in 0..2 {
        let memo = CallMemo::default();
        let mut calls = Vec::new();
        let mut served = Vec::new();
        for p in &mut pipelines {
            let out = p.run_with(&plugins, &set, Holding::STRICT, &memo).unwrap();
            calls.extend(out.calls);
            let names: Vec<String> =
                out.snapshot.types().flat_map(|(_, s)| s.resources()).map(|r| r.name().to_string()).collect();
            served.push((p.node_group().to_owned(), names));
        }
        let expected = if round == 0 { 1 } else { 0 };
        assert_eq!(calls.len(), expected, "round {round}: {calls:?}");
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            served,
            [
                ("".to_owned(), names(&["asked-all", "c-all"])),
                ("blue".to_owned(), names(&["asked-all", "c-all", "c-blue"])),
                ("green".to_owned(), names(&["asked-all", "c-all"])),
            ]
        );
    }
    // What the host needs to serve a group nothing names the default group's set.
    assert!(xdst_plugin::pipeline::groups_differ_only_by_name(&plugins));
    assert!(pipelines[0].names_group("blue") && !pipelines[0].names_group("green"));
    // A plugin of an older contract is called per group: its output may differ by group.
    let describe =
        r#"{"name": "old", "version": "0.1.0", "kinds": ["Old"], "phase": "translate", "granularity": "whole-set"}"#;
    let old = runtime().load_any("old.wasm", &common::core_returning(describe, r#"{"ok": {}}"#), Limits::default());
    let old = Configured::new(Arc::new(old.unwrap()), "null");
    assert!(!xdst_plugin::pipeline::groups_differ_only_by_name(&[plugins[0].clone(), old]));
}

/// Issue 7, composition: `patch` plugins (here core-ABI modules in WAT) run after the translate
/// plugins, in priority then name order, over every translated resource; what they change is
/// attributed to both plugins; a failing one fails the generation (fail-closed) or is skipped
/// with a warning (fail-open).
mod composition {
    use super::*;
    use xdst_plugin::pipeline::FailurePolicy;

    fn patch(name: &str, priority: i32, failure: FailurePolicy, response: &str) -> Configured {
        let describe = format!(
            r#"{{"name": "{name}", "version": "0.1.0", "kinds": [], "phase": "patch", "granularity": "whole-set"}}"#
        );
        let bytes = common::core_returning(&describe, response);
        let plugin = runtime().load_any(&format!("{name}.wasm"), &bytes, Limits::default()).unwrap();
        Configured { priority, failure, ..Configured::new(Arc::new(plugin), "null") }
    }

    fn timeout_to(secs: u32) -> String {
        format!(
            r#"{{"ok": {{"resources": [{{"typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c1", "body": {{"json": {{"name": "c1", "connect_timeout": "{secs}s"}}}}}}]}}}}"#
        )
    }

    fn timeout_of(out: &xdst_plugin::pipeline::Translation) -> String {
        let r = out.snapshot.resource(xdst_core::types::CLUSTER, "c1").unwrap();
        // connect_timeout is field 4: a Duration whose seconds are field 1.
        let body = r.body().as_ref();
        let at = body.windows(2).position(|w| w == [0x22, 0x02]).expect("connect_timeout");
        format!("{}s", body[at + 3])
    }

    #[test]
    fn patches_change_translated_resources_in_priority_then_name_order() {
        let a = patch("patch-a", 0, FailurePolicy::FailClosed, &timeout_to(5));
        let b = patch("patch-b", 1, FailurePolicy::FailClosed, &timeout_to(7));
        let out = translate(&[adversary("ok"), a.clone(), b.clone()], &intent(ONE), "").unwrap();
        assert_eq!(timeout_of(&out), "7s", "patch-b (priority 1) runs last");
        let origin = out.snapshot.resource(xdst_core::types::CLUSTER, "c1").unwrap().origin().unwrap().to_owned();
        assert_eq!(origin, "plugin adversary from Adversary/one; changed by plugin patch-a; changed by plugin patch-b");
        // Swapping the priorities swaps the outcome, and only that.
        let a = Configured { priority: 2, ..a };
        let out = translate(&[adversary("ok"), a, b.clone()], &intent(ONE), "").unwrap();
        assert_eq!(timeout_of(&out), "5s");
        // Equal priorities: by name.
        let a = patch("patch-z", 1, FailurePolicy::FailClosed, &timeout_to(5));
        let out = translate(&[adversary("ok"), a, b], &intent(ONE), "").unwrap();
        assert_eq!(timeout_of(&out), "5s", "patch-z runs after patch-b");
        assert_eq!(
            out.calls.iter().map(|c| c.plugin.as_str()).collect::<Vec<_>>(),
            ["adversary", "patch-b", "patch-z"]
        );
    }

    #[test]
    fn a_patch_may_add_resources_which_it_then_owns() {
        let add = r#"{"ok": {"resources": [{"typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "extra", "body": {"json": {"name": "extra"}}}]}}"#;
        let out =
            translate(&[adversary("ok"), patch("adder", 0, FailurePolicy::FailClosed, add)], &intent(ONE), "").unwrap();
        assert_eq!(out.snapshot.len(), 2);
        assert_eq!(out.snapshot.resource(xdst_core::types::CLUSTER, "extra").unwrap().origin(), Some("plugin adder"));
    }

    #[test]
    fn a_failing_patch_fails_closed_or_is_skipped_open() {
        let broken = r#"{"ok": {"resources": [{"typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c1", "body": {"json": {"name": "c1", "connect_timeout": 5}}}]}}"#;
        let e = translate(&[adversary("ok"), patch("strict", 0, FailurePolicy::FailClosed, broken)], &intent(ONE), "")
            .unwrap_err();
        assert!(matches!(&e, PipelineError::InvalidResource(r) if r.plugin == "strict"), "{e}");
        assert!(e.to_string().contains("connect_timeout"), "{e}");

        let out = translate(&[adversary("ok"), patch("lenient", 0, FailurePolicy::FailOpen, broken)], &intent(ONE), "")
            .unwrap();
        assert_eq!(timeout_of(&out), "1s", "the skipped patch changed nothing");
        let (who, d) = &out.diagnostics[0];
        assert_eq!(who, "lenient");
        assert!(d.message.starts_with("skipped (failure policy fail-open)"), "{}", d.message);

        // A trap is a failure like any other.
        let describe =
            r#"{"name": "trapper", "version": "0.1.0", "kinds": [], "phase": "patch", "granularity": "whole-set"}"#;
        let plugin = runtime()
            .load_any("trapper.wasm", &common::core_plugin(describe, "", "(unreachable)", ""), Limits::default())
            .unwrap();
        let trapper = Configured::new(Arc::new(plugin), "null");
        let e = translate(&[adversary("ok"), trapper], &intent(ONE), "").unwrap_err();
        assert!(e.to_string().contains("plugin \"trapper\"") && e.to_string().contains("trapped"), "{e}");
    }
}

/// Issue 15, must-show 1: an `Any` holding an `Any` ... 3,000 and 100,000 deep, as protobuf
/// bytes and as JSON, is refused naming the plugin, the resource and the field; nothing
/// overflows the stack.
#[test]
fn a_status_must_be_one_json_object() {
    let out = translate(&[adversary("status-ok")], &intent(ONE), "").unwrap();
    assert_eq!(out.statuses.len(), 1, "{:?}", out.statuses);
    for mode in ["status-array", "status-trailing"] {
        match translate(&[adversary(mode)], &intent(ONE), "") {
            Err(PipelineError::InvalidStatus { plugin, document, message }) => {
                assert_eq!((plugin.as_str(), document.as_str()), ("adversary", "Adversary/one"));
                assert_eq!(message, "is not a JSON object");
            }
            other => panic!("{mode}: {:?}", other.map(|t| t.statuses)),
        }
    }
}

#[test]
fn deeply_nested_any_is_refused_with_its_field_path() {
    for levels in [3_000, 100_000] {
        let e = translate(&[adversary(&format!("deep-any-proto:{levels}"))], &intent(ONE), "").unwrap_err();
        let PipelineError::InvalidResource(r) = &e else { panic!("{levels}: {e}") };
        assert_eq!(r.field.as_deref(), Some("transport_socket.typed_config"), "{e}");
        assert_eq!(r.message, "messages nested more than 100 levels deep", "{e}");
        assert!(e.to_string().starts_with("plugin \"adversary\" (sha256:"), "{e}");

        let e = translate(&[adversary(&format!("deep-any-json:{levels}"))], &intent(ONE), "").unwrap_err();
        let PipelineError::InvalidResource(r) = &e else { panic!("{levels}: {e}") };
        let field = r.field.as_deref().unwrap_or_default();
        assert!(field.starts_with("transport_socket.typed_config.value.value"), "{e}");
        assert_eq!(r.message, "nested more than 100 levels deep", "{e}");
    }
    // Nesting Envoy's configuration really uses still works.
    assert!(translate(&[adversary("deep-any-proto:20")], &intent(ONE), "").is_ok());
    assert!(translate(&[adversary("deep-any-json:20")], &intent(ONE), "").is_ok());
}

/// Issue 15, must-show 2 (the plugin side): a 50 MB error message is cut to a few KiB noting its
/// length, and 20,000 diagnostics become 20 and one saying how many more there were.
#[test]
fn a_plugins_text_is_bounded_where_it_enters() {
    let e = translate(&[adversary("huge-error:50000000")], &intent(ONE), "").unwrap_err();
    let text = e.to_string();
    assert!(text.len() < 8 << 10, "{} bytes", text.len());
    assert!(text.contains("[cut: 50000000 bytes in all]"), "{}", &text[text.len() - 200..]);

    let out = translate(&[adversary("diagnostics:20000")], &intent(ONE), "").unwrap();
    assert_eq!(out.diagnostics.len(), xdst_plugin::TextLimits::default().diagnostics + 1);
    let last = &out.diagnostics.last().unwrap().1;
    assert!(last.message.starts_with("19980 more diagnostics not kept (20000 in all"), "{}", last.message);
    let bytes: usize = out.diagnostics.iter().map(|(_, d)| d.message.len()).sum();
    assert!(bytes < 32 << 10, "{bytes}");
}

/// (plugin, documents) of each call: what these tests assert (the time varies).
fn counted(calls: &[xdst_plugin::pipeline::PluginCall]) -> Vec<(String, usize)> {
    calls.iter().map(|c| (c.plugin.clone(), c.documents)).collect()
}
