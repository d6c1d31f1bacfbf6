//! Issue 49, items 4 and 5: intent files that cannot block a generation, and an edit no file
//! time shows, read all the same; through the real path (files, xdst, a real Envoy).
//!
//! - [`a_named_pipe_in_the_intent_directory_blocks_nothing`]: `mkfifo team-a-pipe.yaml` in the
//!   intent directory used to block the generation thread forever (opening a pipe waits for a
//!   writer): team-b's next route was never served. Now the pipe is held out, naming what it
//!   is, and team-b's route reaches Envoy.
//! - [`an_edit_through_a_shared_mmap_is_read`]: a second write through a shared `mmap` into a
//!   page still dirty moves neither the file's modification nor its change time, so a file
//!   whose stamp vouched for it was never read again. Now every file is read again on
//!   `--full-reread` (here 2 s), and on `POST /reload`.
//! - [`a_directory_moved_in_whole_is_read_and_moved_out_is_gone`] (issue 50, item 4): the read
//!   looks only at the paths the watcher's events name. A directory moved in with its files
//!   has one event, for the directory: its files are read all the same (the directory is
//!   walked), and moved out again, its routes go. A link placed in the directory (what it
//!   points to changes with no event here) makes every read walk everything: an edit to its
//!   target is served.

use std::io::{BufRead as _, Write as _};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::Value;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, admin_json, gateway, path_route, serves, team};
use xdst_tests::upstream::http_get;
use xdst_tests::wait::{Seen, until};

