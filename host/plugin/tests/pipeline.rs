//! The translation pipeline with a real plugin built from source: resources are decoded,
//! canonicalised and attributed; every failure names the plugin, the document and the field.

mod common;

use std::sync::Arc;

use common::{adversary_component, runtime};
use xdst_core::intent::{IntentSet, parse_file};
use xdst_plugin::pipeline::{Configured, PipelineError, translate};
use xdst_plugin::{Failure, Limits};

fn adversary(mode: &str) -> Configured {
    let plugin = runtime()
        .load("adversary.wasm", adversary_component(), Limits::default())
        .unwrap();
    Configured {
        plugin: Arc::new(plugin),
        config: format!("{mode:?}"),
    }
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
    assert_eq!(
        (r.type_url().as_ref(), r.name().as_ref()),
        (xdst_core::types::CLUSTER, "c1")
    );
    assert_eq!(r.origin(), Some("plugin adversary from Adversary/one"));
    // Determinism: the same intent gives the same bytes and version.
    let again = translate(&[adversary("ok")], &intent(ONE), "").unwrap();
    let r2 = again.snapshot.resource(xdst_core::types::CLUSTER, "c1").unwrap();
    assert_eq!(r2.delta_bytes(), r.delta_bytes());
}

#[test]
fn a_wrongly_typed_field_is_refused_naming_plugin_document_and_field() {
    let e = translate(&[adversary("badjson")], &intent(ONE), "").unwrap_err();
    assert!(
        matches!(&e, PipelineError::InvalidResource { field: Some(f), .. } if f == "connect_timeout"),
        "{e}"
    );
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
    assert!(
        matches!(&e, PipelineError::Plugin { error: p, .. } if matches!(p.failure, Failure::Trap(_))),
        "{e}"
    );
}

#[test]
fn unclaimed_kinds_and_conflicts_are_refused() {
    let e = translate(
        &[adversary("ok")],
        &intent("kind: Gateway\nmetadata: {name: g}\n"),
        "",
    )
    .unwrap_err();
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
    assert_eq!(first.calls, vec![("adversary".to_owned(), 1)]);
    let again = p.run(&plugins, &intent(ONE)).unwrap();
    assert!(again.calls.is_empty(), "nothing changed, yet {:?} ran", again.calls);
    assert_eq!(again.snapshot.version(), first.snapshot.version());
    let two = format!("{ONE}---\nkind: Adversary\nmetadata: {{name: two}}\nspec: {{}}\n");
    let changed = p.run(&plugins, &intent(&two)).unwrap();
    assert_eq!(changed.calls, vec![("adversary".to_owned(), 2)], "a whole-set plugin gets every document");
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
