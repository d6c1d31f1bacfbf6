//! The one settings type of `xdst serve`: every flag, and the configuration file's schema
//! (`--config xdst.yaml`, every flag in camelCase and the `plugins` list; see
//! `examples/xdst.yaml`), merged once (see [`Settings::merge_file`]).
//!
//! [`crate::start`] takes a [`Settings`]; an embedder fills one in code
//! (`Settings { xds_addr, ..Default::default() }`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use xdst_core::node::GroupKey;

use crate::generate::plugins::entry::ConfigError;

/// Defines a settings struct and its merge: every field is `flag` (a command-line argument
/// whose id is the field's name, or a key of the file), `group` (flattened arguments that are a
/// nested map in the file), `file` (the file only) or `cli` (the command line or the embedder
/// only). A field cannot be added without saying how it is merged.
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $kind:ident $field:ident : $ty:ty,
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// Keeps what the command line or the environment gave (`given`), and takes every
            /// other setting from `file` (its value, or the default when it does not name it).
            pub fn merge_file(&mut self, file: $name, given: &clap::ArgMatches) {
                let (this, file) = (self, file);
                $( settings!(@merge $kind, this.$field, file.$field, given, stringify!($field)); )*
            }
        }
    };
    (@merge flag, $this:expr, $file:expr, $given:ident, $id:expr) => {
        if !given_here($given, $id) {
            $this = $file;
        }
    };
    (@merge group, $this:expr, $file:expr, $given:ident, $id:expr) => {
        $this.merge_file($file, $given);
    };
    (@merge file, $this:expr, $file:expr, $given:ident, $id:expr) => {
        $this = $file;
    };
    (@merge cli, $this:expr, $file:expr, $given:ident, $id:expr) => {
        let _ = ($file, $id);
    };
}

/// `--on-nack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnNack {
    /// Hold the documents the rejection blames; the rest goes on.
    #[default]
    Hold,
    /// Stop sending the rejected type to the node until the next change.
    Stop,
}

/// Whether the argument `id` came from the command line or its environment variable.
fn given_here(given: &clap::ArgMatches, id: &str) -> bool {
    use clap::parser::ValueSource;
    matches!(given.value_source(id), Some(ValueSource::CommandLine | ValueSource::EnvVariable))
}

