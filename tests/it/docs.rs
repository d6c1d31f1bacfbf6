//! Keeps ARCHITECTURE.md, README.md and docs/ honest: every workspace crate is described, every
//! path they name exists, and the commands they give exist and are executable; every `--flag`
//! README.md and docs/ name is defined by a CLI, every admin path they name is routed, and the
//! README's conformance count is `CONFORMANCE.md`'s (issue 34, item 6).

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(xdst_tests::repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Backticked tokens that look like repository paths (`host/core/src/sotw.rs`).
fn named_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            ["host/", "tests/", "examples/", "docs/", ".ci/"].iter().any(|p| t.starts_with(p))
                && !t.contains(' ')
                && !t.contains('*')
        })
        .map(|t| t.trim_end_matches('/').to_owned())
        .collect()
}

#[test]
fn every_path_named_in_the_docs_exists() {
    let root = xdst_tests::repo_root();
    for doc in ["ARCHITECTURE.md", "README.md"] {
        for p in named_paths(&read(doc)) {
            // Paths relative to a crate's src (e.g. `sotw.rs`) are not checked; these are.
            assert!(root.join(&p).exists(), "{doc} names `{p}`, which does not exist");
        }
    }
}

#[test]
fn every_workspace_crate_is_in_architecture_md() {
    let arch = read("ARCHITECTURE.md");
    let manifest = read("Cargo.toml");
    let members: Vec<&str> = manifest
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("workspace members")
        .split('"')
        .skip(1)
        .step_by(2)
        .collect();
    assert!(!members.is_empty());
    for m in members {
        let crate_manifest = read(&format!("{m}/Cargo.toml"));
        let name = crate_manifest.lines().find_map(|l| l.strip_prefix("name = ")).unwrap().trim_matches('"');
        assert!(arch.contains(&format!("`{name}`")), "crate {name} ({m}) is not described in ARCHITECTURE.md");
        assert!(arch.contains(&format!("`{m}`")), "path {m} is not named in ARCHITECTURE.md");
    }
}

#[test]
fn readme_commands_exist_and_are_executable() {
    use std::os::unix::fs::PermissionsExt;
    let readme = read("README.md");
    for cmd in ["examples/quickstart/run.sh", "tests/run.sh"] {
        assert!(readme.contains(cmd), "README does not give {cmd}");
        let meta = std::fs::metadata(xdst_tests::repo_root().join(cmd)).unwrap();
        assert!(meta.permissions().mode() & 0o111 != 0, "{cmd} is not executable");
    }
    let ci = read(".ci/run");
    assert!(ci.contains("tests/run.sh"), ".ci/run must run the README test command");
    assert!(Path::new(&xdst_tests::repo_root().join(".ci/run")).exists());
}

/// README.md and every page under `docs/`, as (path, text).
fn user_docs() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = xdst_tests::repo_root();
    let mut files = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let name = f.strip_prefix(&root).unwrap().display().to_string();
            let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect()
}

/// Every `--flag` in `text` (not `---`, not the tail of a longer word), with its line number.
fn flags(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let b = line.as_bytes();
        let mut at = 0;
        while let Some(found) = line[at..].find("--") {
            let start = at + found;
            let name_start = start + 2;
            let before_ok = start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'-');
            let end = name_start
                + line[name_start..]
                    .bytes()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                    .count();
            let name = line[name_start..end].trim_end_matches('-');
            if before_ok && name.as_bytes().first().is_some_and(u8::is_ascii_lowercase) {
                out.push((i + 1, format!("--{name}")));
            }
            at = end.max(start + 2);
        }
    }
    out
}

/// Every flag `--help` shows for `bin` with `args` and, recursively, for each of its
/// subcommands.
fn help_flags(bin: &Path, args: &[String], into: &mut std::collections::BTreeSet<String>) {
    let out = std::process::Command::new(bin)
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{} {args:?} --help: {e}", bin.display()));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !help.is_empty(), "{} {args:?} --help failed", bin.display());
    into.extend(flags(&help).into_iter().map(|(_, f)| f));
    let mut in_commands = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
        } else if in_commands && !line.starts_with(' ') {
            in_commands = false;
        } else if in_commands
            && let Some(sub) = line.strip_prefix("  ").and_then(|l| l.split_whitespace().next())
            && !line.starts_with("   ")
            && sub != "help"
        {
            let mut next = args.to_vec();
            next.push(sub.to_owned());
            help_flags(bin, &next, into);
        }
    }
}

