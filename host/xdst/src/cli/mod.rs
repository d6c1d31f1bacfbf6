//! The `xdst` command line: `serve` and the tools around it (`validate`, `translate`,
//! `plugin`, `store`, `wait`).

pub mod plugin_tool;
pub mod settings;
pub mod translate;
pub mod wait;

use std::path::PathBuf;
use std::time::Duration;

use crate::generate::source;
use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tracing::info;
use xdst_core::cache::Cache;

#[derive(Parser)]
#[command(name = "xdst", version, about = "An xDS control plane for Envoy and proxyless gRPC clients", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve xDS (SotW and Delta; ADS and per-type LDS/RDS/CDS/EDS; REST fetch) from intent
    /// translated by wasm plugins, or from a directory of Envoy resources, with an admin port
    /// for health, metrics and debugging.
    #[command(after_help = SERVE_HELP)]
    Serve(Box<settings::Settings>),
    /// Load a resources directory exactly as `serve` would, report the first problem
    /// (file, document, field or dangling reference) and exit non-zero if there is one.
    Validate {
        /// The resources directory.
        #[arg(long, value_name = "DIR")]
        resources: PathBuf,
    },
    /// Translate intent with plugins exactly as `serve` would and print the resources a node
    /// group would be served (or the first error, naming file, document, field or plugin).
    /// With --out-dir, write Envoy filesystem-subscription files instead.
    #[command(after_help = TRANSLATE_HELP)]
    Translate(TranslateArgs),
    /// Write, build, test, inspect and push plugins, in Rust, C, JavaScript, Python,
    /// AssemblyScript, Go or Zig.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Move intent between a directory and a store (etcd), for replicas (`serve --store`).
    #[command(subcommand)]
    Store(StoreCommand),
    /// Wait until a change is live: every connected node (of --group) holds it, which means
    /// it acknowledged, on its own streams, the change's version of everything it asks for (a
    /// node that never answers never holds it). Exits 0 when it is; 1 when --timeout runs
    /// out, naming the nodes still without it; 2 as soon as every node without it rejected
    /// it, naming each with the resources, plugins and documents its rejection points at; 3
    /// when the admin port cannot be asked or refuses the question (an unknown --group, an
    /// id below 1); 4 once every node has answered and a document the change wrote is held
    /// out somewhere: kept out at a node that rejected it, held for a node group by its
    /// proxies, failing, or its plugin refused (each named, with where and why). Two processes
    /// with one node id are named apart: `ID (client 2, from ADDRESS)`.
    #[command(after_help = WAIT_HELP)]
    Wait {
        /// The change: the `change` of an intent API write's answer, or a generation number
        /// (`GET /changes` gives the newest). With --store, a store revision.
        #[arg(long, value_name = "ID")]
        change: i64,
        /// How long to wait.
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        timeout: Duration,
        /// Only the nodes of this node group.
        #[arg(long, value_name = "GROUP")]
        group: Option<String>,
        /// The admin port of the server (any replica: each answers for the nodes connected to it).
        #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:19000", env = "XDST_ADMIN_URL")]
        admin: String,
        /// A file holding the admin read token, when reads need one.
        #[arg(long, value_name = "FILE", env = "XDST_ADMIN_READ_TOKEN_FILE")]
        token_file: Option<PathBuf>,
    },
}

