//! Does what the request's `config` says: `"ok"` returns one cluster, and the rest misbehave
//! the ways the sandbox must survive: `"loop"`, `"bomb"`, `"big"`, `"panic"`, `"error"`,
//! `"chatty"`, and `"badjson"` returns a resource with a wrongly typed field.

use xdst_guest::*;

struct Adversary;

impl Translator for Adversary {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "adversary".into(),
            version: "0.1.0".into(),
            kinds: vec!["Adversary".into()],
            phase: Phase::Translate,
            granularity: Granularity::WholeSet,
        }
    }

    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        let ok = |resources| Ok(TranslateResponse { resources, diagnostics: vec![] });
        match request.config.trim().trim_matches('"') {
            "ok" => ok(vec![XdsResource {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "c1".into(),
                body: Body::Json(r#"{"name": "c1", "connect_timeout": "1s"}"#.into()),
                document: request.documents.first().map(|d| format!("{}/{}", d.kind, d.name)),
            }]),
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "big" => ok(vec![XdsResource {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "big".into(),
                body: Body::Json("x".repeat(4 << 20)),
                document: None,
            }]),
            "badjson" => ok(vec![XdsResource {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "c1".into(),
                body: Body::Json(r#"{"name": "c1", "connect_timeout": 5}"#.into()),
                document: Some("Adversary/one".into()),
            }]),
            "panic" => panic!("the adversary panics"),
            "error" => Err(PluginError {
                message: "spec.port must be a number".into(),
                document: Some("Adversary/one".into()),
                field: Some("spec.port".into()),
            }),
            "chatty" => {
                for i in 0..1000 {
                    log(Level::Info, &format!("line {i}"));
                }
                ok(vec![])
            }
            other => Err(PluginError { message: format!("unknown mode {other:?}"), document: None, field: None }),
        }
    }
}

export_translator!(Adversary);