/// Flags the repository's own scripts parse by hand (`--flag)` in a shell `case`, `"--flag"`
/// in a test or an `add_argument`, a Rust `match` arm).
fn script_flags(into: &mut std::collections::BTreeSet<String>) {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && name != "node_modules" && name != "target" {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "sh" || e == "py") {
                out.push(path);
            }
        }
    }
    let root = xdst_tests::repo_root();
    let mut files = vec![root.join("tests/bench/translate/src/main.rs")];
    for dir in ["tests", "examples", "host/core/gen"] {
        walk(&root.join(dir), &mut files);
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (_, flag) in flags(&text) {
            if text.contains(&format!("{flag})")) || text.contains(&format!("\"{flag}\"")) {
                into.insert(flag);
            }
        }
    }
}

/// Flags of tools that are not ours, which the docs name in commands to run.
const OTHER_TOOLS: &[(&str, &str)] = &[
    ("--release --target --test --lib --bin --workspace --all-targets --check", "cargo (and cargo fmt --check)"),
    ("--nocapture --test-threads --ignored", "the Rust test harness, after `cargo test --`"),
    ("--no-install-recommends", "apt-get"),
    ("--disable-hot-restart", "envoy"),
    ("--use", "asc, the AssemblyScript compiler"),
    ("--tool --depth --detailed-freq --pid", "valgrind's massif and vgdb"),
    ("--call-graph --no-inline --children", "perf record and perf report"),
];

