//! The core-module ABI (`proto/core-abi/README.md`): the `xdst:plugin@0.1.0` contract as JSON
//! through linear memory, for toolchains that build plain modules (AssemblyScript, Zig, C
//! without `wit-bindgen`). This module recognises such modules, links them, and converts
//! between the contract's JSON shapes and the WIT types the rest of the host uses, so a core
//! plugin and a component are one [`crate::Plugin`] to everyone else.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use wasmtime::{AsContextMut, Caller, Extern, Instance, InstancePre, Linker, Memory, Module};

use crate::error::Failure;
use crate::runtime::CallState;
use crate::wit::{self, PluginInfo, TranslateRequest, TranslateResponse};

/// The version marker this host implements; a module exporting it speaks this ABI.
pub const MARKER: &str = "xdst_plugin_abi_0_1_0";
/// The contract version the core-module ABI carries.
pub const VERSION: &str = "0.1.0";
const MARKER_PREFIX: &str = "xdst_plugin_abi_";

/// What a core module is, judged by its exports.
pub enum Shape {
    /// It exports this ABI's marker.
    CoreAbi,
    /// It exports another version's marker (`0_2_0`, as written in the export's name).
    OtherVersion(String),
    /// No marker: a module a component toolchain produced (or something else entirely).
    NoMarker,
}

/// Reads a core module's exports without compiling it.
pub fn shape(bytes: &[u8]) -> Result<Shape, String> {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let wasmparser::Payload::ExportSection(exports) = payload.map_err(|e| e.to_string())? {
            for export in exports {
                let export = export.map_err(|e| e.to_string())?;
                if export.name == MARKER {
                    return Ok(Shape::CoreAbi);
                }
                if let Some(version) = export.name.strip_prefix(MARKER_PREFIX) {
                    return Ok(Shape::OtherVersion(version.replace('_', ".")));
                }
            }
        }
    }
    Ok(Shape::NoMarker)
}

/// What a core plugin may import: `xdst` `log(level, ptr, len)`, and the empty WASI
/// preview 1 (`wasi_snapshot_preview1`, which Go's wasip1 runtime and Zig's and C's WASI
/// targets import): no files, environment, arguments or network; a stopped clock and fixed
/// random bytes unless the plugin's capabilities grant the real ones; stdout and stderr to the
/// log, bounded. The same WASI a component gets.
pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p1::add_to_linker_sync(linker, |s: &mut CallState| s.wasi_p1())?;
    linker.func_wrap("xdst", "log", |mut caller: Caller<'_, CallState>, level: i32, ptr: i32, len: i32| {
        let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
            return;
        };
        let text = memory
            .data(&caller)
            .get(ptr as u32 as usize..)
            .and_then(|m| m.get(..len as u32 as usize))
            .map(|b| String::from_utf8_lossy(b).into_owned());
        if let Some(text) = text {
            let level = match level {
                0 => wit::xdst::plugin::log::Level::Debug,
                1 => wit::xdst::plugin::log::Level::Info,
                2 => wit::xdst::plugin::log::Level::Warn,
                _ => wit::xdst::plugin::log::Level::Error,
            };
            caller.data_mut().write_log(level, text);
        }
    })?;
    Ok(())
}

/// The import module of WASI preview 1.
pub const WASI_P1: &str = "wasi_snapshot_preview1";

/// Refuses imports other than `xdst.log` and WASI preview 1's functions, naming the first.
pub fn check_imports(module: &Module, linker: &Linker<CallState>, engine: &wasmtime::Engine) -> Result<(), Failure> {
    for import in module.imports() {
        let allowed = match import.module() {
            "xdst" => import.name() == "log",
            WASI_P1 => wasi_p1_functions(linker, engine).contains(import.name()),
            _ => false,
        };
        if !allowed {
            return Err(Failure::Incompatible(format!(
                "imports {}.{}, which is not granted (a core-module plugin may import only xdst.log and \
                 wasi_snapshot_preview1's functions; see proto/core-abi/README.md)",
                import.module(),
                import.name()
            )));
        }
    }
    for (name, want) in [
        ("memory", "a memory"),
        ("xdst_alloc", "a function"),
        ("xdst_describe", "a function"),
        ("xdst_translate", "a function"),
    ] {
        let found = module.exports().find(|e| e.name() == name);
        let ok = match (&found, name) {
            (Some(e), "memory") => e.ty().memory().is_some(),
            (Some(e), _) => e.ty().func().is_some(),
            (None, _) => false,
        };
        if !ok {
            return Err(Failure::Incompatible(format!(
                "exports the core-module ABI marker {MARKER} but not {want} named {name} (see proto/core-abi/README.md)"
            )));
        }
    }
    Ok(())
}

