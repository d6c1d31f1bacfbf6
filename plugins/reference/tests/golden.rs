//! Every golden case (`golden/<case>/intent.yaml`) translates, or for `error-*` cases fails
//! naming a document and field; successful output is self-consistent the way the host checks
//! it (listener -> route configuration -> cluster -> load assignment). The expected outputs
//! themselves are generated and blessed by the host's golden harness.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use xdst_guest::envoy::envoy::config::cluster::v3::Cluster;
use xdst_guest::envoy::envoy::config::endpoint::v3::ClusterLoadAssignment;
use xdst_guest::envoy::envoy::config::listener::v3::{Listener, filter::ConfigType};
use xdst_guest::envoy::envoy::config::route::v3::{RouteConfiguration, route::Action, route_action::ClusterSpecifier};
use xdst_guest::envoy::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use xdst_guest::envoy::google::protobuf::Any;
use xdst_guest::prost::Message;
use xdst_guest::{Body, IntentDocument, TranslateRequest, Translator, XdsResource};
use xdst_plugin_reference::Reference;

fn cases() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("intent.yaml").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "golden cases missing in {}", dir.display());
    cases
}

fn documents(case: &Path) -> Vec<IntentDocument> {
    let text = std::fs::read_to_string(case.join("intent.yaml")).unwrap();
    // Parsed as the host parses intent.
    let mut docs: Vec<IntentDocument> = xdst_core::intent::parse_file("intent.yaml", &text)
        .unwrap()
        .into_iter()
        .map(|d| IntentDocument { kind: d.kind, name: d.name, origin: d.origin, json: d.json.to_string() })
        .collect();
    // The host sends documents ordered by kind, then name.
    docs.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    docs
}

fn body<M: Message + Default>(r: &XdsResource) -> M {
    let Body::Proto(bytes) = &r.body else { panic!("{}: expected protobuf", r.name) };
    M::decode(bytes.as_slice()).unwrap()
}

fn hcm_rds(any: &Any) -> String {
    let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
    let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier else { panic!("HCM without RDS") };
    rds.route_config_name
}

#[test]
fn golden_cases_translate_or_fail_as_named() {
    for case in cases() {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let docs = documents(&case);
        let ids: BTreeSet<String> = docs.iter().map(IntentDocument::id).collect();
        let result = Reference::translate(TranslateRequest {
            changes: None,
            node_group: String::new(),
            documents: docs,
            resources: vec![],
            config: "null".into(),
        });
        if name.starts_with("error-") {
            let e = result.expect_err(&name);
            assert!(e.document.is_some() && e.field.is_some(), "{name}: {e:?}");
            eprintln!("{name}: {} field {}: {}", e.document.unwrap(), e.field.unwrap(), e.message);
            continue;
        }
        let out = result.unwrap_or_else(|e| panic!("{name}: {e:?}"));

        let (mut listener_routes, mut route_configs, mut route_clusters) = (vec![], BTreeSet::new(), vec![]);
        let (mut clusters, mut assignments) = (BTreeSet::new(), BTreeSet::new());
        for r in &out.resources {
            assert!(ids.contains(r.document.as_deref().unwrap()), "{name}: {r:?}");
            let kind = r.type_url.rsplit('.').next().unwrap();
            let own_name = match kind {
                "Listener" => {
                    let l: Listener = body(r);
                    let any = match (&l.api_listener, l.filter_chains.first()) {
                        (Some(api), _) => api.api_listener.clone().unwrap(),
                        (None, Some(chain)) => match &chain.filters[0].config_type {
                            Some(ConfigType::TypedConfig(any)) => any.clone(),
                            _ => panic!("{name}: filter without typed_config"),
                        },
                        _ => panic!("{name}: listener without HCM"),
                    };
                    listener_routes.push(hcm_rds(&any));
                    l.name
                }
                "RouteConfiguration" => {
                    let rc: RouteConfiguration = body(r);
                    for route in rc.virtual_hosts.iter().flat_map(|v| &v.routes) {
                        match &route.action {
                            Some(Action::Route(a)) => match &a.cluster_specifier {
                                Some(ClusterSpecifier::Cluster(c)) => route_clusters.push(c.clone()),
                                Some(ClusterSpecifier::WeightedClusters(w)) => {
                                    route_clusters.extend(w.clusters.iter().map(|c| c.name.clone()))
                                }
                                other => panic!("{name}: {other:?}"),
                            },
                            Some(Action::DirectResponse(_)) => {}
                            other => panic!("{name}: {other:?}"),
                        }
                    }
                    route_configs.insert(rc.name.clone());
                    rc.name
                }
                "Cluster" => {
                    let c: Cluster = body(r);
                    clusters.insert(c.name.clone());
                    c.name
                }
                "ClusterLoadAssignment" => {
                    let cla: ClusterLoadAssignment = body(r);
                    assignments.insert(cla.cluster_name.clone());
                    cla.cluster_name
                }
                other => panic!("{name}: unexpected {other}"),
            };
            assert_eq!(r.name, own_name, "{name}: resource name must equal the message's");
        }
        for rc in &listener_routes {
            assert!(route_configs.contains(rc), "{name}: listener names missing routes {rc}");
        }
        for c in &route_clusters {
            assert!(clusters.contains(c), "{name}: route names missing cluster {c}");
        }
        assert_eq!(clusters, assignments, "{name}: every EDS cluster has its endpoints");
    }
}
