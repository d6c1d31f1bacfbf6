//! The `xdst` server: the protocol core of `xdst-core` wrapped in gRPC (ADS and per-type
//! services, SotW and Delta), REST fetch and CSDS, over TLS or mTLS; config from a watched
//! resources directory, or from intent (files, or etcd shared by replicas) translated by
//! plugins; and an admin port (the intent API, `/changes`, the status page, `/metrics`).
//!
//! The binary is a thin CLI over [`start`]; tests and embedders run the same server
//! in-process:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let server = xdst::start(xdst::Settings {
//!     xds_addr: "127.0.0.1:0".parse()?,
//!     admin_addr: "127.0.0.1:0".parse()?,
//!     resources: Some("examples/quickstart/resources".into()),
//!     ..Default::default()
//! })
//! .await?;
//! println!("xDS on {}", server.xds_addr);
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod admin;
pub mod cli;
pub mod generate;
pub mod units;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::info;
use xdst_core::cache::Cache;
use xdst_serve::{Serving, admission, identity, server, tls};

use crate::generate::plane::Plane;
use crate::generate::{Generating, intent, plugins, source, store};

pub use cli::settings::Settings;

/// The default for [`Settings::max_unlisted_node_groups`].
pub const DEFAULT_MAX_UNLISTED_NODE_GROUPS: usize = 100;

/// The default for [`Settings::max_request_size`]: Envoy's own requests are a few KiB.
pub const DEFAULT_MAX_REQUEST_SIZE: usize = 4 << 20;