/// The names of the WASI preview 1 functions `linker` defines (read once).
fn wasi_p1_functions(
    linker: &Linker<CallState>,
    engine: &wasmtime::Engine,
) -> &'static std::collections::BTreeSet<String> {
    static NAMES: std::sync::OnceLock<std::collections::BTreeSet<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut store = wasmtime::Store::new(engine, CallState::bare());
        linker.iter(&mut store).filter(|(m, _, _)| *m == WASI_P1).map(|(_, name, _)| name.to_owned()).collect()
    })
}

/// A linked core plugin, ready to instantiate once per call.
pub struct CorePre {
    pub pre: InstancePre<CallState>,
}

impl CorePre {
    /// Instantiates and runs `_initialize` if the module has one.
    fn start(&self, store: &mut wasmtime::Store<CallState>) -> Result<(Instance, Memory), CallError> {
        let instance = self.pre.instantiate(&mut *store).map_err(CallError::Wasm)?;
        if let Some(init) = instance.get_func(&mut *store, "_initialize") {
            init.typed::<(), ()>(&*store)
                .map_err(|e| CallError::Malformed(format!("_initialize: {e}")))?
                .call(&mut *store, ())
                .map_err(CallError::Wasm)?;
        }
        let memory = instance
            .get_memory(&mut *store, "memory")
            .ok_or_else(|| CallError::Malformed("no memory export".into()))?;
        Ok((instance, memory))
    }

    pub fn describe(&self, store: &mut wasmtime::Store<CallState>, output_cap: usize) -> Result<PluginInfo, CallError> {
        let (instance, memory) = self.start(store)?;
        let f = instance
            .get_typed_func::<(), i64>(&mut *store, "xdst_describe")
            .map_err(|e| CallError::Malformed(format!("xdst_describe must be () -> i64: {e}")))?;
        let packed = f.call(&mut *store, ()).map_err(CallError::Wasm)?;
        let text = read(store, memory, packed, output_cap, "xdst_describe")?;
        let info: Info = parse(&text, "xdst_describe")?;
        Ok(PluginInfo {
            name: info.name,
            version: info.version,
            kinds: info.kinds,
            phase: info.phase.into(),
            granularity: info.granularity.into(),
        })
    }

    pub fn translate(
        &self,
        store: &mut wasmtime::Store<CallState>,
        request: &TranslateRequest,
        output_cap: usize,
    ) -> Result<Result<TranslateResponse, wit::PluginError>, CallError> {
        let json = request_json(request).map_err(CallError::Malformed)?;
        let (instance, memory) = self.start(store)?;
        let alloc = instance
            .get_typed_func::<i32, i32>(&mut *store, "xdst_alloc")
            .map_err(|e| CallError::Malformed(format!("xdst_alloc must be (i32) -> i32: {e}")))?;
        let translate = instance
            .get_typed_func::<(i32, i32), i64>(&mut *store, "xdst_translate")
            .map_err(|e| CallError::Malformed(format!("xdst_translate must be (i32, i32) -> i64: {e}")))?;
        let len = i32::try_from(json.len()).map_err(|_| CallError::Malformed("request over 2 GiB".into()))?;
        let ptr = alloc.call(&mut *store, len).map_err(CallError::Wasm)?;
        if ptr == 0 && len > 0 {
            return Err(CallError::Malformed(format!("xdst_alloc({len}) returned 0 (out of memory)")));
        }
        memory
            .write(&mut *store, ptr as u32 as usize, json.as_bytes())
            .map_err(|_| CallError::Malformed(format!("xdst_alloc({len}) returned {ptr:#x}, outside memory")))?;
        let packed = translate.call(&mut *store, (ptr, len)).map_err(CallError::Wasm)?;
        let text = read(store, memory, packed, output_cap, "xdst_translate")?;
        let envelope: Envelope = parse(&text, "xdst_translate")?;
        match (envelope.ok, envelope.error) {
            (Some(ok), None) => ok.into_wit().map(Ok).map_err(CallError::Malformed),
            (None, Some(e)) => Ok(Err(wit::PluginError { message: e.message, document: e.document, field: e.field })),
            (Some(_), Some(_)) => Err(CallError::Malformed("xdst_translate returned both `ok` and `error`".into())),
            (None, None) => Err(CallError::Malformed("xdst_translate returned neither `ok` nor `error`".into())),
        }
    }
}

