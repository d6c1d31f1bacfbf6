//! `xdst`: an xDS control plane for Envoy and proxyless gRPC.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tracing::info;
use xdst::source;
use xdst_core::cache::Cache;
use xdst_core::node::GroupKey;

#[derive(Parser)]
#[command(name = "xdst", version, about = "An xDS control plane for Envoy and proxyless gRPC clients", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve xDS (SotW and Delta; ADS and per-type LDS/RDS/CDS/EDS; REST fetch) from a
    /// directory of Envoy resources, with an admin port for health, metrics and debugging.
    #[command(after_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// Load a resources directory exactly as `serve` would, report the first problem
    /// (file, document, field or dangling reference) and exit non-zero if there is one.
    Validate {
        /// The resources directory.
        #[arg(long, value_name = "DIR")]
        resources: PathBuf,
    },
}

const SERVE_HELP: &str = "\
Resources directory:
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

#[derive(clap::Args)]
struct ServeArgs {
    /// Address for xDS: gRPC (ADS, per-type services) and REST (POST /v3/discovery:*).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:18000", env = "XDST_XDS_ADDR")]
    xds_addr: SocketAddr,
    /// Address for the admin HTTP server: /healthz, /metrics, /debug/nodes, /debug/resources.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:19000", env = "XDST_ADMIN_ADDR")]
    admin_addr: SocketAddr,
    /// Directory of Envoy resources to serve (watched for changes). Without it, xdst
    /// serves an empty set.
    #[arg(long, value_name = "DIR", env = "XDST_RESOURCES")]
    resources: Option<PathBuf>,
    /// How nodes are grouped; each group can be served its own set: `cluster` (node.cluster),
    /// `id` (node.id) or `metadata:<key>` (a string in node.metadata).
    #[arg(long, value_name = "KEY", default_value = "cluster")]
    node_group_key: GroupKey,
    /// Quiet window that merges a burst of resource changes into one push.
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_duration)]
    debounce: Duration,
    /// How often the resources directory is rescanned in case a change notification was lost.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    resync: Duration,
    /// On SIGINT/SIGTERM, how long open connections get before they are closed.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    shutdown_grace: Duration,
    /// Write {"xds_addr": ..., "admin_addr": ...} to this file once listening (useful with
    /// port 0).
    #[arg(long, value_name = "FILE")]
    ready_file: Option<PathBuf>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map(|i| s.split_at(i)).unwrap_or((s, "s"));
    let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}: expected e.g. 10ms, 2s, 1m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("invalid duration unit in {s:?}: use ms, s or m")),
    };
    Ok(Duration::from_secs_f64(secs))
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Serve(args) => tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(args)),
        Command::Validate { resources } => {
            let (p, files) = source::load(&resources)?;
            let cache = Cache::new();
            let total = p.default.len();
            let groups = p.groups.len();
            cache.publish(p)?;
            println!("{}: {files} files, {total} resources, {groups} node groups: ok", resources.display());
            Ok(())
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = xdst::Config {
        xds_addr: args.xds_addr,
        admin_addr: args.admin_addr,
        resources: args.resources,
        group_key: args.node_group_key,
        debounce: args.debounce,
        resync: args.resync,
        shutdown_grace: args.shutdown_grace,
    };
    let server = xdst::start(config).await?;
    if let Some(path) = &args.ready_file {
        let body = serde_json::json!({"xds_addr": server.xds_addr.to_string(), "admin_addr": server.admin_addr.to_string()});
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, body.to_string())
            .and_then(|_| std::fs::rename(&tmp, path))
            .with_context(|| format!("writing --ready-file {}", path.display()))?;
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
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("installing SIGTERM handler");
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
