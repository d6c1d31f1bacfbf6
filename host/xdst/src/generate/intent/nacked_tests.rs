//! Holds for a group (design 016, part 3b): only its proxies, only together, at what they
//! accepted, per team, and for as long as the rejection stands.

use std::collections::BTreeMap;

use super::*;

fn set(docs: &[(&str, &str)]) -> IntentSet {
    let mut s = IntentSet::default();
    for (name, path) in docs {
        let (ns, name) = name.split_once('/').unwrap_or(("team-a", name));
        let text = format!(
            "apiVersion: example.org/v1\nkind: Route\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{path: {path}}}\n"
        );
        for d in xdst_core::intent::parse_file("routes.yaml", &text).unwrap() {
            s.add(d).unwrap();
        }
    }
    s
}

/// A node of `group` that holds back each of `held` at itself (rejected alone), having last
/// held target `synced`.
fn node(group: &str, id: &str, proxy: bool, synced: Option<&str>, held: &[&str]) -> NodeSync {
    NodeSync {
        group: group.into(),
        id: id.into(),
        client: 1,
        label: id.into(),
        synced: synced.map(Arc::from),
        held_back: Arc::new([]),
        held_at_node: held
            .iter()
            .map(|d| HeldStatus {
                document: d.to_string(),
                type_url: "rds".into(),
                message: "bad route".into(),
                seconds_ago: 0.0,
                retry_in_seconds: 30.0,
                probing: false,
                changed: false,
                resources: vec!["gw".into()],
                accepted_in: synced.map(Arc::from),
            })
            .collect(),
        proxy,
        canary: false,
        acknowledged: synced.is_some(),
        rejection: None,
        rejections: Vec::new(),
    }
}

fn path(s: &IntentSet, id: &str) -> Option<String> {
    s.by_id(id).map(|d| d.json["spec"]["path"].as_str().unwrap_or_default().to_owned())
}

const A: &str = "Route/team-a/a";

/// Generation 1 published a at /a1 for group `gw`, generation 2 a at /a2 and a new c.
fn two_generations(n: &mut Nacked) -> IntentSet {
    let groups = |v: &str| BTreeMap::from([("gw".to_owned(), Arc::from(v))]);
    n.history.record("d1".into(), groups("g1"), GroupHeld::new(), &set(&[("a", "/a1"), ("b", "/b1")]), Instant::now());
    let v2 = set(&[("a", "/a2"), ("b", "/b1"), ("c", "/c1")]);
    n.history.record("d2".into(), groups("g2"), GroupHeld::new(), &v2, Instant::now());
    v2
}

fn always(_: &str, _: &Voter) -> bool {
    true
}

/// The group's one proxy holding a back: the group translates a at what it accepted, every
/// other group as written; the hold names who caused it.
#[test]
fn a_groups_proxies_together_hold_a_document_for_that_group_only() {
    let mut n = Nacked::default();
    let v2 = two_generations(&mut n);
    assert_eq!(n.collect(&[node("gw", "envoy", true, Some("g1"), &[A])], &v2), 1);
    let (sets, held) = n.apply(&v2, "plugins", always);
    assert_eq!(sets.keys().collect::<Vec<_>>(), ["gw"], "only its own group translates it held");
    assert_eq!(path(&sets["gw"], A).as_deref(), Some("/a1"), "at what the proxy accepted");
    assert_eq!(path(&sets["gw"], "Route/team-a/c").as_deref(), Some("/c1"), "the rest as written");
    assert_eq!(held.len(), 1);
    assert!(held[0].error.contains("1 of the 1 proxies of node group \"gw\"") && held[0].error.contains("bad route"));
    assert_eq!((held[0].serving, held[0].caused_by.as_slice()), (ACCEPTED, &["envoy".to_owned()][..]));
    assert_eq!(held[0].group, "gw");
}