/// Issue 34, item 6: every `--flag` README.md and docs/ name exists: in the `xdst` CLI (every
/// subcommand's `--help`), in the `--help` of the repository's other binaries, in a script's
/// own argument parser, or in [`OTHER_TOOLS`].
#[test]
fn every_flag_named_in_the_docs_exists() {
    let mut known = std::collections::BTreeSet::new();
    help_flags(&xdst_tests::server::binary().unwrap(), &[], &mut known);
    assert!(
        known.contains("--admin-addr") && known.contains("--out-dir"),
        "xdst's subcommands were not read: {known:?}"
    );
    for bin in [
        env!("CARGO_BIN_EXE_xdst-loadgen"),
        env!("CARGO_BIN_EXE_xdst-bench-unordered"),
        env!("CARGO_BIN_EXE_xdst-propagation"),
        env!("CARGO_BIN_EXE_xdst-plugin-bench"),
        env!("CARGO_BIN_EXE_xdst-first200"),
        env!("CARGO_BIN_EXE_xdst-fleet"),
    ] {
        help_flags(Path::new(bin), &[], &mut known);
    }
    script_flags(&mut known);
    known.extend(OTHER_TOOLS.iter().flat_map(|(flags, _)| flags.split(' ')).map(str::to_owned));
    let mut missing = Vec::new();
    for (doc, text) in user_docs() {
        for (line, flag) in flags(&text) {
            if !known.contains(&flag) {
                missing.push(format!("{doc}:{line}: {flag}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags named in the docs that no CLI defines (xdst and its subcommands, the binaries in tests/, the \
         scripts' parsers, or OTHER_TOOLS in tests/it/docs.rs):\n  {}",
        missing.join("\n  ")
    );
}

/// Every admin path in `text` with its line and the method named before it, if any:
/// each backticked `/path` or `METHOD /path`, and each `localhost:19000/path` (the default
/// admin address) outside backticks. Not admin paths: a token with `*` or `...` (a family of
/// paths), `//`, and files or other ports' paths ([`NOT_ADMIN`]).
fn admin_paths(text: &str) -> Vec<(usize, Option<String>, String)> {
    const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "HEAD"];
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut found: Vec<(Option<String>, String)> = Vec::new();
        for (n, span) in line.split('`').enumerate() {
            if n % 2 == 0 {
                continue;
            }
            let words: Vec<&str> = span.split_whitespace().collect();
            for (w, word) in words.iter().enumerate() {
                if word.starts_with('/') && (w == 0 || METHODS.contains(&words[w - 1])) {
                    found.push(((w > 0).then(|| words[w - 1].to_owned()), (*word).to_owned()));
                }
            }
        }
        for host in ["localhost:19000", "127.0.0.1:19000"] {
            for (at, _) in line.match_indices(host) {
                let rest = &line[at + host.len()..];
                let path: String = rest.chars().take_while(|c| !c.is_whitespace() && !"`'\")".contains(*c)).collect();
                if path.starts_with('/') {
                    let method = line.contains("-X PUT").then(|| "PUT".to_owned());
                    found.push((method, path));
                }
            }
        }
        for (method, path) in found {
            if path.contains('*') || path.contains("...") || path.starts_with("//") {
                continue;
            }
            let path = path.trim_end_matches([',', '.', ';', ':']).to_owned();
            let first = path.trim_start_matches('/').split(['/', '?', '[']).next().unwrap_or("");
            if NOT_ADMIN.contains(&first) {
                continue;
            }
            out.push((i + 1, method, path));
        }
    }
    out
}

/// First segments of paths the docs name that are not the admin port's: files, the xDS
/// port's REST fetch (`/v3/discovery:...`) and gRPC method paths (`/service/method`).
const NOT_ADMIN: &[&str] = &["tmp", "proc", "etc", "usr", "v3", "service"];

/// Issue 34, item 6: every admin path README.md and docs/ name is routed by a real `xdst
/// serve` (intent from the quickstart, both of its plugins, a write token): asked with the
/// method the doc names (else `GET`), it is answered by a route: not with the router's own 404
/// (no body), nor 405 when the doc named the method. `{id}`-style parameters are filled with a change id or a document the server has;
/// writes are sent without the token, so they change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_path_named_in_the_docs_is_routed() -> anyhow::Result<()> {
    use xdst_tests::xds::http_with;
    let root = xdst_tests::repo_root();
    let intent = tempfile::tempdir()?;
    let plugins = tempfile::tempdir()?;
    std::fs::copy(root.join("examples/quickstart/intent/web.yaml"), intent.path().join("web.yaml"))?;
    std::fs::copy(
        root.join("examples/quickstart/gateway-api/gateway-api.yaml"),
        intent.path().join("gateway-api.yaml"),
    )?;
    xdst_tests::plugins::install(plugins.path(), &xdst_tests::plugins::reference()?, "reference.wasm", None)?;
    let settings = std::fs::read_to_string(root.join("examples/quickstart/gateway-api-plugin.yaml"))?;
    xdst_tests::plugins::install(
        plugins.path(),
        &xdst_tests::plugins::gateway_api()?,
        "gateway-api.wasm",
        Some(&settings),
    )?;
    let token = tempfile::NamedTempFile::new()?;
    std::fs::write(token.path(), "t0ken")?;
    let xdst = xdst_tests::server::Process::start_intent(
        intent.path(),
        plugins.path(),
        &["--admin-token-file", token.path().to_str().unwrap()],
    )
    .await?;
    let admin = xdst.admin_addr;

    // The router's own answer to a path it does not have: what a wrong doc would get.
    let (status, body) = http_with(admin, "GET", "/no-such-admin-path", &[], "").await;
    anyhow::ensure!(status == 404 && body.is_empty(), "an unrouted path: {status} {body:?}");

    // Parameters: documents the server holds, with and without a namespace.
    let (_, list) = http_with(admin, "GET", "/intent", &[], "").await;
    let list: serde_json::Value = serde_json::from_str(&list)?;
    let docs = list.as_array().cloned().unwrap_or_default();
    let pick = |namespaced: bool| {
        docs.iter().find(|d| d["namespace"].is_string() == namespaced).map(|d| {
            (
                d["kind"].as_str().unwrap_or("").to_owned(),
                d["namespace"].as_str().unwrap_or("").to_owned(),
                d["name"].as_str().unwrap_or("").to_owned(),
            )
        })
    };
    let (plain, namespaced) = (pick(false).unwrap_or_default(), pick(true).unwrap_or_default());
    anyhow::ensure!(!plain.0.is_empty() && !namespaced.0.is_empty(), "GET /intent: {list}");

    let mut wrong = Vec::new();
    let mut asked = 0;
    for (doc, text) in user_docs() {
        for (line, method, path) in admin_paths(&text) {
            let (kind, ns, name) = if path.contains("{namespace}") { &namespaced } else { &plain };
            let mut filled = path
                .replace("{id}", "1")
                .replace("{latest}", "1")
                .replace("{kind}", kind)
                .replace("{namespace}", ns)
                .replace("{name}", name);
            // `[?bodies=true]`: an optional query, asked for.
            filled = filled.replace("[?", "?").replace(']', "");
            let (status, body) = http_with(admin, method.as_deref().unwrap_or("GET"), &filled, &[], "").await;
            asked += 1;
            if (status == 404 && body.is_empty()) || (status == 405 && method.is_some()) || status == 0 {
                let method = method.as_deref().unwrap_or("GET");
                wrong.push(format!("{doc}:{line}: {method} {path} (asked {filled}): {status}"));
            }
        }
    }
    anyhow::ensure!(asked > 20, "only {asked} admin paths found in the docs: is the extraction broken?");
    anyhow::ensure!(
        wrong.is_empty(),
        "admin paths named in the docs that the admin router does not answer:\n  {}",
        wrong.join("\n  ")
    );
    Ok(())
}

/// Issue 34, item 6: the README's count of upstream Gateway API conformance cases is
/// `plugins/gateway-api/CONFORMANCE.md`'s: its table's rows, how many pass, and how many pass
/// on status alone.
#[test]
fn the_readme_conformance_count_matches_conformance_md() {
    let table = read("plugins/gateway-api/CONFORMANCE.md");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Case"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    let cases = rows.len();
    // `pass`, or `pass (status)`: on status alone.
    let passing = rows.iter().filter(|r| r.get(1).is_some_and(|v| v.starts_with("pass"))).count();
    let on_status = rows.iter().filter(|r| r.get(1) == Some(&"pass (status)")).count();
    // `pass (returns early)`: upstream's test returns at once for xdst's features.
    let early = rows.iter().filter(|r| r.get(1) == Some(&"pass (returns early)")).count();
    assert!(cases > 0, "CONFORMANCE.md has no table");
    assert!(table.contains(&format!("{cases} upstream cases")), "CONFORMANCE.md's text does not say its {cases} cases");
    let summary =
        if passing == cases { format!("**all {cases} pass**") } else { format!("**{passing} of {cases} pass**") };
    assert!(table.contains(&summary), "CONFORMANCE.md's summary does not say {summary} (its table)");
    let status_only: usize = table
        .split_once(" of them on status alone")
        .and_then(|(before, _)| before.rsplit(' ').next()?.parse().ok())
        .expect("CONFORMANCE.md says how many pass on status alone");
    assert_eq!(
        status_only, on_status,
        "CONFORMANCE.md's summary and its table differ on the cases passing on status alone"
    );

    // Every other row is `n/a` (the upstream suite skips it for xdst's features) or `not yet`,
    // and the summary counts both.
    let not_applicable = rows.iter().filter(|r| r.get(1) == Some(&"n/a")).count();
    let not_yet = rows.iter().filter(|r| r.get(1) == Some(&"not yet")).count();
    assert_eq!(passing + not_applicable + not_yet, cases, "a row of CONFORMANCE.md is neither pass, n/a nor not yet");
    if not_applicable > 0 {
        let verb = if not_applicable == 1 { "is" } else { "are" };
        assert!(
            table.contains(&format!("{not_applicable} {verb} not applicable")),
            "the summary counts {not_applicable} n/a"
        );
    }
    if not_yet > 0 {
        assert!(table.contains(&format!("{not_yet} are not yet run")), "the summary counts {not_yet} not yet");
    }
    if early > 0 {
        assert!(
            table.contains(&format!("{early} return at once upstream")),
            "the summary counts {early} returning early"
        );
    }

    let readme = read("README.md").split_whitespace().collect::<Vec<_>>().join(" ");
    let claim = if passing == cases {
        format!(
            "all {cases} of the upstream conformance cases we run pass, {} through a real Envoy",
            cases - status_only - early
        )
    } else {
        format!(
            "{passing} of the {cases} upstream conformance cases pass, {} through a real Envoy",
            passing - status_only - early
        )
    };
    assert!(readme.contains(&claim), "README.md must say \"{claim}\" (plugins/gateway-api/CONFORMANCE.md)");
    assert!(
        readme.contains(&format!("{status_only} on status alone")),
        "README.md must say \"{status_only} on status alone\" (CONFORMANCE.md)"
    );
}

/// Issue 34: the serving plane does not depend on how resources are made. `xdst-serve` links
/// none of wasmtime (plugins), etcd-client (the store) or ureq (fetching plugins).
#[test]
fn the_serving_crate_links_no_plugin_runtime_store_or_http_client() {
    let out = xdst_tests::cargo()
        .args(["tree", "-p", "xdst-serve", "-e", "normal", "--prefix", "none", "--locked"])
        .current_dir(xdst_tests::repo_root())
        .output()
        .expect("running cargo tree");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.lines().any(|l| l.starts_with("xdst-core ")), "cargo tree shows no xdst-core:\n{tree}");
    for banned in ["wasmtime", "etcd-client", "ureq", "xdst-plugin", "xdst "] {
        let found: Vec<&str> = tree.lines().filter(|l| l.starts_with(banned)).collect();
        assert!(found.is_empty(), "xdst-serve depends on {banned}: {found:?}");
    }
}

