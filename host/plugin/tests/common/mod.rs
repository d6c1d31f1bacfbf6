//! Shared by the plugin host's tests: the adversarial plugin built from source, one runtime.

use std::path::PathBuf;
use std::sync::OnceLock;

use xdst_plugin::{Runtime, RuntimeConfig};

/// Builds the adversarial plugin for wasm32 and wraps it into a component (once per run).
pub fn adversary_component() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-q", "--release", "--target", "wasm32-unknown-unknown", "-p", "xdst-test-plugin-adversarial"])
            .current_dir(&root)
            .status()
            .expect("running cargo");
        assert!(status.success(), "building the adversarial plugin failed (is the wasm32-unknown-unknown target installed? tests/setup.sh adds it)");
        let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join("target"));
        let module = std::fs::read(target.join("wasm32-unknown-unknown/release/xdst_test_plugin_adversarial.wasm")).unwrap();
        wit_component::ComponentEncoder::default().module(&module).unwrap().validate(true).encode().unwrap()
    })
}

/// One runtime for the tests, with a compile cache so the plugin is compiled once.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let cache = std::env::temp_dir().join("xdst-sandbox-tests");
        Runtime::new(RuntimeConfig { cache_dir: Some(cache), fuel: false }).unwrap()
    })
}