const WAIT_HELP: &str = "Examples:
  # write a document, then wait for every node to hold it
  change=$(curl -s -X PUT -H \"Authorization: Bearer $TOKEN\" --data-binary @web.yaml \\
      http://127.0.0.1:19000/intent/Service/web | jq .change)
  xdst wait --change \"$change\" --timeout 30s
  # only the edge proxies
  xdst wait --change 42 --group edge

The same answer as JSON: GET /changes/{id}[?group=G] on the admin port.";

#[derive(Subcommand)]
enum StoreCommand {
    /// Write every intent document of DIR (read as `serve --intent DIR` reads it) to the store,
    /// one key per document (PREFIX/intent/KIND/NAME); documents already there with the same
    /// content are left alone. Nothing is written if DIR does not load. With --plugins FILE,
    /// also the plugins list replicas run (PREFIX/plugins/list).
    Import {
        /// The intent directory (optional with --plugins).
        #[arg(required_unless_present = "plugins")]
        dir: Option<PathBuf>,
        /// etcd://HOST:PORT[,HOST:PORT...]/PREFIX
        #[arg(long, value_name = "URL", env = "XDST_STORE")]
        store: String,
        /// A configuration file whose `plugins:` list becomes the store's plugin set. Replicas
        /// started with --store and no --plugins run it: the elected leader resolves each
        /// source's tag to a digest once and every replica runs that digest (POST /reload or
        /// SIGHUP on any replica resolves again). Sources must be oci:// or https://, and
        /// signature keys absolute paths present on every replica.
        #[arg(long, value_name = "FILE")]
        plugins: Option<PathBuf>,
    },
    /// Write every intent document of the store to DIR/KIND/NAME.yaml (a directory
    /// `serve --intent` reads); with --plugins FILE, also the store's plugins list to FILE.
    Export {
        #[arg(required_unless_present = "plugins")]
        dir: Option<PathBuf>,
        /// etcd://HOST:PORT[,HOST:PORT...]/PREFIX
        #[arg(long, value_name = "URL", env = "XDST_STORE")]
        store: String,
        /// Where to write the plugins list (a configuration file with only `plugins:`).
        #[arg(long, value_name = "FILE")]
        plugins: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Scaffold a plugin that builds, declares one intent kind and has one passing test case.
    #[command(after_help = NEW_HELP)]
    New {
        /// The language: rust, c, js, python, assemblyscript, go or zig.
        #[arg(long, value_enum)]
        lang: crate::cli::plugin_tool::Lang,
        /// The plugin's name (lowercase, dashes: team-gateway); also the directory's.
        name: String,
        /// The intent kind it translates [default: the name in PascalCase].
        #[arg(long)]
        kind: Option<String>,
        /// Where to create it [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The incremental form (contract 0.4.0): xdst keeps the plugin's instance and sends
        /// only what changed; the template shows what to keep (rust, js, python).
        #[arg(long)]
        incremental: bool,
    },
    /// Build the plugin in DIR with its language's toolchain, installing the toolchain into
    /// $XDST_TOOLCHAINS (default ~/.cache/xdst/toolchains) if missing; then load the result to
    /// check it.
    Build {
        /// The plugin's directory (with xdst-plugin.yaml, as `xdst plugin new` made it).
        dir: PathBuf,
        /// Where to write the plugin [default: DIR/build/NAME.wasm].
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[arg(long, value_name = "DIR", env = "XDST_PLUGIN_CACHE")]
        plugin_cache: Option<PathBuf>,
    },
    /// Run golden cases through a plugin: each case is a directory with intent.yaml and the
    /// resources expected (expected.yaml, as `xdst translate` prints them) or the error
    /// expected (expected-error.yaml: document, field, message). Prints a diff per resource.
    Test {
        /// The plugin (.wasm).
        plugin: PathBuf,
        /// The directory of cases.
        #[arg(long, value_name = "DIR")]
        cases: PathBuf,
        /// Rewrite every case's expectation from what the plugin produces now.
        #[arg(long)]
        bless: bool,
        #[arg(long, value_name = "DIR", env = "XDST_PLUGIN_CACHE")]
        plugin_cache: Option<PathBuf>,
    },
    /// Push a plugin to an OCI registry as a wasm artifact (config media type
    /// application/vnd.wasm.config.v0+json, one application/wasm layer), after loading it to
    /// check it is one. Prints the manifest digest and the plugin's sha256 to pin.
    #[command(after_help = PUSH_HELP)]
    Push {
        /// The plugin (.wasm).
        plugin: PathBuf,
        /// Where: oci://REGISTRY/REPOSITORY:TAG.
        target: String,
        /// Registries spoken to over plain HTTP (loopback ones always are).
        #[arg(long, value_name = "HOST:PORT")]
        insecure_registry: Vec<String>,
        /// Also sign the plugin's digest with this ed25519 private key (PEM) and push the
        /// signature to the tag sha256-<hex>.sig of the same repository.
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        #[arg(long, value_name = "DIR", env = "XDST_PLUGIN_CACHE")]
        plugin_cache: Option<PathBuf>,
    },
    /// Sign a plugin: a detached ed25519 signature over its digest (the text sha256:<hex>),
    /// written as base64 to PLUGIN.sig, which `signature: {publicKey: ...}` in xdst.yaml
    /// verifies. The key is PKCS#8 PEM: `openssl genpkey -algorithm ed25519 -out key.pem`;
    /// its public half: `openssl pkey -in key.pem -pubout -out key.pub`. The same signature
    /// can be made with `openssl pkeyutl -sign -rawin -inkey key.pem` over the digest text.
    Sign {
        /// The plugin (.wasm).
        plugin: PathBuf,
        /// The ed25519 private key (PEM).
        #[arg(long, value_name = "KEY")]
        key: PathBuf,
        /// Where to write the signature [default: PLUGIN.sig].
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Say what a plugin is: component or core module, contract version, name, version,
    /// kinds, phase, the imports it asks for, size and sha256.
    Inspect {
        /// The plugin (.wasm).
        plugin: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "DIR", env = "XDST_PLUGIN_CACHE")]
        plugin_cache: Option<PathBuf>,
    },
}

const NEW_HELP: &str = "\
Example:
  xdst plugin new --lang python team-gateway
  xdst plugin build team-gateway
  xdst plugin test team-gateway/build/team-gateway.wasm --cases team-gateway/cases

Languages and what they produce:
  rust            a component (wit-bindgen), ~70 KB
  c               a component (clang, wasi-libc, with the bindings wit-bindgen c made),
                  ~100 KB
  js              a component (componentize-qjs: QuickJS inside), ~1.6 MB
  python          a component (componentize-py: CPython inside), ~18 MB; the first load
                  compiles it for 10-60 s, then it is cached by digest
  assemblyscript  a core module speaking the core-module ABI (proto/core-abi), ~20 KB
  go              a core module (GOOS=wasip1, go build -buildmode=c-shared) speaking the
                  core-module ABI, with the empty WASI; ~4.5 MB
  zig             a core module (wasm32-freestanding, no WASI) speaking the core-module ABI

Incremental plugins (contract 0.4.0, design 020): `xdst plugin new --lang rust --incremental
team-routes` (or `--lang js`, `--lang python`) makes one whose instance xdst keeps between
calls and sends only the documents that changed and the ids removed; its src/lib.rs
(src/index.js, app.py) says what to keep and when a call is full. The other languages build against the core-module ABI or 0.1.0,
whose calls are all full.
The guides are guest-sdk/<lang>/README.md in the xdst repository.";

const PUSH_HELP: &str = "\
Example:
  xdst plugin push build/route-policy.wasm oci://registry.example:5000/security/route-policy:1.0
then, in xdst.yaml:
  plugins:
  - name: route-policy
    source: oci://registry.example:5000/security/route-policy:1.0
    sha256: <the sha256 printed>
The tag is resolved to a digest when xdst starts and on reload; a moved tag is not picked up
before. Credentials: ~/.docker/config.json (docker login, oras login).";

const TRANSLATE_HELP: &str = "\
Output:
  --format json prints {\"resources\": [...]}, --format yaml one document per resource; both
  are canonical proto3 with an \"@type\" and can be served as they are with --resources.

Filesystem subscription (--out-dir DIR):
  Writes DiscoveryResponse files (JSON), each replaced by an atomic rename so Envoy never
  reads a half-written file: DIR/cds.json and DIR/lds.json with every cluster and listener,
  and DIR/eds/<cluster>.json and DIR/rds/<route config>.json with one resource each (what
  Envoy's file-based EDS and RDS expect). Config sources that say `ads: {}` are pointed at
  those files, so Envoy runs with no gRPC at all:
    dynamic_resources:
      cds_config: {path_config_source: {path: DIR/cds.json, watched_directory: {path: DIR}}, resource_api_version: V3}
      lds_config: {path_config_source: {path: DIR/lds.json, watched_directory: {path: DIR}}, resource_api_version: V3}
  Run it again after an edit and Envoy picks up the new files (there is no ACK or NACK on
  this path: check Envoy's update_rejected stats).";

#[derive(clap::Args)]
struct TranslateArgs {
    /// Directory of intent documents (YAML or JSON; subdirectories included) [default: the
    /// configuration file's `intent`].
    #[arg(long, value_name = "DIR", required_unless_present = "config")]
    intent: Option<PathBuf>,
    /// Directory of plugins (*.wasm, with optional NAME.yaml settings).
    #[arg(long, value_name = "DIR", required_unless_present = "config", conflicts_with = "config")]
    plugins: Option<PathBuf>,
    /// Take the plugins from a configuration file (as `serve --config`): its `plugins` list,
    /// pulled, pinned and signature-checked as `serve` would, or its `pluginsDir`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The node group to translate for, as plugins see it ("" is the default group).
    #[arg(long, value_name = "GROUP", default_value = "")]
    node_group: String,
    /// How to print the resources.
    #[arg(long, value_enum, default_value = "yaml")]
    format: Format,
    /// Write filesystem-subscription files into DIR instead of printing.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Print each document's status instead of the resources: what its plugin computed (for
    /// Gateway API objects, the Accepted, ResolvedRefs and Programmed conditions of every
    /// route parent and Gateway listener), each condition with a lastTransitionTime of now, as
    /// `serve` stamps a first generation's. Plugins of contract 0.1.0 give none.
    #[arg(long, conflicts_with = "out_dir")]
    status: bool,
    /// Where compiled plugins are cached.
    #[arg(long, value_name = "DIR", env = "XDST_PLUGIN_CACHE")]
    plugin_cache: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Json,
    Yaml,
}

/// `$XDG_CACHE_HOME/xdst/plugins`, or `~/.cache/xdst/plugins`.
fn default_plugin_cache() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("xdst/plugins"))
}

const SERVE_HELP: &str = "\
Intent and plugins (--intent DIR --plugins DIR):
  Intent documents are YAML (--- between documents) or JSON, each
      kind: Service
      metadata: {name: echo}
      spec: {...}
  and each kind is translated by the plugin that declares it (a *.wasm file in the plugins
  directory; see `xdst translate --help` to try them without serving). Both directories are
  watched: an edit re-translates what changed and pushes it; a bad edit or a plugin that
  fails is logged, counted in /metrics and shown in /debug/plugins, and changes nothing
  that was serving. Plugin settings go in NAME.yaml beside NAME.wasm:
      config: {...}        # handed to the plugin
      limits: {deadlineMs: 2000, memoryMiB: 256, outputMiB: 64, fuel: null}
      priority: 0          # patch plugins run in ascending priority, then by name
      failurePolicy: fail-closed   # or fail-open: a failing patch plugin is skipped
      capabilities: []     # clocks, random (otherwise a stopped clock, fixed random bytes)
      sha256: null         # the digest the .wasm must have

Configuration file (--config xdst.yaml):
  Every flag above in camelCase (xdsAddr, planGrace, ...; flags given here win), and a
  `plugins` list instead of --plugins DIR: each plugin by name, from a path, an https:// URL
  or oci://REGISTRY/REPOSITORY:TAG (or @sha256:...), with the settings above inline.
  Tags and URLs are resolved to a digest at start and on reload (POST /reload, SIGHUP or an
  edit of the file), then cached by digest. See examples/xdst.yaml; `xdst plugin push`
  publishes a plugin to a registry.

Resources directory (--resources DIR), instead of intent:
  Every *.yaml, *.yml and *.json file directly in DIR is served to every node. A file holds
  one or more Envoy resources (YAML documents separated by ---, or a JSON object, array, or
  {\"resources\": [...]}) in canonical proto3 form with an \"@type\", as in Envoy's own config:
      \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster
  A subdirectory DIR/<group>/ adds resources for the nodes of that group only.
  Edits are applied live; a bad edit is logged with its file, document and field and
  changes nothing that was serving.

Pointing Envoy at xdst (bootstrap):
  dynamic_resources:
    ads_config: {api_type: GRPC, transport_api_version: V3,
                 grpc_services: [{envoy_grpc: {cluster_name: xds_cluster}}]}
    cds_config: {ads: {}, resource_api_version: V3}
    lds_config: {ads: {}, resource_api_version: V3}
  with a static xds_cluster (http2_protocol_options: {}) at --xds-addr. DELTA_GRPC works too.

Logging: RUST_LOG (default info), e.g. RUST_LOG=xdst=debug.";

use crate::units::parse_duration;

/// Runs the command line and returns what the process exits with.
pub fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Serve(mut settings) => {
            if let Some(file) = settings.config.clone() {
                let given = matches.subcommand_matches("serve").expect("serve");
                let from_file = settings::Settings::read_file(&file)?;
                settings.merge(from_file, given);
            }
            tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(*settings))
        }
        Command::Validate { resources } => {
            let (p, files) = source::load(&resources, xdst_core::files::DEFAULT_MAX_TEXT_BYTES)?;
            let cache = Cache::new();
            let total = p.default.len();
            let groups = p.groups.len();
            cache.publish(p)?;
            println!("{}: {files} files, {total} resources, {groups} node groups: ok", resources.display());
            Ok(())
        }
        Command::Translate(args) => translate(args),
        Command::Plugin(cmd) => plugin(cmd),
        Command::Store(cmd) => store(cmd),
        Command::Wait { change, timeout, group, admin, token_file } => {
            let token = match token_file {
                Some(f) => Some(
                    std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?.trim().to_owned(),
                ),
                None => None,
            };
            let code = crate::cli::wait::run(&crate::cli::wait::WaitArgs { admin, change, timeout, group, token });
            std::process::exit(code)
        }
    }
}

fn store(cmd: StoreCommand) -> anyhow::Result<()> {
    let (StoreCommand::Import { store, .. } | StoreCommand::Export { store, .. }) = &cmd;
    let config = crate::generate::store::StoreConfig::parse(store).map_err(|e| anyhow::anyhow!("--store {e}"))?;
    let url = config.url();
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async move {
        let etcd = crate::generate::store::etcd::Etcd::connect(config).await?;
        use crate::generate::store::transfer;
        match &cmd {
            StoreCommand::Import { dir, plugins, .. } => {
                // Both are checked before either is written.
                let list = plugins.as_deref().map(transfer::read_plugins_list).transpose()?;
                if let Some(dir) = dir {
                    let moved = transfer::import(&etcd, dir).await?;
                    println!("{} documents imported into {url} ({} already the same)", moved.written, moved.unchanged);
                }
                if let (Some(file), Some(list)) = (plugins, list) {
                    let changed = transfer::import_plugins(&etcd, list).await?;
                    let what = if changed { "imported into" } else { "already the same in" };
                    println!("the plugins list of {} {what} {url}", file.display());
                }
            }
            StoreCommand::Export { dir, plugins, .. } => {
                if let Some(dir) = dir {
                    let moved = transfer::export(&etcd, dir).await?;
                    println!("{} documents exported from {url} ({} already the same)", moved.written, moved.unchanged);
                }
                if let Some(file) = plugins {
                    transfer::export_plugins(&etcd, file).await?;
                    println!("the plugins list of {url} written to {}", file.display());
                }
            }
        }
        Ok(())
    })
}

