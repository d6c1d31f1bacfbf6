//! Shared by the plugin host's tests: the adversarial plugin built from source, one runtime.

use std::path::PathBuf;
use std::sync::OnceLock;

use xdst_plugin::{Runtime, RuntimeConfig};

/// Builds the adversarial plugin for wasm32 and wraps it into a component (once per run).
#[allow(dead_code, reason = "each test binary uses some of the shared helpers")]
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
        Runtime::new(RuntimeConfig { cache_dir: Some(cache), fuel: false, ..Default::default() }).unwrap()
    })
}

/// A core-ABI plugin (`proto/core-abi`) in WAT: `describe` returns `describe`; `translate`'s
/// body is `translate`, which may call `$out(len)` to return `len` bytes of `data` (placed at
/// 4096). `extra` goes first (imports). `xdst_alloc` grows memory for every request.
#[allow(dead_code, reason = "each test binary uses some of the shared helpers")]
pub fn core_plugin(describe: &str, extra: &str, translate: &str, data: &str) -> Vec<u8> {
    core_plugin_with(describe, extra, "", translate, data)
}

/// [`core_plugin`] with `memories` declared after the exported memory (which stays memory 0).
#[allow(dead_code, reason = "each test binary uses some of the shared helpers")]
pub fn core_plugin_with(describe: &str, extra: &str, memories: &str, translate: &str, data: &str) -> Vec<u8> {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let wat = format!(
        r#"(module
        {extra}
        (memory (export "memory") 1)
        {memories}
        (data (i32.const 0) "{describe_text}")
        (data (i32.const 4096) "{data}")
        (func (export "xdst_plugin_abi_0_1_0"))
        (func (export "xdst_alloc") (param $n i32) (result i32)
            (local $p i32)
            (local.set $p (i32.mul (memory.size) (i32.const 65536)))
            (drop (memory.grow (i32.div_u (i32.add (local.get $n) (i32.const 65535)) (i32.const 65536))))
            (local.get $p))
        (func (export "xdst_describe") (result i64) (i64.const {dlen}))
        (func $out (param $len i32) (result i64)
            (i64.or (i64.shl (i64.const 4096) (i64.const 32)) (i64.extend_i32_u (local.get $len))))
        (func (export "xdst_translate") (param $ptr i32) (param $len i32) (result i64)
            {translate})
    )"#,
        describe_text = esc(describe),
        dlen = describe.len(),
        data = esc(data),
    );
    wat::parse_str(wat).unwrap()
}

/// A core-ABI plugin that returns `json` from every `translate`.
#[allow(dead_code, reason = "each test binary uses some of the shared helpers")]
pub fn core_returning(describe: &str, json: &str) -> Vec<u8> {
    core_plugin(describe, "", &format!("(call $out (i32.const {}))", json.len()), json)
}