settings! {
    /// Everything `xdst serve` can be told.
    #[derive(Debug, Clone, clap::Args, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase", default)]
    pub struct Settings {
    /// A configuration file (YAML or JSON) with any of these flags (camelCase: xdsAddr,
    /// planGrace, ...) and the `plugins` list: each plugin from a path, an https:// URL or an
    /// OCI registry, with its sha256 pin, limits, capabilities, config, priority and failure
    /// policy. Flags given here win over the file. See examples/xdst.yaml.
    #[arg(long, value_name = "FILE", env = "XDST_CONFIG")]
    #[serde(skip)]
    cli config: Option<PathBuf>,
    /// Address for xDS: gRPC (ADS, per-type services) and REST (POST /v3/discovery:*).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:18000", env = "XDST_XDS_ADDR")]
    flag xds_addr: SocketAddr,
    /// Address for the admin HTTP server: /healthz, /metrics, /debug/nodes, /debug/resources,
    /// /debug/plugins.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:19000", env = "XDST_ADMIN_ADDR")]
    flag admin_addr: SocketAddr,
    /// Directory of Envoy resources to serve (watched for changes). Without it, xdst
    /// serves an empty set.
    #[arg(long, value_name = "DIR", env = "XDST_RESOURCES", conflicts_with_all = ["intent", "plugins"])]
    flag resources: Option<PathBuf>,
    /// Directory of intent documents to translate with --plugins (watched for changes).
    #[arg(long, value_name = "DIR", env = "XDST_INTENT", conflicts_with = "store")]
    flag intent: Option<PathBuf>,
    /// Intent in etcd (`--store`, `--max-store-documents`; in the file `store: {url, tls,
    /// maxDocuments}`).
    #[command(flatten)]
    group store: StoreSettings,
    /// With --store: this replica's name in the fleet view (/debug/nodes?fleet=true on any
    /// replica shows every replica's nodes; a replica drops out 10 s after it stops)
    /// [default: HOSTNAME:XDS_PORT].
    #[arg(long, value_name = "NAME", env = "XDST_REPLICA_ID")]
    flag replica_id: Option<String>,
    /// Directory of plugins (*.wasm) that translate --intent (watched for changes: plugins
    /// hot-reload without dropping streams).
    #[arg(long, value_name = "DIR", env = "XDST_PLUGINS")]
    #[serde(rename = "pluginsDir")]
    flag plugins: Option<PathBuf>,
    /// The `plugins` list of the configuration file (its entries are read again on reload).
    #[arg(skip)]
    #[serde(rename = "plugins")]
    file plugin_list: Option<Vec<crate::generate::plugins::entry::PluginEntry>>,
    /// Where compiled plugins are cached, by SHA-256 [default: ~/.cache/xdst/plugins].
    #[arg(long, value_name = "DIR", env = "XDST_PLUGIN_CACHE")]
    flag plugin_cache: Option<PathBuf>,
    /// Meter fuel so plugins' `limits.fuel` applies (deterministic budgets; slower).
    #[arg(long)]
    flag fuel: bool,
    /// How nodes are grouped; each group can be served its own set: `cluster` (node.cluster),
    /// `id` (node.id) or `metadata:<key>` (a string in node.metadata).
    #[arg(long, value_name = "KEY", default_value = "cluster")]
    #[serde(deserialize_with = "crate::units::group_key")]
    flag node_group_key: GroupKey,
    /// The largest intent, resources or configuration file xdst reads (bytes, or with KiB,
    /// MiB, GiB). A larger file is refused, naming it, and what was serving stays. A parsed
    /// file takes up to about forty times its size in memory.
    #[arg(long, value_name = "SIZE", default_value = "8MiB", value_parser = crate::units::parse_size)]
    #[serde(deserialize_with = "crate::units::size")]
    flag max_file_size: usize,
    /// The largest xDS request accepted: a gRPC message (a larger one ends that stream with
    /// OUT_OF_RANGE) or a REST body (answered 413). Envoy's own requests are a few KiB.
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = crate::units::parse_size)]
    #[serde(deserialize_with = "crate::units::size")]
    flag max_request_size: usize,
    /// HTTP/2 streams one xDS connection may have open at once. Envoy opens one ADS stream
    /// (or one per type); a client asking for more waits for one to close, as HTTP/2 has it.
    #[arg(long, value_name = "N", default_value_t = xdst_serve::server::DEFAULT_MAX_STREAMS_PER_CONNECTION)]
    flag max_streams_per_connection: u32,
    /// Connections one client may have open on a port: a client is its certificate identity
    /// with mTLS, else its IP address (proxies behind one NAT address share it). At the
    /// limit, the oldest of its connections that carries nothing but xDS streams without a
    /// complete request (or nothing at all) is closed for the new one
    /// (xdst_refusals_total{reason="evicted_connection"}); when each carries a request, the new
    /// one is closed at once, counted in xdst_refusals_total and logged.
    #[arg(long, value_name = "N", default_value_t = xdst_serve::server::DEFAULT_MAX_CONNECTIONS_PER_CLIENT)]
    flag max_connections_per_client: usize,
    /// xDS streams one client may have open across its connections (a client as for
    /// --max-connections-per-client). A stream counts once its first request is complete; one
    /// past the limit is ended with RESOURCE_EXHAUSTED, counted in
    /// xdst_refusals_total{reason="streams_per_client"} and logged. Streams that have not
    /// sent a complete request hold no place: each is closed if it sends none within
    /// --idle-connection-timeout (at most 10s), at most as many again are kept per client (the
    /// oldest closed first), and a connection carrying nothing else is the first closed when
    /// its client's connections are all taken. So a client whose streams never finish a
    /// request cannot lock out the others of its address. 4096 is four streams on each of
    /// 1,024 connections: a fleet of 1,024 Envoys behind one address with LDS, RDS, CDS and
    /// EDS streams of their own fits (with one ADS stream each, four times over), while one
    /// client costs what 4,096 streams cost, not 131,072 (1,024 connections of 128).
    #[arg(long, value_name = "N", default_value_t = xdst_serve::places::Streams::DEFAULT_MAX)]
    flag max_streams_per_client: usize,
    /// Bytes of xDS responses one client may have unread (a client as for
    /// --max-connections-per-client; bytes, or with KiB, MiB, GiB): handed to its connections
    /// and not yet written out to them, because it does not read or reads slowly. HTTP/2 flow
    /// control stops what is sent to such a client, not what is queued for it: each of its
    /// streams would pin a whole response. A response that does not fit waits for room (a
    /// larger one goes when nothing else of the client is unread), and while one waits, the
    /// client's streams whose bytes have not moved for 2s are reset (RST_STREAM
    /// ENHANCE_YOUR_CALM, which gRPC clients report as RESOURCE_EXHAUSTED), counted in
    /// xdst_refusals_total{reason="unread_bytes"} and logged. A client that reads is never
    /// reset: at 10 Gbit/s 64 MiB is 50 ms of sending, so a fleet behind one address
    /// reconnecting at once is only paced, while a client that stops reading pins at most
    /// this. 0: no limit.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = crate::units::parse_size_or_off)]
    #[serde(deserialize_with = "crate::units::size_or_off")]
    flag max_unread_bytes_per_client: usize,
    /// A connection with no request in flight for this long is closed, and a new one must
    /// start its first request within this (at most 10s): a connection that asks for nothing
    /// holds no place under --max-connections-per-client. An Envoy's or a gRPC client's xDS
    /// connection always carries its stream. Counted in
    /// xdst_refusals_total{reason="idle_connection"}. An xDS stream must send its first
    /// complete request within this too (at most 10s), or it is closed with
    /// DEADLINE_EXCEEDED (xdst_refusals_total{reason="first_request"}).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::units::parse_duration)]
    #[serde(deserialize_with = "crate::units::duration")]
    flag idle_connection_timeout: Duration,
    /// Requests one xDS stream may send a second, on average; ten times as many at once. A
    /// stream beyond is ended with RESOURCE_EXHAUSTED. Envoy sends one per response it
    /// answers and one per subscription change. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = xdst_serve::admission::RequestRate::DEFAULT.rate)]
    flag max_requests_per_second: u32,
    /// New xDS streams admitted a second, a tenth of that at once; a stream beyond waits for
    /// its turn (in arrival order) before its first request is read, and none is refused.
    /// When a whole fleet reconnects at once (xdst restarted, a partition healed), the first
    /// streams are then served at once instead of every stream sharing the cores with all
    /// the others. Waits are counted in xdst_stream_admission_waits_total. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = xdst_serve::admission::StreamAdmission::DEFAULT_RATE)]
    flag max_new_streams_per_second: u32,
    /// The node groups xdst serves as their own (comma-separated, exact or ending in `*`).
    /// A node naming another group (in node.cluster, or the --node-group-key) is served the
    /// default set, untranslated for it. Groups of the resources directory (its
    /// subdirectories) and of the identity rules are listed too. Without a list, groups are
    /// created as nodes name them, up to --max-unlisted-node-groups.
    #[arg(long, value_name = "PATTERNS", value_delimiter = ',')]
    flag node_groups: Vec<xdst_serve::identity::Pattern>,
    /// Without --node-groups: how many node groups nodes may create by naming them (each
    /// is translated for) within 10 minutes; a node naming one more is served the default
    /// set, logged and counted in xdst_refusals_total{reason="node_group"}. A group stays
    /// its own while a node of it is connected.
    #[arg(long, value_name = "N", default_value_t = crate::DEFAULT_MAX_UNLISTED_NODE_GROUPS)]
    flag max_unlisted_node_groups: usize,
    /// The most of one plugin error, diagnostic or log message kept; the rest is cut, noting
    /// the full length.
    #[arg(long, value_name = "SIZE", default_value = "4KiB", value_parser = crate::units::parse_size)]
    #[serde(deserialize_with = "crate::units::size")]
    flag max_plugin_message: usize,
    /// Diagnostics kept from one plugin call; the rest are counted in one more.
    #[arg(long, value_name = "N", default_value_t = 20)]
    flag max_plugin_diagnostics: usize,
    /// An incremental plugin (contract 0.4.0) is sent only what changed, in the instance kept
    /// from its last call; every N calls it gets a full call instead, in a fresh instance, whose
    /// output is compared with what the changes calls built (a difference is logged, counted in
    /// xdst_incremental_mismatches_total, and the full output served).
    #[arg(long, value_name = "N", default_value_t = xdst_plugin::incremental::DEFAULT_FULL_EVERY, value_parser = clap::value_parser!(u32).range(1..))]
    flag full_translation_every: u32,
    /// The least time between two of those full calls of one plugin, however fast changes
    /// come: the check translates everything, so its cost is bounded in time, not in changes
    /// (0s: no floor; a stale cache is then served for N changes calls at most).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::units::parse_duration)]
    #[serde(deserialize_with = "crate::units::duration")]
    flag full_translation_spacing: Duration,
    /// Log lines kept from one plugin call; the rest are dropped and counted.
    #[arg(long, value_name = "N", default_value_t = 100)]
    flag max_plugin_log_lines: usize,
    /// Bytes of stdout, and of stderr, kept from one plugin call; the rest are dropped and
    /// counted (the plugin goes on running).
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = crate::units::parse_size)]
    #[serde(deserialize_with = "crate::units::size")]
    flag max_plugin_stdio: usize,
    /// Quiet window that merges a burst of resource changes into one push.
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = crate::units::parse_duration)]
    #[serde(deserialize_with = "crate::units::duration")]
    flag debounce: Duration,
    /// How often the watched directories (resources, intent, plugins) are rescanned in case a
    /// change notification was lost.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::units::parse_duration)]
    #[serde(deserialize_with = "crate::units::duration")]
    flag resync: Duration,
    /// How often every intent file is read again, whatever its size and times say: a file
    /// whose size, inode and times are those of its last read (and had been still for 3 s) is
    /// otherwise not opened again, and an edit through a shared `mmap` moves none of them.
    /// `POST /reload` and SIGHUP read every file again too. 0: only on those.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::units::parse_duration)]
    #[serde(deserialize_with = "crate::units::duration")]
    flag full_reread: Duration,
    /// On SIGINT/SIGTERM, how long open connections get before they are closed.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::units::parse_duration)]
    #[serde(deserialize_with = "crate::units::duration")]
    flag shutdown_grace: Duration,
    /// Make-before-break: how long a node's rollout waits for an ACK before it proceeds
    /// without it (logged, and counted in xdst_plan_grace_expired_total). A change goes out
    /// in one round trip unless it names something new to the node: a route configuration
    /// waits for the new clusters (and endpoints) it names, a listener for what it names, and
    /// a cluster is removed only once nothing the node holds names it.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::units::parse_duration, env = "XDST_PLAN_GRACE")]
    #[serde(deserialize_with = "crate::units::duration")]
    flag plan_grace: Duration,
    /// Make-before-break: how long the clusters a removed or changed listener named are kept
    /// after the node acknowledges the change. Envoy keeps serving that listener's open
    /// connections, with the routes it had, for its --drain-time-s (600 s by default): set
    /// this to the same value. 0 keeps them only while the node still asks for a route
    /// configuration naming them.
    #[arg(long, value_name = "DURATION", default_value = "600s", value_parser = crate::units::parse_duration)]
    #[serde(deserialize_with = "crate::units::duration")]
    flag drain_time: Duration,
    /// Push every change to every node at once, without make-before-break ordering. Unsafe:
    /// a route can reach Envoy before the cluster it names, and a cluster can be removed
    /// while a route still sends traffic to it. For demonstrations and tests only.
    #[arg(long)]
    flag unsafe_unordered_push: bool,
    /// What a node's rejection (NACK) of a response does. `hold`: the intent documents whose
    /// content in it is new to the node are held back at that node alone (several are tried
    /// in halves until the one it rejects alone is found), and every other change goes on, to
    /// it and to every other node; a document is held for a whole node group only when the
    /// group's own proxies reject it together (--nack-quorum, identity rules with `proxy:
    /// true`, --nack-holds-without-mtls). A held document is tried again once it changes (and
    /// at a node after --nack-retry). `stop`: the node keeps its last good state and gets
    /// nothing more of the rejected type until the next change (every team's changes wait for
    /// it). See docs/design/016-one-teams-mistake.md, part 3.
    #[arg(long, value_enum, value_name = "hold|stop", default_value = "hold")]
    flag on_nack: OnNack,
    /// How many of a node group's connected proxies (those that acknowledged anything) must
    /// reject a document, each alone, for it to be held for the whole group: `all`, a number,
    /// or a share (`50%`). A document new to them is left out for the group only when all of
    /// them rejected it. Held at the version they last accepted; the rest of the group's
    /// nodes then get that version too.
    #[arg(long, value_name = "all|N|P%", default_value = "all", value_parser = crate::units::parse_quorum)]
    #[serde(deserialize_with = "crate::units::quorum")]
    flag nack_quorum: xdst_core::node_holds::Quorum,
    /// Without mTLS, count every client as its node group's proxy: its rejections then count
    /// toward holding a document for the whole group. Off by default because it lets any
    /// client that can reach the xDS port and name a group (a test client, a misconfigured
    /// Envoy, an attacker) hold that group's documents for everyone in it. With mTLS, say
    /// which identities are proxies with `proxy: true` in their `identities:` rule instead.
    #[arg(long)]
    flag nack_holds_without_mtls: bool,
    /// A document held back at one node (it rejected it alone) is sent to that node again
    /// after this, and the wait doubles each time it is rejected again (up to 16 times this):
    /// a port freed on the node's host is then taken up without a change.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::units::parse_duration)]
    #[serde(deserialize_with = "crate::units::duration")]
    flag nack_retry: Duration,
    /// How many of one client's rejections a minute are split into the documents in play
    /// (each split decodes the rejected resources); past that a rejection only stops the
    /// node's plan (the node keeps what it has) until the next change or retry. Counted in
    /// xdst_nack_analyses_total{outcome="over_rate"}. 0: none is, as with --on-nack stop.
    #[arg(long, value_name = "N", default_value_t = xdst_serve::admission::Nacks::DEFAULT_PER_MINUTE)]
    flag max_nack_analyses_per_minute: u32,
    /// Canaries: each node group's first N connected proxies take every new target first;
    /// the group's other nodes get it once every canary holds it by its own ACKs (or has been
    /// silent past --plan-grace). A document a canary rejects alone is held for the group
    /// (left out if new), with the canary's message, and the rest never see it. 0: off.
    #[arg(long, value_name = "N", default_value_t = 0)]
    flag canaries: usize,
    /// A file holding the bearer token that admin writes (POST /reload, intent API PUT and
    /// DELETE) must carry
    /// (`Authorization: Bearer <token>`). Without it (or XDST_ADMIN_TOKEN) admin writes are
    /// refused. A file, not a flag, so the token does not show in `ps`.
    #[arg(long, value_name = "FILE")]
    flag admin_token_file: Option<PathBuf>,
    /// Namespaces as write boundaries, for the intent API: NAMESPACE=FILE, a file holding a
    /// bearer token that may write (PUT, DELETE /intent/...) documents of NAMESPACE only; a
    /// write outside it is refused (403) naming both. Repeat it per team; the admin token still
    /// writes anything. Off without it. (Config file: `namespaceTokens: [team-a=FILE, ...]`.)
    #[arg(long = "namespace-token", value_name = "NAMESPACE=FILE")]
    flag namespace_tokens: Vec<String>,
    /// Namespaces as write boundaries, for files: each directory directly under the intent
    /// directory may hold documents of the namespace it is named after only (`team-a/` writes
    /// namespace team-a); a file holding another namespace's document, or a cluster-scoped one,
    /// is held out naming both. Files directly in the intent directory are the platform's and
    /// may hold any. Off by default.
    #[arg(long)]
    flag namespace_dirs: bool,
    /// TLS on both ports (`--tls-cert`, `--tls-key`, `--tls-client-ca`; in the file `tls: {cert,
    /// key, clientCa}`).
    #[command(flatten)]
    group tls: TlsSettings,
    /// A file holding the bearer token admin reads (/debug/*, GET /intent, /metrics) must
    /// carry. With it (or with `adminReadIdentities` in the configuration file, client
    /// certificates allowed to read), reads without it are refused with 401; the write
    /// token is accepted for reads too. Without either, reads are open (as on loopback).
    #[arg(long, value_name = "FILE", env = "XDST_ADMIN_READ_TOKEN_FILE")]
    flag admin_read_token_file: Option<PathBuf>,
    /// Serve /metrics without the read token (for a Prometheus that cannot send one).
    #[arg(long)]
    flag open_metrics: bool,
    /// Write {"xds_addr": ..., "admin_addr": ...} to this file once listening (useful with
    /// port 0).
    #[arg(long, value_name = "FILE")]
    flag ready_file: Option<PathBuf>,
    /// With mTLS: which certificate identities may use which node groups and ids (the file's
    /// `identities:`). Only groups a rule with `proxy: true` allows get the Secrets made for no
    /// group alone (untagged), and what needs them.
    #[arg(skip)]
    file identities: Option<Vec<xdst_serve::identity::Rule>>,
    /// With mTLS: client certificate identities allowed admin reads without a token (the
    /// file's `adminReadIdentities:`).
    #[arg(skip)]
    file admin_read_identities: Vec<xdst_serve::identity::IdentityPattern>,
    /// Registries (`host:port`) spoken to over plain HTTP (loopback ones always are).
    #[arg(skip)]
    file insecure_registries: Vec<String>,
    /// PEM certificates trusted for `https://` sources and registries instead of the built-in
    /// web roots.
    #[arg(skip)]
    file ca_file: Option<PathBuf>,
    /// The write token itself, for an embedder (the command line reads `--admin-token-file` or
    /// `XDST_ADMIN_TOKEN` into it); `--admin-token-file` wins.
    #[arg(skip)]
    #[serde(skip)]
    cli admin_token: Option<String>,
    }
}

