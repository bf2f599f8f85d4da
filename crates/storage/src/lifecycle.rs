//! Compaction transaction logs (Cassandra's `LogTransaction`): a compaction
//! replaces its input SSTables by its outputs all at once, even across a
//! crash.
//!
//! `txn-compaction-<id>.log` in the table directory lists, one per line,
//! `remove:<generation>` for every input (written and synced first),
//! `add:<generation>` for every output (synced before the output is written),
//! and finally `commit`. At start-up, before SSTables are listed, a log with
//! `commit` has its inputs deleted, a log without has its outputs deleted;
//! then the log goes. A crash therefore leaves either the inputs or the
//! outputs, never both and never neither. Format version 1 (first line
//! `version:1`).

use crate::sstable::component_path;
use crate::StorageError;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

const VERSION_LINE: &str = "version:1";
const PREFIX: &str = "txn-compaction-";
/// Every component an SSTable may have, TOC first so a half-deleted SSTable
/// is never listed again.
const COMPONENTS: [&str; 5] = [
    "TOC.txt",
    "Data.db",
    "Index.db",
    "Filter.db",
    "Statistics.db",
];

fn io(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Io {
        path: path.display().to_string(),
        source: e,
    }
}

/// An open compaction transaction.
pub struct CompactionLog {
    path: PathBuf,
    file: File,
}

impl CompactionLog {
    /// Starts a transaction that will remove `inputs`.
    pub fn begin(dir: &Path, inputs: &[u64]) -> Result<Self, StorageError> {
        let path = dir.join(format!("{PREFIX}{}.log", uuid::Uuid::new_v4().simple()));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        let mut log = CompactionLog { path, file };
        let mut text = format!("{VERSION_LINE}\n");
        for g in inputs {
            text.push_str(&format!("remove:{g}\n"));
        }
        log.append(&text)?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(log)
    }

    fn append(&mut self, text: &str) -> Result<(), StorageError> {
        self.file
            .write_all(text.as_bytes())
            .map_err(|e| io(&self.path, e))?;
        self.file.sync_data().map_err(|e| io(&self.path, e))
    }

    /// Records an output before it is written.
    pub fn add(&mut self, generation: u64) -> Result<(), StorageError> {
        self.append(&format!("add:{generation}\n"))
    }

    /// Makes the outputs the table's data: from here on, a crash completes
    /// the transaction instead of undoing it.
    pub fn commit(&mut self) -> Result<(), StorageError> {
        self.append("commit\n")
    }

    /// Removes the log once the inputs are deleted (or the outputs, after an
    /// abort).
    pub fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// Undoes an uncommitted transaction: deletes what it wrote.
    pub fn abort(self) {
        if let Ok(text) = std::fs::read_to_string(&self.path) {
            let dir = self
                .path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            for g in generations(&text, "add:") {
                delete_sstable(&dir, g);
                crate::sstable::remove_unfinished(&dir, g);
            }
        }
        self.finish();
    }
}

fn generations(text: &str, prefix: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|g| g.trim().parse().ok())
        .collect()
}

fn delete_sstable(dir: &Path, generation: u64) {
    for c in COMPONENTS {
        let _ = std::fs::remove_file(component_path(dir, generation, c));
    }
}

/// Finishes or undoes the transactions a crash interrupted in `dir`; returns
/// how many there were.
pub fn recover(dir: &Path) -> Result<usize, StorageError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io(dir, e)),
    };
    let mut n = 0;
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().to_string();
        if !(name.starts_with(PREFIX) && name.ends_with(".log")) {
            continue;
        }
        let path = ent.path();
        let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
        let committed = text.lines().any(|l| l == "commit");
        let doomed = if committed {
            generations(&text, "remove:")
        } else {
            generations(&text, "add:")
        };
        tracing::info!(
            "{} interrupted compaction {}: deleting SSTables {doomed:?}",
            if committed { "completing" } else { "undoing" },
            path.display()
        );
        for g in doomed {
            delete_sstable(dir, g);
        }
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, g: u64) {
        for c in COMPONENTS {
            std::fs::write(component_path(dir, g, c), b"x").expect("write");
        }
    }

    fn present(dir: &Path, g: u64) -> bool {
        component_path(dir, g, "TOC.txt").exists()
    }

    #[test]
    fn a_crash_leaves_the_inputs_or_the_outputs() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        // uncommitted: outputs go, inputs stay
        for g in [1, 2, 3] {
            touch(d, g);
        }
        let mut log = CompactionLog::begin(d, &[1, 2]).expect("begin");
        log.add(3).expect("add");
        std::mem::forget(log);
        assert_eq!(recover(d).expect("recover"), 1);
        assert!(present(d, 1) && present(d, 2) && !present(d, 3));
        // committed: inputs go, outputs stay
        touch(d, 4);
        let mut log = CompactionLog::begin(d, &[1, 2]).expect("begin");
        log.add(4).expect("add");
        log.commit().expect("commit");
        std::mem::forget(log);
        assert_eq!(recover(d).expect("recover"), 1);
        assert!(!present(d, 1) && !present(d, 2) && present(d, 4));
        // a torn commit line is no commit
        touch(d, 5);
        let mut log = CompactionLog::begin(d, &[4]).expect("begin");
        log.add(5).expect("add");
        log.append("comm").expect("append");
        std::mem::forget(log);
        recover(d).expect("recover");
        assert!(present(d, 4) && !present(d, 5));
        assert_eq!(
            std::fs::read_dir(d)
                .expect("dir")
                .filter(|e| e
                    .as_ref()
                    .map(|e| e.file_name().to_string_lossy().ends_with(".log"))
                    .unwrap_or(false))
                .count(),
            0
        );
    }
}
