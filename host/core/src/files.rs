//! Replacing a file that another process (or a watcher) may read at any moment: the one
//! helper every xdst crate and test uses, so no reader ever sees half a file.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The default of the largest intent, resources or configuration file xdst reads
/// (`--max-file-size`): 8 MiB, room for tens of thousands of documents. Parsed, a file takes up
/// to about forty times its size in memory.
pub const DEFAULT_MAX_TEXT_BYTES: usize = 8 << 20;

/// Reads a text file of at most `max` bytes; a larger one is an error saying so (and no more
/// than the limit is ever read, even from a file that grows meanwhile). Only a regular file is
/// read: it is opened without blocking (a named pipe with no writer, or a device, would block
/// the reader forever) and anything else is an error naming what it is (issue 49, item 4).
pub fn read_text(path: &Path, max: usize) -> std::io::Result<String> {
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a named pipe"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{what}, not a regular file: only regular files are read (a pipe or device could block every read)"
            ),
        ));
    }
    let too_large = |len: u64| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{len} bytes, over the limit of {max} bytes for one file (--max-file-size)"),
        )
    };
    let len = file.metadata()?.len();
    if len > max as u64 {
        crate::limits::Limit::FileSize.hit();
        return Err(too_large(len));
    }
    let mut text = String::with_capacity(len as usize);
    file.take(max as u64 + 1).read_to_string(&mut text)?;
    if text.len() > max {
        return Err(too_large(text.len() as u64));
    }
    Ok(text)
}

/// What identifies one version of a file without reading it: its size, device, inode,
/// modification and change times, and when it was looked at (`read_at`, just before reading).
///
/// A later stamp equal to this one shows the same version only if that version had been still
/// for a while when it was read ([`Stamp::vouches`]): a file rewritten twice within one tick of
/// the file system's clock keeps its times (and maybe its size). Linux stamps files with a
/// coarse clock (a tick of 1-10 ms) on file systems with nanosecond times, so there a version
/// still for [`Stamp::SETTLED_FINE`] is settled; where times are whole seconds (FAT, some
/// network file systems: both nanosecond parts zero) it takes [`Stamp::SETTLED_COARSE`]. The
/// change time (`ctime`) is set by the kernel on every write, rename or `touch`, and no tool
/// that restores modification times (`cp -p`, `rsync -t`, `tar`) can set it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// When it was taken, in seconds and nanoseconds since the epoch.
    pub read_at: (i64, i64),
}

impl Stamp {
    /// How long a version must have been still, on a file system with nanosecond times.
    pub const SETTLED_FINE: std::time::Duration = std::time::Duration::from_millis(50);
    /// How long a version must have been still, on one with whole-second times.
    pub const SETTLED_COARSE: std::time::Duration = std::time::Duration::from_secs(3);

    pub fn of(meta: &std::fs::Metadata, read_at: std::time::SystemTime) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        let at = read_at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Stamp {
            len: meta.len(),
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            read_at: (at.as_secs() as i64, i64::from(at.subsec_nanos())),
        }
    }

    /// The stamp of `path` now (none when it cannot be read).
    pub fn now(path: &Path) -> Option<Stamp> {
        let read_at = std::time::SystemTime::now();
        std::fs::metadata(path).ok().map(|m| Stamp::of(&m, read_at))
    }

    /// Whether `now` (a stamp taken now) shows the same version of the file this stamp was
    /// taken of, and that version had settled when this stamp was taken.
    pub fn vouches(&self, now: &Stamp) -> bool {
        let fine = self.mtime.1 != 0 || self.ctime.1 != 0;
        let settle = if fine { Self::SETTLED_FINE } else { Self::SETTLED_COARSE };
        let nanos = |(s, n): (i64, i64)| i128::from(s) * 1_000_000_000 + i128::from(n);
        let settled = |t: (i64, i64)| nanos(t) + settle.as_nanos() as i128 <= nanos(self.read_at);
        (self.len, self.dev, self.ino, self.mtime, self.ctime) == (now.len, now.dev, now.ino, now.mtime, now.ctime)
            && settled(self.mtime)
            && settled(self.ctime)
    }

    /// This stamp as if it had been taken `by` later (tests: a file that has since settled).
    pub fn later(mut self, by: std::time::Duration) -> Stamp {
        let nanos = i128::from(self.read_at.0) * 1_000_000_000 + i128::from(self.read_at.1) + by.as_nanos() as i128;
        self.read_at = ((nanos / 1_000_000_000) as i64, (nanos % 1_000_000_000) as i64);
        self
    }
}