/// The modules of a crate's `src` (by file: `lib.rs` is `crate`, `a/mod.rs` and `a.rs` are
/// `crate::a`) and, for each, the modules it names through `crate::` and `super::` paths
/// outside comments and before its `#[cfg(test)]` items.
fn module_graph(src: &Path) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let module_of = |file: &Path| -> Vec<String> {
        let rel = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            parts.pop();
        }
        std::iter::once("crate".to_owned()).chain(parts).collect()
    };
    let modules: std::collections::BTreeMap<String, &std::path::PathBuf> =
        files.iter().map(|f| (module_of(f).join("::"), f)).collect();
    let mut graph = std::collections::BTreeMap::new();
    for (name, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let mut edges = std::collections::BTreeSet::new();
        for line in text.lines().take_while(|l| l.trim() != "#[cfg(test)]") {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
                if i > 0 && code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue; // inside a longer path (`super::super::`, `xdst_crate::`)
                }
                let path: String = code[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == ':')
                    .collect();
                let mut parts: Vec<String> = name.split("::").map(str::to_owned).collect();
                let mut rest = path.split("::").filter(|s| !s.is_empty()).peekable();
                if rest.peek() == Some(&"crate") {
                    parts = vec![rest.next().unwrap().to_owned()];
                }
                while rest.peek() == Some(&"super") {
                    rest.next();
                    parts.pop();
                }
                parts.extend(rest.map(str::to_owned));
                // The longest prefix that is a module of this crate.
                let target = (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| modules.contains_key(m));
                if let Some(t) = target.filter(|t| t != name) {
                    edges.insert(t);
                }
            }
        }
        graph.insert(name.clone(), edges);
    }
    graph
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        state: &mut std::collections::HashMap<String, bool>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_owned(), true);
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next) {
                Some(true) => {
                    let start = stack.iter().position(|m| m == next).unwrap();
                    return Some(stack[start..].iter().cloned().chain([next.clone()]).collect());
                }
                Some(false) => {}
                None => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_owned(), false);
        None
    }
    let mut state = std::collections::HashMap::new();
    graph.keys().find_map(|m| if state.contains_key(m) { None } else { visit(m, graph, &mut state, &mut Vec::new()) })
}