fn plugin(cmd: PluginCommand) -> anyhow::Result<()> {
    use crate::cli::plugin_tool as tool;
    match cmd {
        PluginCommand::New { lang, name, kind, dir, incremental } => {
            let dir = tool::new(lang, &name, kind.as_deref(), dir.as_deref(), incremental)?;
            println!(
                "created {} ({} plugin {name}); next:\n  xdst plugin build {}\n  xdst plugin test {}/build/{name}.wasm --cases {}/cases",
                dir.display(),
                lang.id(),
                dir.display(),
                dir.display(),
                dir.display()
            );
            Ok(())
        }
        PluginCommand::Build { dir, out, plugin_cache } => {
            let out = tool::build(&dir, out.as_deref(), plugin_cache.or_else(default_plugin_cache))?;
            println!("{}", out.display());
            Ok(())
        }
        PluginCommand::Test { plugin, cases, bless, plugin_cache } => {
            let results = tool::test(&plugin, &cases, bless, plugin_cache.or_else(default_plugin_cache))?;
            let failed: Vec<_> = results.iter().filter(|r| r.failure.is_some()).collect();
            for r in &results {
                match &r.failure {
                    None if bless => println!("blessed {}", r.case),
                    None => println!("ok      {}", r.case),
                    Some(f) => println!("FAILED  {}\n{f}", r.case),
                }
            }
            println!("{} cases: {} passed, {} failed", results.len(), results.len() - failed.len(), failed.len());
            if !failed.is_empty() {
                anyhow::bail!(
                    "{} of {} cases failed (if the new output is intended: --bless)",
                    failed.len(),
                    results.len()
                );
            }
            Ok(())
        }
        PluginCommand::Push { plugin, target, insecure_registry, sign, plugin_cache } => {
            let r = tool::push(
                &plugin,
                &target,
                insecure_registry,
                sign.as_deref(),
                plugin_cache.or_else(default_plugin_cache),
            )?;
            println!(
                "pushed {} to {}\n  manifest {}\n  sha256   {}\n  pinned   {}",
                r.name, r.target, r.manifest, r.digest, r.pinned
            );
            if let Some(tag) = &r.signature {
                println!("  signed   {tag}");
            }
            Ok(())
        }
        PluginCommand::Sign { plugin, key, out } => {
            let bytes = std::fs::read(&plugin).with_context(|| format!("reading {}", plugin.display()))?;
            let digest = xdst_plugin::digest(&bytes);
            let sig = crate::generate::plugins::distribution::sign(&key, &digest)?;
            let out = out.unwrap_or_else(|| PathBuf::from(format!("{}.sig", plugin.display())));
            std::fs::write(&out, format!("{sig}\n")).with_context(|| format!("writing {}", out.display()))?;
            println!("signed {digest}\n  {}", out.display());
            Ok(())
        }
        PluginCommand::Inspect { plugin, json, plugin_cache } => {
            let i = tool::inspect(&plugin, plugin_cache.or_else(default_plugin_cache))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&i)?);
            } else {
                print!("{i}");
            }
            Ok(())
        }
    }
}