/// Why a core call failed, before it is attributed to the plugin.
pub enum CallError {
    /// A trap or a limit, classified like a component's.
    Wasm(wasmtime::Error),
    /// The module broke the ABI: a bad pointer, malformed JSON.
    Malformed(String),
    /// The response is longer than the output cap.
    TooLarge(usize),
}

fn read(
    store: &mut wasmtime::Store<CallState>,
    memory: Memory,
    packed: i64,
    cap: usize,
    func: &str,
) -> Result<String, CallError> {
    let ptr = (packed as u64 >> 32) as usize;
    let len = (packed as u64 & 0xffff_ffff) as usize;
    if len > cap {
        return Err(CallError::TooLarge(len));
    }
    let bytes = memory
        .data(store.as_context_mut())
        .get(ptr..)
        .and_then(|m| m.get(..len))
        .ok_or_else(|| CallError::Malformed(format!("{func} returned {len} bytes at {ptr:#x}, outside memory")))?;
    String::from_utf8(bytes.to_vec())
        .map_err(|e| CallError::Malformed(format!("{func} returned text that is not UTF-8: {e}")))
}

fn parse<T: for<'de> Deserialize<'de>>(text: &str, func: &str) -> Result<T, CallError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." { String::new() } else { format!(" at {path}") };
        CallError::Malformed(format!("{func} returned JSON the core-module ABI does not allow{at}: {}", e.inner()))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Info {
    name: String,
    version: String,
    kinds: Vec<String>,
    phase: PhaseJson,
    granularity: GranularityJson,
}

#[derive(Deserialize, Serialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum PhaseJson {
    Translate,
    Patch,
}