settings! {
    /// TLS on the xDS and admin ports.
    #[derive(Debug, Clone, Default, clap::Args, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase", default)]
    pub struct TlsSettings {
    /// Serve TLS on the xDS and admin ports with this PEM certificate (chain); needs
    /// --tls-key. Both files are re-read when they change: new connections get the new
    /// certificate, open ones keep theirs. (Config file: `tls: {cert: FILE, key: FILE}`.)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    #[serde(rename = "cert")]
    flag tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    #[serde(rename = "key")]
    flag tls_key: Option<PathBuf>,
    /// mTLS: the PEM certificate(s) of the CA that signs client certificates. xDS clients must
    /// then present a certificate it signed (refused in the handshake otherwise), and the
    /// configuration file's `identities:` rules say which node groups and node ids each
    /// certificate identity (first URI SAN, else first DNS SAN, else subject CN) may use; a
    /// stream naming others is refused with PERMISSION_DENIED. On the admin port a client
    /// certificate is optional (see --admin-read-token-file). Read at start.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    #[serde(rename = "clientCa")]
    flag tls_client_ca: Option<PathBuf>,
    }
}

settings! {
    /// Intent in etcd.
    #[derive(Debug, Clone, clap::Args, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase", default)]
    pub struct StoreSettings {
    /// Intent in etcd instead of a directory, shared by every replica started with the same
    /// store: etcd://HOST:PORT[,HOST:PORT...]/PREFIX. Documents are keys PREFIX/intent/KIND/NAME;
    /// each replica watches them and translates what it sees (replicas at one revision serve
    /// byte-identical resources and versions). Intent API writes are etcd transactions (409
    /// when the document changed meanwhile). At start, serve waits (retrying, with a warning
    /// each time) until etcd answers; once serving, while etcd is unreachable the last good
    /// config keeps serving, writes answer 503 and /readyz shows the store. Without --plugins
    /// or a plugins list, the plugins are the store's (`xdst store import --plugins FILE`),
    /// resolved by an elected replica. TLS towards etcd: the configuration file's
    /// `store: {url, tls: {ca, cert, key}}`.
    #[arg(long, value_name = "URL", env = "XDST_STORE")]
    #[serde(rename = "url")]
    flag store: Option<String>,
    /// With --store: the most intent documents the store may hold; more fail the generation
    /// (the last good config keeps serving).
    #[arg(long, value_name = "N", default_value_t = crate::generate::store::DEFAULT_MAX_DOCUMENTS)]
    #[serde(rename = "maxDocuments")]
    flag max_store_documents: usize,
    /// With --store: store prefixes per namespace. A namespace token's write through the intent
    /// API goes to PREFIX/intent/namespaces/NAMESPACE/KIND/NAME (the admin token's stay at
    /// PREFIX/intent/KIND/[NAMESPACE/]NAME, the platform's), so an etcd role per team with
    /// readwrite on its namespace's prefix bounds what the team can write straight into etcd.
    /// Keys of both shapes are read either way; a key under a namespace's prefix holding another
    /// namespace's document is held out naming both, and what it holds counts as the team's
    /// (marked xdst.dev/written-by: team, its creationTimestamp xdst's).
    #[arg(long)]
    #[serde(rename = "namespaceKeys")]
    flag store_namespace_keys: bool,
    /// TLS towards etcd: `{ca: FILE, cert: FILE, key: FILE}` (a client certificate if etcd
    /// wants one); the file's `store.tls` only.
    #[arg(skip)]
    #[serde(rename = "tls")]
    file store_tls: Option<crate::generate::store::StoreTls>,
    }
}