fn translate(args: TranslateArgs) -> anyhow::Result<()> {
    use crate::cli::translate as t;
    let cache = args.plugin_cache.or_else(default_plugin_cache);
    let (out, plugins, documents) = match (&args.config, &args.intent, &args.plugins) {
        (Some(file), intent, _) => t::run_config(file, intent.as_deref(), &args.node_group, cache)?,
        (None, Some(intent), Some(plugins)) => t::run(intent, plugins, &args.node_group, cache)?,
        _ => anyhow::bail!("give --intent DIR --plugins DIR, or --config FILE"),
    };
    for (plugin, d) in &out.diagnostics {
        eprintln!(
            "{plugin}: {}{}{}",
            d.document.as_ref().map(|x| format!("{x}: ")).unwrap_or_default(),
            d.field.as_ref().map(|x| format!("field {x}: ")).unwrap_or_default(),
            d.message
        );
    }
    let counts: Vec<String> =
        out.snapshot.types().map(|(ty, s)| format!("{} {}", s.len(), xdst_core::types::short_name(ty))).collect();
    let summary = format!(
        "{documents} documents, {} plugins ({}): {} (version {})",
        plugins.len(),
        plugins.iter().map(|p| format!("{} {}", p.name, p.plugin.info().version)).collect::<Vec<_>>().join(", "),
        if counts.is_empty() { "no resources".into() } else { counts.join(", ") },
        out.snapshot.version()
    );
    match &args.out_dir {
        Some(dir) => {
            let files = t::write_out_dir(&out.snapshot, dir)?;
            eprintln!("{summary}");
            for f in files {
                eprintln!("wrote {}", f.display());
            }
        }
        None => {
            eprintln!("{summary}");
            let text = match (args.status, args.format) {
                (true, format) => {
                    // Stamped as `serve` stamps a first generation's (every condition new).
                    let now = xdst_core::intent::creation_timestamp(std::time::SystemTime::now());
                    let none = xdst_plugin::pipeline::Statuses::new();
                    let statuses = crate::generate::intent::conditions::stamped(&out.statuses, &none, &none, &now);
                    t::render_statuses(&statuses, matches!(format, Format::Json))
                }
                (false, Format::Json) => t::render_json(&out.snapshot),
                (false, Format::Yaml) => t::render_yaml(&out.snapshot),
            };
            use std::io::Write;
            std::io::stdout().lock().write_all(text.as_bytes())?;
        }
    }
    Ok(())
}

async fn serve(mut settings: settings::Settings) -> anyhow::Result<()> {
    settings.plugin_cache = settings.plugin_cache.or_else(default_plugin_cache);
    if settings.admin_token_file.is_none() {
        settings.admin_token =
            std::env::var("XDST_ADMIN_TOKEN").ok().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    }
    let ready_file = settings.ready_file.clone();
    let server = crate::start(settings).await?;
    if let Some(path) = &ready_file {
        let body =
            serde_json::json!({"xds_addr": server.xds_addr.to_string(), "admin_addr": server.admin_addr.to_string()});
        xdst_core::files::write_atomic(path, body.to_string())
            .with_context(|| format!("writing --ready-file {}", path.display()))?;
    }
    #[cfg(unix)]
    {
        // SIGHUP: the same reload as POST /reload.
        let generating = server.generating.clone();
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("installing the SIGHUP handler")?;
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                if let Err(e) = crate::generate::reload::reload(&generating, "SIGHUP").await {
                    tracing::warn!(error = %e, "SIGHUP: reload failed");
                }
            }
        });
    }
    shutdown_signal().await;
    info!("shutting down");
    server.shutdown().await;
    info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3h").is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
