//! Keeps ARCHITECTURE.md and README.md honest: every workspace crate is described, every
//! path they name exists, and the commands they give exist and are executable.

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