/// The command `xdst serve` parses its settings with.
#[derive(clap::Parser)]
struct Only {
    #[command(flatten)]
    settings: Settings,
}

impl Default for Settings {
    /// The defaults the command line has, whatever the environment says.
    fn default() -> Self {
        use clap::{CommandFactory, FromArgMatches};
        let command = Only::command().mut_args(|a| a.env(None::<&str>));
        let matches = command.try_get_matches_from(["xdst"]).expect("the defaults parse");
        Only::from_arg_matches(&matches).expect("the defaults parse").settings
    }
}

impl Default for StoreSettings {
    fn default() -> Self {
        Settings::default().store
    }
}

impl Settings {
    /// [`Settings::merge_file`], and a plugins directory on the command line replaces the
    /// file's plugins list (the two cannot both apply).
    pub fn merge(&mut self, file: Settings, given: &clap::ArgMatches) {
        self.merge_file(file, given);
        if given_here(given, "plugins") {
            self.plugin_list = None;
        }
    }

    /// Reads and checks a configuration file (at most the default `--max-file-size`: the flag
    /// is not known yet); relative paths become relative to its directory.
    pub fn read_file(file: &Path) -> Result<Settings, ConfigError> {
        let text = xdst_core::files::read_text(file, xdst_core::files::DEFAULT_MAX_TEXT_BYTES)
            .map_err(|e| ConfigError { file: file.display().to_string(), field: None, message: e.to_string() })?;
        Settings::parse_file(file, &text)
    }

