//! `xdst wait --change ID`: waits until every connected node that should hold a change does,
//! by polling the admin port's `GET /changes/{id}` ([`xdst_core::changes`]).
//!
//! Exit codes: 0 live everywhere (or in `--group`); 1 not live when the time ran out (the
//! nodes still without it are named); 2 every node that lacks it rejected it (named, with the
//! resources, plugins and documents their rejection points at), so waiting longer would not
//! help; 3 the admin port could not be asked, or refused the question (a group no generation
//! translated for and no node of which is connected, an id below 1); 4 a document the change
//! wrote is held out somewhere once every node has answered: kept out at a node that rejected
//! it, held for a group by its proxies, failing to translate or pass the checks, or a plugin is
//! refused with no version of it serving (each named, with where and why; design 016).

use std::time::{Duration, Instant};

use serde_json::Value;

/// What `xdst wait` was asked.
pub struct WaitArgs {
    /// The admin port's base URL (`http://127.0.0.1:19000`).
    pub admin: String,
    pub change: i64,
    pub timeout: Duration,
    pub group: Option<String>,
    /// The admin read token, if reads need one.
    pub token: Option<String>,
}

/// How often the admin port is asked.
const POLL: Duration = Duration::from_millis(200);

/// Waits; prints what it found; returns the exit code.
pub fn run(args: &WaitArgs) -> i32 {
    let deadline = Instant::now() + args.timeout;
    let mut url = format!("{}/changes/{}", args.admin.trim_end_matches('/'), args.change);
    if let Some(g) = &args.group {
        url.push_str(&format!("?group={}", percent(g)));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .http_status_as_error(false)
        .build()
        .into();
    loop {
        let answer = ask(&agent, &url, args.token.as_deref());
        let expired = Instant::now() >= deadline;
        match answer {
            Ok(report) => {
                let (pending, rejected) = counts(&report);
                let held_out = report["held_out"].as_array().is_some_and(|h| !h.is_empty());
                if report["generation"].is_i64() && held_out && pending == 0 {
                    print!("{}", not_live(&report, "held out: not served as written everywhere"));
                    return 4;
                }
                if report["live"] == true {
                    println!("{}", live_line(&report));
                    return 0;
                }
                if report["generation"].is_i64() && pending == 0 && rejected > 0 {
                    print!("{}", not_live(&report, "rejected: every node without it rejected it"));
                    return 2;
                }
                if expired {
                    print!("{}", not_live(&report, &format!("not live after {:?}", args.timeout)));
                    return 1;
                }
            }
            // The admin port understood and refused the question (an unknown group, an id that
            // is no change): asking again cannot help.
            Err((e, refused)) if expired || refused => {
                eprintln!("xdst wait: {url}: {e}");
                return 3;
            }
            Err(_) => {}
        }
        std::thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())).max(Duration::from_millis(1)));
    }
}

/// The report, or why not and whether the admin port refused the question itself (a 400 or
/// 404: asking again cannot help).
fn ask(agent: &ureq::Agent, url: &str, token: Option<&str>) -> Result<Value, (String, bool)> {
    let mut req = agent.get(url);
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let mut resp = req.call().map_err(|e| (e.to_string(), false))?;
    let status = resp.status();
    let body = resp.body_mut().read_to_string().map_err(|e| (e.to_string(), false))?;
    if !status.is_success() {
        let refused = status == 400 || status == 404;
        return Err((format!("{status}: {}", body.trim()), refused));
    }
    serde_json::from_str(&body).map_err(|e| (format!("not a change report ({e}): {body}"), false))
}

fn counts(report: &Value) -> (u64, u64) {
    let groups = report["groups"].as_object().into_iter().flatten();
    groups.fold((0, 0), |(p, r), (_, g)| {
        (p + g["pending_count"].as_u64().unwrap_or(0), r + g["rejected_count"].as_u64().unwrap_or(0))
    })
}