/// Why the server did not start. Nothing was served.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Settings that contradict one another, or one that needs another; the text says which
    /// (it is what the operator is shown, with no cause below it).
    #[error("{0}")]
    Settings(String),
    #[error("--store {0}")]
    StoreUrl(#[source] store::StoreUrlError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("listing the intent in {url} (nothing to serve without it)")]
    ListIntent {
        url: String,
        #[source]
        cause: store::StoreError,
    },
    #[error(transparent)]
    Fetcher(#[from] plugins::distribution::FetchError),
    #[error(transparent)]
    PluginSet(#[from] store::plugins::StartError),
    #[error(transparent)]
    Plugins(#[from] xdst_plugin::PluginError),
    #[error(transparent)]
    ClientCa(#[from] tls::TlsError),
    #[error("loading the TLS certificate")]
    Certificate(#[source] tls::TlsError),
    #[error("loading {}", dir.display())]
    Resources {
        dir: std::path::PathBuf,
        #[source]
        cause: source::LoadError,
    },
    #[error("starting the generation thread")]
    GenerationThread(#[source] std::io::Error),
    /// The first generation failed on the setup (a plugin list's pin, signature or source, a
    /// directory), as a bad flag fails.
    #[error("translating intent")]
    Setup(#[source] intent::GenerationError),
    #[error("binding {flag} {addr}")]
    Bind {
        flag: &'static str,
        addr: SocketAddr,
        #[source]
        cause: std::io::Error,
    },
    #[error("reading {flag} {}", file.display())]
    Token {
        flag: &'static str,
        file: std::path::PathBuf,
        #[source]
        cause: std::io::Error,
    },
    #[error("{flag} {} is empty", file.display())]
    EmptyToken { flag: &'static str, file: std::path::PathBuf },
}

/// A running server.
pub struct Running {
    pub xds_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    /// The serving plane: nodes, rollouts, the cache, metrics.
    pub serving: Arc<Serving>,
    /// The generation plane: intent, plugins, the store, the change ledger.
    pub generating: Arc<Generating>,
    shutdown: tokio::sync::watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Ends every stream with UNAVAILABLE, stops accepting and drains connections.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Loads the resources directory (a bad one is an error: there is nothing to fall back
/// to yet), binds both ports and starts serving.
pub async fn start(settings: Settings) -> Result<Running, StartError> {
    let config = &settings;
    // What the settings name, read and parsed.
    let store_config = match &config.store.store {
        Some(url) => {
            let mut s = store::StoreConfig::parse(url).map_err(StartError::StoreUrl)?;
            s.max_documents = config.store.max_store_documents;
            s.tls = config.store.store_tls.clone();
            Some(s)
        }
        None => None,
    };
    let plugin_list = match (&config.plugin_list, &config.config) {
        (Some(_), Some(file)) => Some(file.clone()),
        (Some(_), None) => {
            return Err(StartError::Settings(
                "a `plugins` list is read from a configuration file: give its path (`config`)".into(),
            ));
        }
        (None, _) => None,
    };
    let tls_files = match (&config.tls.tls_cert, &config.tls.tls_key) {
        (Some(cert), Some(key)) => {
            Some(tls::TlsFiles { cert: cert.clone(), key: key.clone(), client_ca: config.tls.tls_client_ca.clone() })
        }
        (None, None) => None,
        _ => return Err(StartError::Settings("TLS needs both --tls-cert and --tls-key".into())),
    };
    let identities = identity::Rules(config.identities.clone().unwrap_or_default());
    let write_token = match &config.admin_token_file {
        Some(f) => Some(token_file(f, "--admin-token-file")?),
        None => config.admin_token.clone().filter(|t| !t.is_empty()),
    };
    let read_token = match &config.admin_read_token_file {
        Some(f) => Some(token_file(f, "--admin-read-token-file")?),
        None => None,
    };
    let mut namespace_tokens = Vec::new();
    for spec in &config.namespace_tokens {
        let Some((namespace, file)) = spec.split_once('=').filter(|(n, f)| !n.is_empty() && !f.is_empty()) else {
            return Err(StartError::Settings(format!("--namespace-token {spec:?}: expected NAMESPACE=FILE")));
        };
        namespace_tokens.push((namespace.to_owned(), token_file(std::path::Path::new(file), "--namespace-token")?));
    }
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let fetcher = || {
        let artifacts = match &config.plugin_cache {
            Some(c) => c.join("artifacts"),
            None => std::env::temp_dir().join(format!("xdst-artifacts-{}", std::process::id())),
        };
        plugins::distribution::Fetcher::new(artifacts, config.insecure_registries.clone(), config.ca_file.as_deref())
    };
    let plugins = match (&config.plugins, &plugin_list) {
        (Some(_), Some(f)) => {
            return Err(StartError::Settings(format!(
                "--plugins DIR cannot be combined with the plugins list of {}: give one",
                f.display()
            )));
        }
        (Some(dir), None) => Some(intent::PluginSet::Dir(dir.clone())),
        (None, Some(file)) => Some(intent::PluginSet::Config(
            plugins::list::ConfiguredPlugins::new(plugins::list::ListOrigin::File(file.clone()), fetcher()?)
                .with_max_file_size(config.max_file_size),
        )),
        (None, None) => None,
    };
    let (input, store) = match (&config.intent, &store_config) {
        (Some(_), Some(s)) => {
            return Err(StartError::Settings(format!(
                "--intent DIR cannot be combined with --store {}: intent comes from one place",
                s.url()
            )));
        }
        (Some(i), None) => (Some(intent::IntentInput::Dir(i.clone())), None),
        (None, Some(s)) => {
            let etcd = Arc::new(store::etcd::Etcd::connect(s.clone()).await?);
            let mirror = Arc::new(store::Mirror::new(s.url()));
            let n = store::sync::list_at_start(etcd.as_ref(), store::INTENT_DIR, &mirror)
                .await
                .map_err(|cause| StartError::ListIntent { url: s.url(), cause })?;
            info!(store = %s.url(), documents = n, revision = mirror.revision(), "intent listed from the store");
            // When each team key was created, as every replica reads it (issue 49, item 3).
            let births = Arc::new(store::Mirror::new(s.url()));
            store::sync::list_at_start(etcd.as_ref(), store::births::BIRTHS_DIR, &births)
                .await
                .map_err(|cause| StartError::ListIntent { url: s.url(), cause })?;
            mirror.set_births(births);
            (Some(intent::IntentInput::Store(mirror)), Some(etcd))
        }
        (None, None) => (None, None),
    };
    // Tasks that start before the first generation, and what they wake once there is a context.
    let mut early_tasks = Vec::new();
    let woken: Arc<std::sync::OnceLock<Arc<Generating>>> = Arc::default();
    // With a store and no plugins given here, the plugin set is the store's: a leader resolves
    // it, every replica runs what the leader wrote.
    let (plugins, held_set) = match (plugins, &store) {
        (None, Some(etcd)) => {
            let fetcher = fetcher()?;
            let replica = replica_name(config, config.xds_addr);
            let (held, tasks) = store::plugins::HeldSet::start(
                etcd.clone(),
                replica,
                fetcher.clone(),
                generation_request(woken.clone()),
                shutdown_rx.clone(),
            )
            .await?;
            early_tasks.extend(tasks);
            (Some(intent::PluginSet::Config(plugins::list::ConfiguredPlugins::new(held.origin(), fetcher))), Some(held))
        }
        (plugins, _) => (plugins, None),
    };
    // Wakes the generation loop: a remote plugin fetched, a periodic check that found a difference.
    let rescan = Arc::new(tokio::sync::Notify::new());
    let intent_source = match (input, plugins) {
        (Some(i), Some(p)) => {
            if config.resources.is_some() {
                return Err(StartError::Settings(
                    "--resources cannot be combined with --intent/--store and plugins: serve one source".into(),
                ));
            }
            let runtime = plugin_runtime(config, &rescan)?;
            let source = intent::IntentSource::new(i, p, xdst_plugin::dir::DirLoader::new(runtime))
                .with_max_store_documents(config.store.max_store_documents)
                .with_max_file_size(config.max_file_size)
                .with_full_reread(config.full_reread)
                .with_namespace_dirs(config.namespace_dirs)
                .with_namespace_keys(config.store.store_namespace_keys)
                .with_generations_file(beside_plugin_cache(config, "generations"))
                .with_served_file(beside_plugin_cache(config, "served"))
                .with_hold_on_nack(config.on_nack == cli::settings::OnNack::Hold)
                .with_nack_quorum(config.nack_quorum);
            Some(Arc::new(source))
        }
        (Some(_), None) => {
            return Err(StartError::Settings(
                "--intent or --store needs plugins: --plugins DIR, or a `plugins` list in --config".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(StartError::Settings(
                "plugins need --intent DIR or --store: the documents to translate".into(),
            ));
        }
        (None, None) => None,
    };
    let client_roots = client_roots(config, tls_files.as_ref(), &identities)?;
    let mut metrics = xdst_serve::metrics::Metrics::new();
    let generation_metrics = generate::metrics::GenerationMetrics::register(&mut metrics);
    let access = xdst_serve::access::Access {
        write_token,
        read_token: read_token.clone(),
        read_identities: config.admin_read_identities.clone(),
        open_metrics: config.open_metrics,
        namespace_tokens,
    };
    let identities = client_roots.is_some().then_some(identities);
    let serving = serving_plane(config, metrics, access, identities, intent_source.is_some(), shutdown_rx.clone());
    let plane = Arc::new(Plane {
        serving: serving.clone(),
        metrics: generation_metrics,
        changes: Default::default(),
        debounce: config.debounce,
        rescan,
        reloads: Default::default(),
        max_file_bytes: config.max_file_size,
        read_saw: Default::default(),
    });
    let generating = Arc::new(Generating {
        plane: plane.clone(),
        source: Default::default(),
        intent: intent_source.clone(),
        generations: Default::default(),
        store: store.clone(),
        plugin_set: held_set,
    });
    let _ = woken.set(generating.clone());
    if let Some(dir) = &config.resources {
        source::reload(&plane, &generating.source, dir)
            .map_err(|cause| StartError::Resources { dir: dir.clone(), cause })?;
    }
    if let Some(s) = &intent_source {
        first_generation(&generating, s, shutdown_rx.clone()).await?;
    }
    let tls = match &tls_files {
        Some(files) => Some(tls::Reloading::load(files.clone()).map_err(StartError::Certificate)?),
        None => None,
    };
    let bound = |flag, addr| move |cause| StartError::Bind { flag, addr, cause };
    let xds_listener = bind(config.xds_addr).map_err(bound("--xds-addr", config.xds_addr))?;
    let admin_listener =
        TcpListener::bind(config.admin_addr).await.map_err(bound("--admin-addr", config.admin_addr))?;
    let xds_addr = xds_listener.local_addr().map_err(bound("--xds-addr", config.xds_addr))?;
    let admin_addr = admin_listener.local_addr().map_err(bound("--admin-addr", config.admin_addr))?;
    info!(%xds_addr, %admin_addr, group_key = %config.node_group_key, tls = tls.is_some(), "xdst serving");
    let admin_authenticated = read_token.is_some() || !config.admin_read_identities.is_empty();
    warn_about_exposure(config, (xds_addr, client_roots.is_some()), (admin_addr, admin_authenticated), tls.is_some());

    let (xds_tls, admin_tls) = server_tls(tls.as_ref(), client_roots.as_ref());
    let xds_router = xdst_serve::routes(&serving, xds_addr);
    let admin_router = admin::routes(&generating, admin_addr);
    let mut tasks = vec![
        tokio::spawn(server::serve(
            "xds",
            xds_listener,
            xds_router,
            server::H2 {
                max_concurrent_streams: config.max_streams_per_connection,
                max_connections_per_client: config.max_connections_per_client,
                idle_timeout: config.idle_connection_timeout,
                ..Default::default()
            },
            xds_tls,
            serving.clone(),
            config.shutdown_grace,
        )),
        tokio::spawn(server::serve(
            "admin",
            admin_listener,
            admin_router,
            server::H2 {
                max_connections_per_client: config.max_connections_per_client,
                idle_timeout: config.idle_connection_timeout,
                ..Default::default()
            },
            admin_tls,
            serving.clone(),
            config.shutdown_grace,
        )),
    ];
    tasks.extend(early_tasks);
    tasks.push(tokio::spawn(xdst_serve::memory::return_freed(serving.clone())));
    if let Some(t) = tls {
        tasks.push(tokio::spawn(t.watch(shutdown_rx.clone())));
    }
    if let Some(dir) = config.resources.clone() {
        tasks.push(tokio::spawn(source::watch(plane.clone(), generating.source.clone(), dir, config.resync)));
    }
    if let (Some(etcd), Some(mirror)) = (store, intent_source.as_ref().and_then(|s| s.mirror().cloned())) {
        let store_reloads = plane.metrics.store_reloads.clone();
        let reloaded: Arc<dyn Fn(store::sync::Reload) + Send + Sync> = Arc::new(move |why| {
            let reason = match why {
                store::sync::Reload::Start => "start",
                store::sync::Reload::Compacted => "compacted",
                store::sync::Reload::Rewound => "rewound",
            };
            store_reloads.get_or_create(&xdst_serve::metrics::label("reason", reason)).inc();
        });
        let changed = generation_request(woken.clone());
        if let Some(births) = mirror.births() {
            let quiet: Arc<dyn Fn(store::sync::Reload) + Send + Sync> = Arc::new(|_| {});
            let dir = store::births::BIRTHS_DIR;
            let watch =
                store::sync::run(etcd.clone(), dir, births.clone(), changed.clone(), quiet, shutdown_rx.clone());
            tasks.push(tokio::spawn(watch));
            let keep = store::births::keep(etcd.clone(), mirror.clone(), births, shutdown_rx.clone());
            tasks.push(tokio::spawn(keep));
        }
        tasks.push(tokio::spawn(store::sync::run(
            etcd.clone(),
            store::INTENT_DIR,
            mirror,
            changed,
            reloaded,
            shutdown_rx.clone(),
        )));
        let replica = replica_name(config, xds_addr);
        tasks.push(tokio::spawn(store::fleet::publish(
            serving.clone(),
            generating.intent.clone(),
            etcd,
            replica,
            (xds_addr, admin_addr),
        )));
    }
    if let Some(s) = intent_source {
        tasks.push(tokio::spawn(intent::watch::watch(
            plane.clone(),
            s,
            config.resync,
            generation_request(woken.clone()),
        )));
    }
    Ok(Running { xds_addr, admin_addr, serving, generating, shutdown: shutdown_tx, tasks })
}

/// With a client CA (mTLS), the roots client certificates must chain to; identity rules need
/// one, and one needs rules.
fn client_roots(
    config: &Settings,
    tls_files: Option<&tls::TlsFiles>,
    identities: &identity::Rules,
) -> Result<Option<Arc<rustls::RootCertStore>>, StartError> {
    match tls_files.and_then(|t| t.client_ca.as_ref()) {
        Some(ca) => {
            if identities.0.is_empty() {
                return Err(StartError::Settings(
                    "mTLS (a client CA) needs `identities:` rules in the configuration file saying which node groups \
                     each client certificate may use (`- {identity: '*', groups: ['*']}` lets every certificate the \
                     CA signed read every group)"
                        .into(),
                ));
            }
            Ok(Some(tls::client_roots(ca)?))
        }
        None => {
            if !identities.0.is_empty() || !config.admin_read_identities.is_empty() {
                return Err(StartError::Settings(
                    "identity rules need mTLS: a client CA (`tls.clientCa`, --tls-client-ca)".into(),
                ));
            }
            Ok(None)
        }
    }
}

/// The serving plane, as the settings say.
fn serving_plane(
    config: &Settings,
    metrics: xdst_serve::metrics::Metrics,
    access: xdst_serve::access::Access,
    identities: Option<identity::Rules>,
    translated: bool,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Arc<Serving> {
    let cache = Cache::new();
    // With identity rules, the Secrets every group would get go to their proxies' groups only.
    if let Some(rules) = identities.clone() {
        cache.give_secrets_to(move |group| rules.gives_secrets(group));
    }
    Arc::new(Serving {
        cache,
        group_key: config.node_group_key.clone(),
        metrics,
        nodes: Default::default(),
        rollouts: xdst_serve::rollouts::Rollouts::new(xdst_core::rollout::RolloutConfig {
            grace: config.plan_grace,
            unordered: config.unsafe_unordered_push,
            drain: config.drain_time,
            hold_at_node: config.on_nack == cli::settings::OnNack::Hold,
            retry: config.nack_retry,
        })
        .with_canaries(config.canaries),
        shutdown,
        identities,
        refusal_log: Default::default(),
        nacks: xdst_serve::admission::Nacks::new(config.max_nack_analyses_per_minute, config.nack_holds_without_mtls),
        request_rate: admission::RequestRate {
            rate: config.max_requests_per_second,
            burst: config.max_requests_per_second.saturating_mul(10),
        },
        stream_admission: admission::StreamAdmission::new(config.max_new_streams_per_second),
        unread: xdst_serve::unread::Unread::new(config.max_unread_bytes_per_client),
        streams: Arc::new(xdst_serve::places::Streams::new(
            config.max_streams_per_client,
            config.idle_connection_timeout.min(xdst_serve::server::FIRST_REQUEST_TIMEOUT),
        )),
        node_groups: admission::NodeGroups {
            listed: config.node_groups.clone(),
            max_unlisted: config.max_unlisted_node_groups,
        },
        unlisted_groups: Default::default(),
        access,
        max_request_size: config.max_request_size,
        translated,
    })
}

/// Starts the generation thread and runs the first generation on it. One that fails on the
/// data leaves the server up and not ready; one that fails on the setup is the error.
async fn first_generation(
    generating: &Generating,
    source: &Arc<intent::IntentSource>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), StartError> {
    let (p, s2) = (generating.plane.clone(), source.clone());
    let generations = generate::generations::Generations::start(shutdown, move || {
        let _ = s2.generate(&p);
    })
    .map_err(StartError::GenerationThread)?;
    let generations = generating.generations.get_or_init(|| generations);
    // A first generation that fails on the data (a document, a store key that is not
    // UTF-8, a plugin that fails or sleeps past its deadline on them) is reported like any
    // other, and the ports open all the same: nothing is served yet and `/readyz` says
    // not ready until a good generation, but a fix applies as soon as it is written,
    // operators and probes can see why, and a rolling restart of replicas stops at this
    // one instead of losing the fleet. One that fails on the setup (a plugin list's pin,
    // signature or source, the directories) is fatal, as a bad flag is.
    let (p, s2) = (generating.plane.clone(), source.clone());
    match generations.run(move || s2.generate(&p)).await {
        Some(Ok(())) => {}
        Some(Err(e)) if e.is_setup() => return Err(StartError::Setup(e)),
        Some(Err(e)) => tracing::error!(
            error = %e.message(),
            "the first generation failed: serving nothing, and not ready, until a good one"
        ),
        None => tracing::error!("the first generation did not finish: serving nothing until a good one"),
    }
    Ok(())
}

/// Where what a server keeps of its intent source across restarts goes: beside the plugin cache
/// (`<cache>/../<what>/`: the generations of documents that carry none, what each node group
/// was served), one file per intent source (a digest of its directory or store URL), so two
/// servers of two sources never share one. Without a plugin cache, none: they start afresh.
fn beside_plugin_cache(config: &Settings, what: &str) -> Option<std::path::PathBuf> {
    let source = match (&config.intent, &config.store.store) {
        (Some(dir), _) => std::path::absolute(dir).unwrap_or_else(|_| dir.clone()).display().to_string(),
        (None, Some(url)) => url.clone(),
        (None, None) => String::new(),
    };
    let digest = xdst_core::resource::content_version("xdst.generations", source.as_bytes());
    let base = config.plugin_cache.as_deref().and_then(std::path::Path::parent)?;
    Some(base.join(what).join(format!("{digest}.json")))
}

/// The plugin host, with the settings' cache, fuel and text bounds; a periodic check that finds
/// an incremental plugin's output must be replaced wakes the generation loop (`rescan`).
fn plugin_runtime(
    config: &Settings,
    rescan: &Arc<tokio::sync::Notify>,
) -> Result<xdst_plugin::Runtime, xdst_plugin::PluginError> {
    let rescan = rescan.clone();
    xdst_plugin::Runtime::new(xdst_plugin::RuntimeConfig {
        cache_dir: config.plugin_cache.clone(),
        fuel: config.fuel,
        text: xdst_plugin::TextLimits {
            message_bytes: config.max_plugin_message,
            diagnostics: config.max_plugin_diagnostics,
            log_lines: config.max_plugin_log_lines,
            stdio_bytes: config.max_plugin_stdio,
        },
        full_translation_every: config.full_translation_every,
        full_translation_spacing: config.full_translation_spacing,
        wake: xdst_plugin::Wake(Some(Arc::new(move || rescan.notify_one()))),
    })
}

/// Warns about a port that listens beyond this host to clients it does not authenticate,
/// and about `--unsafe-unordered-push`. `xds` and `admin`: the address and whether clients
/// are authenticated there.
fn warn_about_exposure(config: &Settings, xds: (SocketAddr, bool), admin: (SocketAddr, bool), tls: bool) {
    for (port, addr, authenticated) in [("xDS", xds.0, xds.1), ("admin", admin.0, admin.1)] {
        if !addr.ip().is_loopback() && !authenticated {
            tracing::warn!(
                %addr,
                tls,
                "the {port} port listens beyond this host and clients are not authenticated: anyone who reaches it \
                 is served (xDS: any node group's resources, Secrets included; admin: every read)"
            );
        }
    }
    if config.unsafe_unordered_push {
        tracing::warn!(
            "--unsafe-unordered-push: changes are pushed without make-before-break ordering; requests may fail while Envoy applies them"
        );
    }
}

/// The TLS settings of the xDS and the admin port: both serve the same certificate (one
/// resolver); with mTLS the xDS port requires a client certificate and the admin port takes
/// one if offered (tokens work there too).
fn server_tls(
    tls: Option<&Arc<tls::Reloading>>,
    client_roots: Option<&Arc<rustls::RootCertStore>>,
) -> (Option<Arc<rustls::ServerConfig>>, Option<Arc<rustls::ServerConfig>>) {
    match (tls, client_roots) {
        (Some(t), Some(roots)) => (
            Some(tls::server_config(t.clone(), tls::ClientAuth::Required(roots.clone()))),
            Some(tls::server_config(t.clone(), tls::ClientAuth::Optional(roots.clone()))),
        ),
        (Some(t), None) => {
            let c = tls::server_config(t.clone(), tls::ClientAuth::None);
            (Some(c.clone()), Some(c))
        }
        (None, _) => (None, None),
    }
}

/// This replica's name in the fleet view and the plugin election: `--replica-id`, or
/// HOSTNAME:XDS_PORT (HOSTNAME:pid-PID while the port is yet to be chosen).
fn replica_name(config: &Settings, xds_addr: SocketAddr) -> String {
    config.replica_id.clone().unwrap_or_else(|| match xds_addr.port() {
        0 => format!("{}:pid-{}", hostname(), std::process::id()),
        port => format!("{}:{port}", hostname()),
    })
}

/// Asks for a generation once there is a context (a store change seen before the first
/// generation is in the listing that generation reads).
fn generation_request(generating: Arc<std::sync::OnceLock<Arc<Generating>>>) -> Arc<dyn Fn() + Send + Sync> {
    Arc::new(move || {
        if let Some(g) = generating.get().and_then(|g| g.generations.get()) {
            g.request();
        }
    })
}

/// A token from a file (trailing newline trimmed); an empty file is an error naming `flag`.
fn token_file(file: &std::path::Path, flag: &'static str) -> Result<String, StartError> {
    let token = std::fs::read_to_string(file).map_err(|cause| StartError::Token { flag, file: file.into(), cause })?;
    let token = token.trim().to_owned();
    if token.is_empty() {
        return Err(StartError::EmptyToken { flag, file: file.into() });
    }
    Ok(token)
}

/// This machine's name, for the default replica id.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// A listener with a deep accept queue: a fleet reconnecting at once (after a restart) must
/// not overflow it while the workers are busy, or clients wait for SYN retransmits (1 s, 3 s).
fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096) // capped by net.core.somaxconn
}