/// The platform's Gateway and team-b's Service; xdst and a real Envoy serving them.
async fn scene(extra: &[&str]) -> anyhow::Result<(Teams, Process, Envoy)> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    t.write("team-b.yaml", &format!("{}---\n{}", team("team-b", &t.b), path_route("b0", "team-b", "/b0")))?;
    let mut args = vec!["--debounce", "20ms"];
    args.extend(extra);
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &args).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edges-files")).await?;
    serves(t.gateway(), "/b0", "b").await?;
    Ok((t, xdst, envoy))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_pipe_in_the_intent_directory_blocks_nothing() -> anyhow::Result<()> {
    let (t, xdst, envoy) = scene(&[]).await?;
    let pipe = t.intent.path().join("team-a-pipe.yaml");
    let c = std::ffi::CString::new(pipe.as_os_str().as_encoded_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    ensure!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0, "mkfifo: {}", std::io::Error::last_os_error());
    let held = xdst_tests::admin::wait_for_held(xdst.admin_addr, "team-a-pipe.yaml", "named pipe").await?;
    eprintln!("the pipe: {}", held["error"]);
    // team-b ships meanwhile: served.
    t.write("team-b-b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    let took = serves(t.gateway(), "/b1", "b").await?;
    let (status, _) = http_get(xdst.admin_addr, "/healthz").await?;
    ensure!(status == 200, "/healthz: {status}");
    eprintln!("team-b's /b1 served {took:?} after its write, the pipe beside it");
    // The pipe goes: nothing held.
    std::fs::remove_file(&pipe)?;
    until("nothing held once the pipe is gone", xdst_tests::teams::WAIT, async || {
        let status = admin_json(xdst.admin_addr, "/debug/plugins").await?;
        Ok(Seen::holds(status["held"].as_array().is_none_or(Vec::is_empty), format!("held: {}", status["held"])))
    })
    .await?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

/// `tests/clients/mmap_edit.py` on one file: each edit returns the file's times after it.
struct MmapEditor {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl MmapEditor {
    fn start(file: &std::path::Path) -> anyhow::Result<MmapEditor> {
        let mut child = std::process::Command::new(xdst_tests::python())
            .arg(xdst_tests::repo_root().join("tests/clients/mmap_edit.py"))
            .arg(file)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("starting mmap_edit.py")?;
        let out = std::io::BufReader::new(child.stdout.take().context("its stdout")?);
        Ok(MmapEditor { child, out })
    }

    /// Overwrites `old` with `new` (of the same length) through the map; the file's
    /// (mtime, ctime) after it, in nanoseconds.
    fn edit(&mut self, old: &str, new: &str) -> anyhow::Result<(i128, i128)> {
        let stdin = self.child.stdin.as_mut().context("its stdin")?;
        writeln!(stdin, "{old} {new}")?;
        stdin.flush()?;
        let mut line = String::new();
        self.out.read_line(&mut line)?;
        let v: Value = serde_json::from_str(&line).with_context(|| format!("mmap_edit.py said {line:?}"))?;
        let t = |k: &str| v[k].as_i64().map(i128::from).unwrap_or_default();
        Ok((t("mtime_ns"), t("ctime_ns")))
    }
}

impl Drop for MmapEditor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_through_a_shared_mmap_is_read() -> anyhow::Result<()> {
    let secrets = tempfile::Builder::new().prefix("xdst-edges-token-").tempdir()?;
    let token_file = secrets.path().join("token");
    std::fs::write(&token_file, "t0ken")?;
    let token_arg = token_file.display().to_string();
    let (t, xdst, envoy) = scene(&["--full-reread", "2s", "--admin-token-file", &token_arg]).await?;
    let gw = t.gateway();
    t.write("team-b-m.yaml", &path_route("m", "team-b", "/mm0"))?;
    serves(gw, "/mm0", "b").await?;
    let mut editor = MmapEditor::start(&t.intent.path().join("team-b-m.yaml"))?;
    // The first write through the map: its times move, and it is served.
    let first = editor.edit("/mm0", "/mm1")?;
    serves(gw, "/mm1", "b").await?;
    // Once the file has been still for more than 3 s and read again (another file's change
    // sets a generation off), its stamp vouches for it.
    let still = Instant::now() + Duration::from_millis(3500);
    tokio::time::sleep_until(still.into()).await;
    t.write("team-b-b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    serves(gw, "/b1", "b").await?;
    // The second write into the same page, still dirty: no time moves.
    let second = editor.edit("/mm1", "/mm2")?;
    if second != first {
        bail!(
            "the kernel moved the file's times on the second write through the map ({first:?} -> {second:?}): this \
             machine cannot show the case (its dirty page was written back within 4 s)"
        );
    }
    // Read again on the next full read (at most 2 s away), and served.
    let took = serves(gw, "/mm2", "b").await?;
    eprintln!("the edit no file time shows was served {took:?} later (--full-reread 2s)");
    // And at once on a reload.
    let third = editor.edit("/mm2", "/mm3")?;
    ensure!(third == first, "times moved on the third write: {first:?} -> {third:?}");
    let (status, body) =
        xdst_tests::xds::http_with(xdst.admin_addr, "POST", "/reload", &[("Authorization", "Bearer t0ken")], "").await;
    ensure!(status == 200, "POST /reload: {status} {body}");
    serves(gw, "/mm3", "b").await?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_moved_in_whole_is_read_and_moved_out_is_gone() -> anyhow::Result<()> {
    // No full reread and no rescan on a timer: only the watcher's paths can bring the routes in.
    let (t, xdst, envoy) = scene(&["--full-reread", "0s", "--resync", "60m"]).await?;
    let beside = tempfile::Builder::new().prefix("xdst-beside-").tempdir_in(t.intent.path().parent().unwrap())?;
    let made = beside.path().join("team-b-more");
    std::fs::create_dir_all(made.join("deep"))?;
    std::fs::write(made.join("deep/b8.yaml"), path_route("b8", "team-b", "/b8"))?;
    std::fs::write(made.join("b9.yaml"), path_route("b9", "team-b", "/b9"))?;
    // One rename: the event names the directory only.
    let moved = t.intent.path().join("team-b-more");
    std::fs::rename(&made, &moved)?;
    serves(t.gateway(), "/b8", "b").await?;
    serves(t.gateway(), "/b9", "b").await?;
    // Moved out again: both routes go.
    std::fs::rename(&moved, &made)?;
    until("the moved-out routes gone", xdst_tests::teams::WAIT, async || {
        let gone = |r: std::io::Result<(u16, String)>| matches!(r, Ok((404, _)));
        let (b8, b9) = (http_get(t.gateway(), "/b8").await, http_get(t.gateway(), "/b9").await);
        Ok(Seen::holds(gone(b8) && gone(b9), "still answered"))
    })
    .await?;
    // A link to a file outside: an edit to its target has no event here, and is served all the
    // same, as every read walks while a link is in the directory.
    let target = beside.path().join("linked.yaml");
    std::fs::write(&target, path_route("b10", "team-b", "/b10"))?;
    std::os::unix::fs::symlink(&target, t.intent.path().join("team-b-linked.yaml"))?;
    serves(t.gateway(), "/b10", "b").await?;
    std::fs::write(
        &target,
        format!("{}---\n{}", path_route("b10", "team-b", "/b10"), path_route("b11", "team-b", "/b11")),
    )?;
    // Something else changes (its event starts a generation), and the link's new route is in it.
    t.write("team-b-b12.yaml", &path_route("b12", "team-b", "/b12"))?;
    serves(t.gateway(), "/b12", "b").await?;
    serves(t.gateway(), "/b11", "b").await?;
    envoy.kill().await?;
    xdst.kill().await
}