    /// Parses a configuration file's text (`file` names it in errors and anchors relative paths).
    pub fn parse_file(file: &Path, text: &str) -> Result<Settings, ConfigError> {
        let err =
            |field: Option<String>, message: String| ConfigError { file: file.display().to_string(), field, message };
        let value = xdst_core::documents::parse_one(text).map_err(|e| err(e.field, e.message))?;
        if value.is_null() {
            return Ok(Settings::default());
        }
        let mut c: Settings = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            err((path != ".").then_some(path), e.into_inner().to_string())
        })?;
        let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
        for p in [
            &mut c.resources,
            &mut c.intent,
            &mut c.plugins,
            &mut c.plugin_cache,
            &mut c.admin_token_file,
            &mut c.ready_file,
            &mut c.ca_file,
            &mut c.admin_read_token_file,
            &mut c.tls.tls_cert,
            &mut c.tls.tls_key,
            &mut c.tls.tls_client_ca,
        ]
        .into_iter()
        .flatten()
        .chain(
            c.store
                .store_tls
                .iter_mut()
                .flat_map(|t| [Some(&mut t.ca), t.cert.as_mut(), t.key.as_mut()].into_iter().flatten()),
        ) {
            *p = base.join(&*p);
        }
        for e in c.plugin_list.iter_mut().flatten() {
            if let Some(s) = &mut e.signature {
                s.public_key = base.join(&s.public_key);
            }
        }
        if c.plugin_list.is_some() && c.plugins.is_some() {
            return Err(err(
                Some("plugins".into()),
                "give either `plugins` (a list) or `pluginsDir` (a directory), not both".into(),
            ));
        }
        if let Some(url) = &c.store.store {
            if c.intent.is_some() {
                return Err(err(
                    Some("store".into()),
                    "intent comes from one place: `intent` (a directory) or `store`".into(),
                ));
            }
            crate::generate::store::StoreConfig::parse(url)
                .map_err(|e| err(Some("store.url".into()), e.to_string()))?;
        } else if c.store.store_tls.is_some() {
            return Err(err(Some("store".into()), "missing field `url`".into()));
        }
        if let Some(t) = &c.store.store_tls
            && t.cert.is_some() != t.key.is_some()
        {
            return Err(err(Some("store.tls".into()), "a client certificate needs both `cert` and `key`".into()));
        }
        if c.tls.tls_cert.is_some() != c.tls.tls_key.is_some()
            || (c.tls.tls_client_ca.is_some() && c.tls.tls_cert.is_none())
        {
            let missing = if c.tls.tls_key.is_none() { "key" } else { "cert" };
            return Err(err(
                Some("tls".into()),
                format!("missing field `{missing}`: `tls` needs both `cert` and `key`"),
            ));
        }
        if c.resources.is_some() && (c.intent.is_some() || c.plugin_list.is_some() || c.plugins.is_some()) {
            return Err(err(
                Some("resources".into()),
                "serve one source: `resources`, or `intent` with `plugins`".into(),
            ));
        }
        match (&c.tls.tls_client_ca, &c.identities) {
            (Some(_), None) => {
                return Err(err(
                    Some("identities".into()),
                    "`tls.clientCa` needs `identities` rules saying which node groups each client certificate may use \
                     (`- {identity: '*', groups: ['*']}` lets every certificate the CA signed read every group)"
                        .into(),
                ));
            }
            (None, Some(_)) => {
                return Err(err(
                    Some("identities".into()),
                    "`identities` rules need `tls.clientCa` (clients have no certificate identity without it)".into(),
                ));
            }
            _ => {}
        }
        crate::generate::plugins::entry::check_plugins(c.plugin_list.as_deref().unwrap_or_default(), &base)
            .map_err(|(field, message)| err(Some(field), message))?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::plugins::distribution::Source;
    use xdst_plugin::pipeline::FailurePolicy;

    fn camel_case(id: &str) -> String {
        let mut out = String::new();
        let mut upper = false;
        for c in id.chars() {
            match c {
                '_' => upper = true,
                c if upper => {
                    out.push(c.to_ascii_uppercase());
                    upper = false;
                }
                c => out.push(c),
            }
        }
        out
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::parse_file(Path::new("/etc/xdst/xdst.yaml"), text)
    }

    #[test]
    fn tls_files_are_relative_to_the_file_and_both_are_needed() {
        let c = parse("tls: {cert: certs/server.pem, key: /keys/server.key}").unwrap();
        let t = c.tls;
        assert_eq!(t.tls_cert.unwrap(), Path::new("/etc/xdst/certs/server.pem"));
        assert_eq!(t.tls_key.unwrap(), Path::new("/keys/server.key"));
        assert!(err("tls: {cert: a.pem}").contains("missing field `key`"), "{}", err("tls: {cert: a.pem}"));
        let c = parse(
            "tls: {cert: s.pem, key: s.key, clientCa: ca.pem}\nidentities: [{identity: 'spiffe://x/a/*', groups: [a]}]",
        )
        .unwrap();
        assert_eq!(c.tls.tls_client_ca.unwrap(), Path::new("/etc/xdst/ca.pem"));
        assert_eq!(c.identities.unwrap()[0].nodes[0].to_string(), "*");
        let e = err("tls: {cert: a.pem, key: a.key, clientCa: ca.pem}");
        assert!(e.contains("field identities") && e.contains("groups"), "{e}");
        let e = err("identities: [{identity: 'a*b', groups: [a]}]");
        assert!(e.contains("identities[0].identity") && e.contains("may only end"), "{e}");
        let e = err("identities: [{identity: 'a', groups: [a]}]");
        assert!(e.contains("need `tls.clientCa`"), "{e}");
        let e = err("tls: {cert: a.pem, key: a.key, ca: ca.pem}");
        assert!(e.contains("tls") && e.contains("unknown field `ca`"), "{e}");
    }

    #[test]
    fn a_full_file_parses_and_paths_are_relative_to_it() {
        let c = parse(
            "xdsAddr: 0.0.0.0:18000\nintent: intent\nplanGrace: 3s\nnodeGroupKey: metadata:team\nplugins:\n- name: gw\
                \n  source: plugins/gw.wasm\n  sha256: \
                sha256:0000000000000000000000000000000000000000000000000000000000000000\n  limits: {deadlineMs: 500}\
                \n  capabilities: [clocks]\n  failurePolicy: fail-open\n  priority: 3\n  config: {a: 1}\n",
        )
        .unwrap();
        assert_eq!(c.intent.as_deref(), Some(Path::new("/etc/xdst/intent")));
        assert_eq!(c.plan_grace, Duration::from_secs(3));
        assert_eq!(c.xds_addr, "0.0.0.0:18000".parse().unwrap());
        // What the file does not name keeps the command line's default.
        assert_eq!(c.drain_time, Settings::default().drain_time);
        let p = &c.plugin_list.unwrap()[0];
        assert_eq!((p.priority, p.failure_policy), (3, FailurePolicy::FailOpen));
    }

    #[test]
    fn the_example_is_a_valid_and_complete_configuration() {
        let text = include_str!("../../../../examples/xdst.yaml");
        let c = parse(text).unwrap();
        let plugins = c.plugin_list.as_deref().unwrap();
        assert_eq!(plugins.len(), 4);
        let sources: Vec<Source> =
            plugins.iter().map(|p| Source::parse(&p.source, Path::new("/etc/xdst")).unwrap()).collect();
        assert!(
            matches!(sources[0], Source::Path(_))
                && matches!(sources[1], Source::Oci(_))
                && matches!(sources[3], Source::Https(_))
        );
        // Every key of the file is shown in the example (commented or not): one per flag, and
        // the file's own.
        use clap::CommandFactory;
        let nested = [
            ("plugins", "pluginsDir"),
            ("tls_cert", "cert"),
            ("tls_key", "key"),
            ("tls_client_ca", "clientCa"),
            ("store", "url"),
            ("max_store_documents", "maxDocuments"),
            ("store_namespace_keys", "namespaceKeys"),
        ];
        let mut keys: Vec<String> = Only::command()
            .get_arguments()
            .map(|a| a.get_id().as_str().to_owned())
            .filter(|id| id != "config" && id != "help")
            .map(|id| match nested.iter().find(|(i, _)| *i == id) {
                Some((_, key)) => (*key).to_owned(),
                None => camel_case(&id),
            })
            .collect();
        assert!(keys.len() > 30, "{keys:?}");
        keys.extend(
            ["plugins", "identities", "adminReadIdentities", "insecureRegistries", "caFile", "tls", "store"]
                .map(String::from),
        );
        for key in keys {
            assert!(text.contains(&format!("{key}:")), "examples/xdst.yaml does not show {key}");
        }
        for key in [
            "name",
            "source",
            "sha256",
            "config",
            "priority",
            "failurePolicy",
            "limits",
            "capabilities",
            "deadlineMs",
            "memoryMiB",
            "outputMiB",
            "fuel",
        ] {
            assert!(text.contains(&format!(" {key}:")), "examples/xdst.yaml does not show plugins[].{key}");
        }
    }

    #[test]
    fn mistakes_name_the_file_and_field() {
        assert!(
            err("xdsAdr: 1")
                .contains("/etc/xdst/xdst.yaml field xdsAdr: unknown field `xdsAdr`, expected one of `xdsAddr`"),
            "{}",
            err("xdsAdr: 1")
        );
        assert!(err("planGrace: soon").contains("field planGrace: invalid duration"));
        assert!(
            err("plugins:\n- {name: a, source: a.wasm, sha256: abc}")
                .contains("field plugins[0].sha256: \"abc\" is not a SHA-256 digest")
        );
        assert!(
            err("plugins:\n- {name: a, source: a.wasm, capabilities: [network]}")
                .contains("field plugins[0].capabilities[0]: unknown capability \"network\"")
        );
        assert!(
            err("plugins:\n- {name: a, source: a.wasm}\n- {name: a, source: b.wasm}")
                .contains("field plugins[1].name: \"a\" is also the name of plugins[0]")
        );
        assert!(err("plugins:\n- {name: A, source: a.wasm}").contains("field plugins[0].name"));
        assert!(
            err("plugins:\n- {name: a, source: \"oci://r.io/Bad:1\"}")
                .contains("field plugins[0].source: oci://r.io/Bad:1")
        );
        assert!(
            err("plugins:\n- {name: a, source: a.wasm, failurePolicy: maybe}")
                .contains("field plugins[0].failurePolicy: unknown variant `maybe`")
        );
        assert!(err("plugins: []\npluginsDir: p").contains("not both"));
        assert!(err("resources: r\nintent: i").contains("serve one source"));
    }

    /// Issue 34: one settings type, merged once. A setting the command line (or its
    /// environment variable) gave wins; every other takes the file's value, or the default
    /// when the file does not name it; nested groups (`tls`, `store`) merge per setting.
    #[test]
    fn the_command_line_wins_and_the_file_fills_the_rest() {
        use clap::{CommandFactory, FromArgMatches};
        let args =
            ["xdst", "--plan-grace", "2s", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--store", "etcd://h:1/p"];
        let matches = Only::command().mut_args(|a| a.env(None::<&str>)).try_get_matches_from(args).unwrap();
        let mut s = Only::from_arg_matches(&matches).unwrap().settings;
        let file = parse(
            "planGrace: 9s\ndrainTime: 7s\nmaxFileSize: 1MiB\ntls: {cert: f.pem, key: f.key}\n\
             store: {url: 'etcd://f:2/q', maxDocuments: 5, tls: {ca: ca.pem}}\n\
             adminReadIdentities: ['dns:ops.example']",
        )
        .unwrap();
        s.merge_file(file, &matches);
        assert_eq!(s.plan_grace, Duration::from_secs(2), "given on the command line");
        assert_eq!(s.drain_time, Duration::from_secs(7), "from the file");
        assert_eq!(s.max_file_size, 1 << 20, "from the file");
        assert_eq!(s.debounce, Settings::default().debounce, "named by neither");
        assert_eq!(s.tls.tls_cert.as_deref(), Some(Path::new("c.pem")));
        assert_eq!(s.tls.tls_key.as_deref(), Some(Path::new("k.pem")));
        assert_eq!(s.store.store.as_deref(), Some("etcd://h:1/p"));
        assert_eq!(s.store.max_store_documents, 5, "the file's store.maxDocuments");
        assert_eq!(s.store.store_tls.unwrap().ca, Path::new("/etc/xdst/ca.pem"), "the file's store.tls");
        assert_eq!(s.admin_read_identities.len(), 1, "a setting of the file only");
    }

    /// `Settings::default()` is the command line's defaults whatever the environment says
    /// (an embedder's settings do not change with `XDST_*` variables).
    #[test]
    fn defaults_are_the_command_lines() {
        let d = Settings::default();
        assert_eq!(d.xds_addr, "127.0.0.1:18000".parse().unwrap());
        assert_eq!((d.max_file_size, d.max_request_size), (8 << 20, crate::DEFAULT_MAX_REQUEST_SIZE));
        assert_eq!(d.store.max_store_documents, crate::generate::store::DEFAULT_MAX_DOCUMENTS);
        assert_eq!(d.max_unlisted_node_groups, crate::DEFAULT_MAX_UNLISTED_NODE_GROUPS);
        assert_eq!(parse("").unwrap().plan_grace, d.plan_grace);
    }
}