/// Issue 34: the modules of `host/xdst` and `host/serve` import one another in one direction
/// only (the old `Context` tied intent, generations, source, rollouts and changes into one
/// cycle, and the admin routes and the intent API into another).
#[test]
fn no_import_cycle_between_the_modules_of_the_host_crates() {
    for src in ["host/xdst/src", "host/serve/src"] {
        let graph = module_graph(&xdst_tests::repo_root().join(src));
        assert!(graph.len() > 10 && graph.values().map(|e| e.len()).sum::<usize>() > 20, "{src}: {graph:?}");
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{src}: import cycle {}", cycle.join(" -> "));
        }
    }
}

/// The cycle check finds a cycle where there is one (through `super::`, across a `mod.rs`),
/// and none in tests or comments.
#[test]
fn the_cycle_check_finds_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let write = |p: &str, text: &str| {
        let path = dir.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\n");
    write("a/mod.rs", "pub mod inner;\nuse crate::b::B;\n");
    write("a/inner.rs", "// crate::b is named in a comment only\n");
    write("b.rs", "pub struct B;\n#[cfg(test)]\nmod tests { use crate::a::inner; }\n");
    assert_eq!(find_cycle(&module_graph(dir.path())), None);
    write("b.rs", "pub struct B;\nfn f() { let _ = crate::a::inner::X; }\n");
    write("a/inner.rs", "pub struct X;\n");
    assert_eq!(find_cycle(&module_graph(dir.path())), None, "a -> b -> a::inner is no cycle");
    write("a/inner.rs", "pub struct X;\npub fn g() { super::super::a::h(); }\n");
    let cycle = find_cycle(&module_graph(dir.path())).expect("a -> b -> a::inner -> a");
    assert_eq!(cycle.first(), cycle.last());
    assert!(cycle.len() == 4, "{cycle:?}");
}