/// Writes `bytes` to `path` atomically: into a temporary file in the same directory (created
/// if missing), flushed to disk, then renamed over `path`.
///
/// The temporary name is short and fixed in length (`.xdst-tmp-<pid>-<n>`), so any name that
/// fits the file system fits here too, and it matches none of the extensions xdst watches.
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".xdst-tmp-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes.as_ref())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stamp vouches for a version once it has been still for the settle time (on a file
    /// system with nanosecond times, 50 ms), and not for a rewrite of the same size with its
    /// modification time set back (the change time moved).
    #[test]
    fn a_stamp_vouches_for_a_settled_version_only() {
        let dir = std::env::temp_dir().join(format!("xdst-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.yaml");
        std::fs::write(&path, "one").unwrap();
        let fresh = Stamp::now(&path).unwrap();
        assert!(fresh.mtime.1 != 0 || fresh.ctime.1 != 0, "this test expects nanosecond times");
        assert!(!fresh.vouches(&Stamp::now(&path).unwrap()), "just written: not yet");
        let settled = fresh.later(Stamp::SETTLED_FINE);
        assert!(settled.vouches(&Stamp::now(&path).unwrap()));
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, "two").unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
        assert!(!settled.vouches(&Stamp::now(&path).unwrap()), "the change time moved");
        // Whole-second times: three seconds.
        let coarse = Stamp { mtime: (fresh.mtime.0, 0), ctime: (fresh.ctime.0, 0), ..fresh };
        assert!(!coarse.later(Stamp::SETTLED_FINE * 2).vouches(&coarse));
        assert!(coarse.later(Stamp::SETTLED_COARSE + std::time::Duration::from_secs(1)).vouches(&coarse));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replaces_the_file_and_leaves_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("xdst-files-{}", std::process::id()));
        let path = dir.join("sub").join("a.yaml");
        write_atomic(&path, "one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
        // A name as long as the file system allows still works: the temporary name is short.
        let long = dir.join("x".repeat(250) + ".yaml");
        write_atomic(&long, "long").unwrap();
        assert_eq!(std::fs::read_to_string(&long).unwrap(), "long");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn read_text_refuses_a_file_over_the_limit() {
        let path = std::env::temp_dir().join(format!("xdst-read-text-{}", std::process::id()));
        std::fs::write(&path, vec![b'a'; DEFAULT_MAX_TEXT_BYTES]).unwrap();
        assert_eq!(read_text(&path, DEFAULT_MAX_TEXT_BYTES).unwrap().len(), DEFAULT_MAX_TEXT_BYTES);
        std::fs::write(&path, vec![b'a'; DEFAULT_MAX_TEXT_BYTES + 1]).unwrap();
        let e = read_text(&path, DEFAULT_MAX_TEXT_BYTES).unwrap_err();
        assert!(e.to_string().contains("over the limit of 8388608 bytes"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    /// Issue 49, item 4: a named pipe with no writer, or a device, is refused at once, naming
    /// what it is; it never blocks the reader.
    #[test]
    fn read_text_refuses_what_is_not_a_regular_file_without_blocking() {
        let dir = std::env::temp_dir().join(format!("xdst-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("x.yaml");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        let e = read_text(&fifo, DEFAULT_MAX_TEXT_BYTES).unwrap_err();
        assert!(e.to_string().contains("a named pipe, not a regular file"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "it must not wait for a writer");
        let e = read_text(std::path::Path::new("/dev/zero"), DEFAULT_MAX_TEXT_BYTES).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        let link = dir.join("link.yaml");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        assert!(read_text(&link, DEFAULT_MAX_TEXT_BYTES).unwrap_err().to_string().contains("named pipe"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
