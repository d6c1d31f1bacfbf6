//! Replacing a file that another process (or a watcher) may read at any moment: the one
//! helper every xdst crate and test uses, so no reader ever sees half a file.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

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
}