impl From<PhaseJson> for wit::Phase {
    fn from(p: PhaseJson) -> Self {
        match p {
            PhaseJson::Translate => wit::Phase::Translate,
            PhaseJson::Patch => wit::Phase::Patch,
        }
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum GranularityJson {
    PerDocument,
    WholeSet,
}

impl From<GranularityJson> for wit::Granularity {
    fn from(g: GranularityJson) -> Self {
        match g {
            GranularityJson::PerDocument => wit::Granularity::PerDocument,
            GranularityJson::WholeSet => wit::Granularity::WholeSet,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    ok: Option<Response>,
    error: Option<ErrorJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorJson {
    message: String,
    document: Option<String>,
    field: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Response {
    resources: Vec<ResourceIn>,
    #[serde(default)]
    diagnostics: Vec<DiagnosticJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResourceIn {
    type_url: String,
    name: String,
    body: BodyIn,
    document: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum BodyIn {
    Json(Box<RawValue>),
    Proto(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DiagnosticJson {
    severity: SeverityJson,
    message: String,
    document: Option<String>,
    field: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum SeverityJson {
    Info,
    Warning,
}

impl Response {
    fn into_wit(self) -> Result<TranslateResponse, String> {
        let resources = self
            .resources
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let body = match r.body {
                    // A string holding the JSON is accepted as well as the object itself.
                    BodyIn::Json(raw) => match serde_json::from_str::<String>(raw.get()) {
                        Ok(inner) => wit::Body::Json(inner),
                        Err(_) => wit::Body::Json(raw.get().to_owned()),
                    },
                    BodyIn::Proto(b64) => wit::Body::Proto(base64_decode(&b64).map_err(|e| {
                        format!("xdst_translate returned resources[{i}].body.proto that is not base64: {e}")
                    })?),
                };
                Ok(wit::XdsResource { type_url: r.type_url, name: r.name, body, document: r.document })
            })
            .collect::<Result<_, String>>()?;
        let diagnostics = self
            .diagnostics
            .into_iter()
            .map(|d| wit::Diagnostic {
                severity: match d.severity {
                    SeverityJson::Info => wit::Severity::Info,
                    SeverityJson::Warning => wit::Severity::Warning,
                },
                message: d.message,
                document: d.document,
                field: d.field,
            })
            .collect();
        Ok(TranslateResponse { resources, diagnostics })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestOut<'a> {
    node_group: &'a str,
    documents: Vec<DocumentOut<'a>>,
    resources: Vec<ResourceOut<'a>>,
    config: &'a RawValue,
}

#[derive(Serialize)]
struct DocumentOut<'a> {
    kind: &'a str,
    name: &'a str,
    origin: &'a str,
    json: &'a RawValue,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceOut<'a> {
    type_url: &'a str,
    name: &'a str,
    body: BodyOut<'a>,
    document: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum BodyOut<'a> {
    Json(&'a RawValue),
    Proto(String),
}

/// The request as the core ABI's JSON: documents, configuration and JSON bodies are embedded as
/// JSON values (the host produced them, so they are valid JSON).
fn request_json(r: &TranslateRequest) -> Result<String, String> {
    fn raw<'a>(s: &'a str, what: &str) -> Result<&'a RawValue, String> {
        let s = if s.trim().is_empty() { "null" } else { s };
        serde_json::from_str::<&RawValue>(s).map_err(|e| format!("{what} is not JSON: {e}"))
    }
    let documents = r
        .documents
        .iter()
        .map(|d| Ok(DocumentOut { kind: &d.kind, name: &d.name, origin: &d.origin, json: raw(&d.json, "a document")? }))
        .collect::<Result<_, String>>()?;
    let resources = r
        .resources
        .iter()
        .map(|x| {
            Ok(ResourceOut {
                type_url: &x.type_url,
                name: &x.name,
                body: match &x.body {
                    wit::Body::Json(s) => BodyOut::Json(raw(s, "a resource body")?),
                    wit::Body::Proto(b) => BodyOut::Proto(base64_encode(b)),
                },
                document: x.document.as_deref(),
            })
        })
        .collect::<Result<_, String>>()?;
    let out =
        RequestOut { node_group: &r.node_group, documents, resources, config: raw(&r.config, "the configuration")? };
    serde_json::to_string(&out).map_err(|e| e.to_string())
}

/// Standard alphabet; padding written, and optional when read (as proto3 JSON's `bytes`).
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    BASE64.encode(bytes)
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    BASE64.decode(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for len in 0..20 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(base64_decode(&base64_encode(&bytes)).unwrap(), bytes);
        }
        assert_eq!(base64_encode(b"xds"), "eGRz");
        assert_eq!(base64_encode(b"xd"), "eGQ=");
        assert!(base64_decode("a*b").is_err());
    }

    #[test]
    fn the_request_embeds_documents_as_json_values() {
        let r = TranslateRequest {
            node_group: "edge".into(),
            documents: vec![wit::IntentDocument {
                kind: "K".into(),
                name: "n".into(),
                origin: "f.yaml#1".into(),
                json: r#"{"a": 1}"#.into(),
            }],
            resources: vec![],
            config: String::new(),
        };
        assert_eq!(
            request_json(&r).unwrap(),
            r#"{"nodeGroup":"edge","documents":[{"kind":"K","name":"n","origin":"f.yaml#1","json":{"a": 1}}],"resources":[],"config":null}"#
        );
    }
}