fn live_line(report: &Value) -> String {
    let groups = report["groups"].as_object().map(|g| g.len()).unwrap_or(0);
    let nodes: u64 =
        report["groups"].as_object().into_iter().flatten().map(|(_, g)| g["nodes"].as_u64().unwrap_or(0)).sum();
    let mut line = if nodes == 0 {
        format!("change {} is published; no node is connected to hold it", report["change"])
    } else {
        format!("change {} is live: {nodes} nodes in {groups} groups hold it", report["change"])
    };
    let held: Vec<&str> = report["held"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if !held.is_empty() {
        line.push_str(&format!(
            "\n  held out, failing (not served as written; see the status page): {}",
            held.join(", ")
        ));
    }
    let problems: Vec<&str> = report["problems"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if !problems.is_empty() {
        line.push_str(&format!("\n  translated, but not as written (see each one's status): {}", problems.join(", ")));
    }
    line
}

/// The nodes without the change, by group: those waited for and those that rejected it.
fn not_live(report: &Value, headline: &str) -> String {
    let mut out = format!("change {}: {headline}\n", report["change"]);
    if !report["generation"].is_i64() {
        out.push_str("  no generation carries it yet (is the write's change id from this server or store?)\n");
    }
    for h in report["held_out"].as_array().into_iter().flatten() {
        let s = |k: &str| h[k].as_str().unwrap_or("").to_owned();
        let place = match s("scope").as_str() {
            "node" => format!("kept out at node {} (group {:?}), which rejected it", s("node"), s("group")),
            "group" => format!("held for node group {:?} by its proxies", s("group")),
            "plugin" => "its plugin is refused and no version of it serves".to_owned(),
            _ => "held out: it fails".to_owned(),
        };
        out.push_str(&format!("  {} {place}: {}\n", s("document"), s("why").trim()));
    }
    for (group, g) in report["groups"].as_object().into_iter().flatten() {
        let label = if group.is_empty() { "(default group)".to_owned() } else { format!("group {group}") };
        out.push_str(&format!(
            "  {label}: {} of {} nodes hold it\n",
            g["holding"].as_u64().unwrap_or(0),
            g["nodes"].as_u64().unwrap_or(0)
        ));
        for node in g["pending"].as_array().into_iter().flatten() {
            out.push_str(&format!("    waiting for {}\n", node.as_str().unwrap_or("?")));
        }
        more(&mut out, g, "pending");
        for r in g["rejected"].as_array().into_iter().flatten() {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_owned();
            let who = r["label"].as_str().map_or_else(|| s("node"), str::to_owned);
            out.push_str(&format!("    {who} rejected its {}: {}\n", s("type"), s("message").trim()));
            let resources = r["resources"].as_array().map_or(&[][..], Vec::as_slice);
            for res in resources {
                let name = res["name"].as_str().unwrap_or("?");
                let plugin = res["produced_by"].as_str().unwrap_or("(no plugin)");
                let document = res["document"].as_str().map(|d| format!(", document {d}")).unwrap_or_default();
                out.push_str(&format!("      {name}: plugin {plugin}{document}\n"));
            }
            let all = r["resources_count"].as_u64().unwrap_or(0);
            if all > resources.len() as u64 {
                out.push_str(&format!("      ... and {} more resources new to it\n", all - resources.len() as u64));
            }
        }
        more(&mut out, g, "rejected");
    }
    out
}

fn more(out: &mut String, g: &Value, what: &str) {
    let listed = g[what].as_array().map_or(0, Vec::len) as u64;
    let all = g[&format!("{what}_count")].as_u64().unwrap_or(0);
    if all > listed {
        out.push_str(&format!("    ... and {} more {what}\n", all - listed));
    }
}

/// A query value with the characters a URL needs escaped, escaped.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_laggards_rejecters_and_the_plugin() {
        let report = serde_json::json!({
            "change": 7, "generation": 7, "live": false,
            "groups": {"edge": {
                "nodes": 3, "holding": 1, "pending": ["b"], "pending_count": 1,
                "rejected": [{"node": "c", "type": "lds", "message": "bad port", "seconds_ago": 1.0,
                    "resources": [{"name": "web", "produced_by": "ports", "document": "Service/web", "named_in_error": true}]}],
                "rejected_count": 1,
            }},
        });
        let text = not_live(&report, "not live after 1s");
        for want in [
            "1 of 3 nodes hold it",
            "waiting for b",
            "c rejected its lds: bad port",
            "web: plugin ports, document Service/web",
        ] {
            assert!(text.contains(want), "{want:?} in {text}");
        }
        assert_eq!(counts(&report), (1, 1));
        assert_eq!(percent("a b/c"), "a%20b%2Fc");
    }

    /// Issue 48: where a document of the change is held out, and why, each named.
    #[test]
    fn what_is_held_out_is_named_with_where_and_why() {
        let report = serde_json::json!({
            "change": 3, "generation": 3, "live": false, "groups": {},
            "held_out": [
                {"document": "Gateway/infra/gw2", "scope": "node", "group": "ops", "node": "op-b", "why": "Address already in use"},
                {"document": "HTTPRoute/team-a/r", "scope": "group", "group": "gw", "why": "2 of the 2 proxies rejected it"},
                {"document": "HTTPRoute/team-a/x", "scope": "failing", "why": "invalid repetition size"},
            ],
        });
        let text = not_live(&report, "held out");
        for want in [
            "Gateway/infra/gw2 kept out at node op-b (group \"ops\"), which rejected it: Address already in use",
            "HTTPRoute/team-a/r held for node group \"gw\" by its proxies: 2 of the 2",
            "HTTPRoute/team-a/x held out: it fails: invalid repetition size",
        ] {
            assert!(text.contains(want), "{want:?} in {text}");
        }
    }
}