/// Issue 48, points 1, 2 and 4: a client that is not the group's proxy, or that never
/// acknowledged anything, holds nothing for anyone, whatever it rejects.
#[test]
fn a_client_that_is_not_a_proxy_or_never_acknowledged_holds_nothing_for_others() {
    let mut n = Nacked::default();
    let v2 = two_generations(&mut n);
    let stranger = node("gw", "evil", false, Some("g1"), &[A, "Route/team-a/b", "Route/team-a/c"]);
    let silent = node("gw", "new", true, None, &[A, "Route/team-a/c"]);
    assert_eq!(n.collect(&[stranger, silent], &v2), 0);
    let (sets, held) = n.apply(&v2, "plugins", always);
    assert!(sets.is_empty() && held.is_empty());
}

/// Issue 48, point 5: one proxy of two rejecting is its own business with `all`; a quorum of
/// one, or of half, holds it.
#[test]
fn one_node_of_two_vetoes_nothing_unless_the_quorum_says_so() {
    let nodes = [node("gw", "op-a", true, Some("g1"), &[]), node("gw", "op-b", true, Some("g1"), &[A])];
    for (quorum, holds) in [(Quorum::All, 0), (Quorum::Count(1), 1), (Quorum::Share(0.5), 1), (Quorum::Count(2), 0)] {
        let mut n = Nacked::new(quorum);
        let v2 = two_generations(&mut n);
        assert_eq!(n.collect(&nodes, &v2), holds, "{quorum}");
    }
}

/// A document new to the proxies is left out for the group only when every one of them
/// rejected it: a quorum of some is not enough.
#[test]
fn a_new_document_is_left_out_for_the_group_only_when_every_proxy_rejected_it() {
    const C: &str = "Route/team-a/c";
    let mut n = Nacked::new(Quorum::Count(1));
    let v2 = two_generations(&mut n);
    let some = [node("gw", "op-a", true, Some("g1"), &[]), node("gw", "op-b", true, Some("g1"), &[C])];
    assert_eq!(n.collect(&some, &v2), 0, "op-a could serve it");
    let all = [node("gw", "op-a", true, Some("g1"), &[C]), node("gw", "op-b", true, Some("g1"), &[C])];
    assert_eq!(n.collect(&all, &v2), 1);
    let (sets, held) = n.apply(&v2, "plugins", always);
    assert!(sets["gw"].by_id(C).is_none() && held[0].serving == "nothing" && held[0].error.contains("left out"));
}

/// Issue 48, point 4: the cap is per team. team-a filling its room leaves team-b's.
#[test]
fn the_cap_on_holds_is_per_namespace() {
    let mut n = Nacked::new(Quorum::Count(1));
    let names: Vec<String> = (0..MAX_HELD_PER_NAMESPACE + 2).map(|i| format!("team-a/r{i}")).collect();
    let v1: Vec<(&str, &str)> = names.iter().map(|a| (a.as_str(), "/1")).chain([("team-b/b", "/1")]).collect();
    let v2: Vec<(&str, &str)> = names.iter().map(|a| (a.as_str(), "/2")).chain([("team-b/b", "/2")]).collect();
    let groups = |v: &str| BTreeMap::from([("gw".to_owned(), Arc::from(v))]);
    n.history.record("d1".into(), groups("g1"), GroupHeld::new(), &set(&v1), Instant::now());
    let v2 = set(&v2);
    n.history.record("d2".into(), groups("g2"), GroupHeld::new(), &v2, Instant::now());
    let ids: Vec<String> = names.iter().map(|a| format!("Route/{a}")).collect();
    let team_a: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(n.collect(&[node("gw", "envoy", true, Some("g1"), &team_a)], &v2), MAX_HELD_PER_NAMESPACE);
    assert_eq!(n.collect(&[node("gw", "envoy", true, Some("g1"), &["Route/team-b/b"])], &v2), 1, "team-b's own room");
}

