//! What a hostile client costs everyone else (issue 48): team-b's new route's time from its
//! write to its first 200 through a real Envoy, with no other client and with a client
//! beside it that ACKs once and then NACKs every response (its rejections are its own: held
//! at its node, analysed up to its budget), in alternating blocks of one run, as
//! `docs/PERFORMANCE.md` measures comparisons. A benchmark, not a check:
//!
//! ```sh
//! cargo test -p xdst-tests --test it hold_cost -- --ignored --nocapture
//! ```

use std::time::Duration;

use xdst_tests::ads_client::{AdsClient, Mode, Options};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, gateway, path_route, serves, team};

/// Routes written per block, and blocks of each kind.
const ROUTES: usize = 25;
const BLOCKS: usize = 4;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it by name"]
async fn hostile_client_cost() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    t.write("team-b.yaml", &format!("{}---\n{}", team("team-b", &t.b), path_route("b0", "team-b", "/b0")))?;
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &["--debounce", "20ms"]).await?;
    let mut boot = Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edge-1");
    boot.node_cluster = "edge".into();
    let envoy = Envoy::start(&boot).await?;
    serves(t.gateway(), "/b0", "b").await?;
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    let mut n = 0;
    for block in 0..2 * BLOCKS {
        let hostile = block % 2 == 1;
        let client = if hostile {
            let options = Options {
                mode: Mode::AckOnce,
                types: vec!["cds", "lds", "rds", "eds"],
                node_cluster: "edge".into(),
                ..Options::new(xdst.xds_addr, "hostile")
            };
            let mut c = AdsClient::spawn(&options).await?;
            c.wait_for("its first ACK", Duration::from_secs(30), |e| e["event"] == "ack").await?;
            Some(c)
        } else {
            None
        };
        for _ in 0..ROUTES {
            n += 1;
            t.write(&format!("team-b-{n}.yaml"), &path_route(&format!("b{n}"), "team-b", &format!("/b{n}")))?;
            let took = serves(t.gateway(), &format!("/b{n}"), "b").await?;
            if hostile { &mut beside } else { &mut alone }.push(took);
        }
        if let Some(c) = client {
            c.close().await?;
        }
    }
    for (what, v) in [("alone", &mut alone), ("beside a client NACKing every response", &mut beside)] {
        v.sort();
        eprintln!(
            "team-b's new route to its first 200, {what}: p50 {:?}, p99 {:?}, max {:?} ({} routes)",
            percentile(v, 0.5),
            percentile(v, 0.99),
            v[v.len() - 1],
            v.len()
        );
    }
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}
