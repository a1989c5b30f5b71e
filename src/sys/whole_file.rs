//! Files of derived data (caches), written whole: to a temporary file
//! renamed over the old one, so a reader sees the old or the new file,
//! never half of one; temporary files a killed writer left are removed by
//! the next writer.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Write `bytes` to `path` through a temporary file renamed over it, and
/// remove temporary files a killed writer left beside it.
pub fn save(path: &Path, bytes: &[u8]) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let prefix = format!("{}.", name.to_string_lossy());
    let Ok(mut file) = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
    else {
        return;
    };
    if file.write_all(bytes).is_ok() {
        // Another process may have written it meanwhile: either is whole.
        let _ = file.persist(path);
    }
    remove_left_temps(dir, &prefix);
}

const TEMP_SUFFIX: &str = ".tmp";

/// A temporary file older than this is no live writer's.
const LEFT_AFTER: Duration = Duration::from_secs(60);

fn remove_left_temps(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let left = name.starts_with(prefix)
            && name.ends_with(TEMP_SUFFIX)
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > LEFT_AFTER));
        if left {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn a_temporary_file_a_killed_writer_left_is_removed_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.cache");
        let left = dir.path().join("notes.cache.abc123.tmp");
        let young = dir.path().join("notes.cache.def456.tmp");
        std::fs::write(&left, b"half").unwrap();
        std::fs::write(&young, b"half").unwrap();
        let old = SystemTime::now() - LEFT_AFTER - Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(&left)
            .and_then(|f| f.set_modified(old))
            .unwrap();
        save(&path, b"whole");
        assert!(!left.exists(), "left by a killed writer");
        assert!(young.exists(), "may be another process's, writing now");
        assert_eq!(std::fs::read(&path).unwrap(), b"whole");
    }
}