/// A hold ends when its document changes, when the plugins change, and when none of the
/// proxies that made it is connected.
#[test]
fn a_hold_ends_when_its_document_or_the_plugins_change_or_its_proxies_leave() {
    let mut n = Nacked::default();
    let v2 = two_generations(&mut n);
    let proxy = [node("gw", "envoy", true, Some("g1"), &[A])];
    n.collect(&proxy, &v2);
    assert_eq!(n.apply(&v2, "plugins", always).1.len(), 1);
    // The author changes a: the new version is tried.
    let v3 = set(&[("a", "/a3"), ("b", "/b1"), ("c", "/c1")]);
    assert!(n.apply(&v3, "plugins", always).0.is_empty());
    // Other plugins: every hold ends.
    n.collect(&proxy, &v2);
    assert_eq!(n.apply(&v2, "plugins", always).1.len(), 1);
    assert!(n.apply(&v2, "other plugins", always).1.is_empty());
    // Its proxy leaves: it ends.
    n.collect(&proxy, &v2);
    assert!(n.apply(&v2, "other plugins", |_, _| false).1.is_empty());
}

/// What a group's holds put in place is remembered with each generation: a node of the group
/// accepted that, not the document as written.
#[test]
fn what_a_node_accepted_is_what_its_group_was_translated_with() {
    let mut n = Nacked::default();
    let groups = |v: &str| BTreeMap::from([("gw".to_owned(), Arc::from(v))]);
    let v1 = set(&[("a", "/a1")]);
    n.history.record("d1".into(), groups("g1"), GroupHeld::new(), &v1, Instant::now());
    let v2 = set(&[("a", "/a2")]);
    let held_at_a1 = GroupHeld::from([("gw".to_owned(), vec![(Arc::from(A), v1.by_id(A).cloned())])]);
    n.history.record("d2".into(), groups("g2"), held_at_a1, &v2, Instant::now());
    let seq = n.history.generation("gw", "g2").unwrap();
    assert_eq!(n.history.document(A, seq, "gw").map(|d| d.text.contains("/a1")), Some(true));
    assert_eq!(n.history.document(A, seq, "other").map(|d| d.text.contains("/a2")), Some(true));
}

/// What remembering the documents costs a generation (docs/PERFORMANCE.md):
/// `cargo test --release -p xdst --lib nacked::tests::history_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run it by name"]
fn history_cost() {
    let n = 10_000;
    let names: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
    let mut intent = set(&names.iter().map(|a| (a.as_str(), "/x")).collect::<Vec<_>>());
    let mut h = History::default();
    h.record("g0".into(), BTreeMap::new(), GroupHeld::new(), &intent, Instant::now());
    let runs = 200;
    let started = Instant::now();
    for i in 0..runs {
        // One document changes a generation, as a team's edit does.
        let text = format!(
            "apiVersion: example.org/v1\nkind: Route\nmetadata: {{name: r{}, namespace: team-a}}\nspec: {{path: /v{i}}}\n",
            i % n
        );
        let doc = xdst_core::intent::parse_file("routes.yaml", &text).unwrap().remove(0);
        intent.replace(Arc::new(doc));
        h.record(format!("g{}", i + 1).into(), BTreeMap::new(), GroupHeld::new(), &intent, Instant::now());
    }
    let each = started.elapsed() / runs;
    eprintln!("History::record, {n} documents, one changed a generation: {each:?} a generation");
    assert!(h.generations.len() == KEPT);
}

/// A node whose target is older than the kept generations: what it accepted is unknown, so a
/// changed document is not held at a guess; history stays bounded.
#[test]
fn what_a_node_accepted_is_known_for_the_kept_generations() {
    let mut n = Nacked::new(Quorum::Count(1));
    let groups = |v: String| BTreeMap::from([("gw".to_owned(), Arc::from(v))]);
    for i in 0..KEPT + 2 {
        n.history.record(
            format!("d{i}").into(),
            groups(format!("g{i}")),
            GroupHeld::new(),
            &set(&[("a", &format!("/a{i}"))]),
            Instant::now(),
        );
    }
    let now = set(&[("a", &format!("/a{}", KEPT + 1))]);
    let two = [node("gw", "op-a", true, Some("g0"), &[A]), node("gw", "op-b", true, Some("g5"), &[])];
    assert_eq!(n.collect(&two, &now), 0, "unknown and not every proxy: not held");
    assert_eq!(
        n.history.document(A, n.history.generation("gw", "g5").unwrap(), "gw").map(|d| d.text.contains("/a5")),
        Some(true)
    );
    assert!(n.history.docs[A].len() <= 2 * KEPT + 1, "history is bounded");
}

/// `History::record` names exactly what was added, changed or taken out since the last
/// generation, wherever in the set's order it is (one walk over both lists, issue 50 item 4).
#[test]
fn a_generation_records_exactly_what_changed() {
    let mut h = History::default();
    let ids = |v: Vec<Arc<str>>| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let first = set(&[("b", "/b"), ("d", "/d"), ("f", "/f")]);
    assert_eq!(ids(h.record("g1".into(), BTreeMap::new(), GroupHeld::new(), &first, Instant::now())).len(), 3);
    // The same allocations: nothing changed.
    assert!(h.record("g2".into(), BTreeMap::new(), GroupHeld::new(), &first, Instant::now()).is_empty());
    // Parsed again with the same text: nothing changed either.
    let again = set(&[("b", "/b"), ("d", "/d"), ("f", "/f")]);
    assert!(h.record("g3".into(), BTreeMap::new(), GroupHeld::new(), &again, Instant::now()).is_empty());
    // Added before, between and after; one changed; one taken out.
    let next = set(&[("a", "/a"), ("b", "/b"), ("c", "/c"), ("d", "/d2"), ("g", "/g")]);
    let mut changed = ids(h.record("g4".into(), BTreeMap::new(), GroupHeld::new(), &next, Instant::now()));
    changed.sort();
    let want = ["Route/team-a/a", "Route/team-a/c", "Route/team-a/d", "Route/team-a/f", "Route/team-a/g"];
    assert_eq!(changed, want);
    // Everything taken out.
    let gone = ids(h.record("g5".into(), BTreeMap::new(), GroupHeld::new(), &IntentSet::default(), Instant::now()));
    assert_eq!(gone.len(), 5);
}

/// Under churn (a document changed in every generation, another left alone) the history keeps
/// a version per kept generation and no more, the older ones compact (their text), and a
/// version read back is the document as it was, parsed form and all; a document that went
/// is forgotten once no kept generation had it.
#[test]
fn churn_keeps_one_compact_version_per_kept_generation() {
    let mut h = History::default();
    let mut all = Vec::new();
    for i in 0..3 * KEPT {
        let intent =
            if i < KEPT { set(&[("a", &format!("/a{i}")), ("b", "/b")]) } else { set(&[("a", &format!("/a{i}"))]) };
        all.push(intent.by_id(A).unwrap().clone());
        h.record(format!("d{i}").into(), BTreeMap::new(), GroupHeld::new(), &intent, Instant::now());
        assert!(h.docs[A].len() <= KEPT + 1, "generation {i}: {} versions", h.docs[A].len());
    }
    let versions = &h.docs[A];
    assert!(matches!(versions.last(), Some((_, Some(Kept::Current(_))))));
    assert!(versions[..versions.len() - 1].iter().all(|(_, v)| matches!(v, Some(Kept::Before(_)))));
    // Generation seq i + 1 published version i.
    let oldest = h.generations.front().unwrap().seq;
    for seq in oldest..=h.seq {
        let doc = h.document(A, seq, "gw").expect("a kept version");
        assert_eq!(*doc, *all[seq as usize - 1], "generation {seq}");
        assert_eq!(doc.json["spec"]["path"], format!("/a{}", seq - 1));
    }
    assert!(!h.docs.contains_key("Route/team-a/b"), "b went before the oldest kept generation");
    assert!(h.superseded.len() <= KEPT + 1);
}
