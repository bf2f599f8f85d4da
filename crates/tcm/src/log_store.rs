//! The durable Raft log: openraft's [`RaftLogStorage`] over two files of
//! checksummed records (see [`crate::record`]).
//!
//! - `vote`: the one record of the current vote, replaced atomically.
//! - `log`: appended records, each an entry (JSON of openraft's `Entry`), the
//!   last purged log id, or the last committed log id. Appends are fsynced
//!   before openraft is told they are durable. Truncating conflicting entries
//!   and purging entries a snapshot covers rewrite the file (temporary file,
//!   fsync, rename, fsync directory): the cluster metadata log holds at most a
//!   few thousand small entries between snapshots, so a rewrite is cheap and
//!   keeps the file a plain sequence a reader checks front to back.
//!
//! The committed log id is appended without its own fsync: it only tells a
//! restarting node how far it may re-apply before hearing from a leader, a
//! stale value is safe (a lower bound), and the next fsynced append carries it
//! to disk anyway.
//!
//! All entries stay in memory too; the log of a cluster's metadata between
//! two snapshots is small, and replication reads it often.

// openraft's traits fix the error type (`StorageError`, large); the helpers
// here return it as is rather than box it only to convert back.
#![allow(clippy::result_large_err)]
use crate::error::TcmError;
use crate::record::{self, kind, Record};
use crate::types::TypeConfig;
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, Entry, LogId, LogState, RaftLogReader, StorageError, StorageIOError, Vote,
};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type NodeId = u64;

/// The log file's name in the metadata directory.
pub(crate) const LOG_FILE: &str = "log";
/// The vote file's name in the metadata directory.
pub(crate) const VOTE_FILE: &str = "vote";

/// What readers see: the entries and the log pointers.
#[derive(Default)]
struct Mem {
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    last_purged: Option<LogId<NodeId>>,
    committed: Option<LogId<NodeId>>,
    vote: Option<Vote<NodeId>>,
}

impl Mem {
    fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(self.last_purged)
    }

    /// The whole log as a file's content: the purge point, the entries, the
    /// committed id.
    fn encode_all(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = Vec::new();
        if let Some(p) = &self.last_purged {
            out.extend(record::encode(kind::PURGED, &serde_json::to_vec(p)?));
        }
        for e in self.entries.values() {
            out.extend(record::encode(kind::ENTRY, &serde_json::to_vec(e)?));
        }
        if let Some(c) = &self.committed {
            out.extend(record::encode(kind::COMMITTED, &serde_json::to_vec(c)?));
        }
        Ok(out)
    }
}

struct Inner {
    dir: PathBuf,
    mem: Mutex<Mem>,
    /// The log file open for appending. A separate lock from `mem` so readers
    /// never wait for an fsync.
    file: Mutex<File>,
}

/// openraft's log storage: clones share one log.
#[derive(Clone)]
pub(crate) struct LogStore {
    inner: Arc<Inner>,
}

fn decode<T: serde::de::DeserializeOwned>(path: &Path, r: &Record) -> Result<T, TcmError> {
    serde_json::from_slice(&r.payload).map_err(|e| TcmError::Corrupt {
        path: path.to_path_buf(),
        offset: r.offset,
        reason: format!("undecodable record of kind {}: {e}", r.kind),
    })
}

fn io_err(e: std::io::Error) -> StorageError<NodeId> {
    StorageIOError::write_logs(&e).into()
}

fn any_err(msg: impl ToString) -> AnyError {
    AnyError::error(msg.to_string())
}

impl LogStore {
    /// Opens (or creates) the log of `dir`, repairing a torn tail.
    pub(crate) fn open(dir: &Path) -> Result<Self, TcmError> {
        let mut mem = Mem::default();
        let vote_path = dir.join(VOTE_FILE);
        if let Some(r) = record::read_single(&vote_path, kind::VOTE)? {
            mem.vote = Some(decode(&vote_path, &r)?);
        }

        let path = dir.join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(TcmError::io(&path, e)),
        };
        let scan = record::scan(&path, &bytes)?;
        if let Some(at) = scan.torn_at {
            tracing::warn!(
                "cluster metadata log {}: cutting a torn record at offset {at} ({} bytes; \
                 a write interrupted by a crash, never acknowledged)",
                path.display(),
                bytes.len() as u64 - at
            );
            record::truncate_file(&path, at).map_err(|e| TcmError::io(&path, e))?;
        }
        for r in &scan.records {
            match r.kind {
                kind::ENTRY => {
                    let e: Entry<TypeConfig> = decode(&path, r)?;
                    let expected = mem.last_log_id().map(|l| l.index + 1);
                    if expected.is_some_and(|x| x != e.log_id.index) {
                        return Err(TcmError::Corrupt {
                            path: path.clone(),
                            offset: r.offset,
                            reason: format!(
                                "log entry {} does not follow entry {:?}",
                                e.log_id.index,
                                mem.last_log_id().map(|l| l.index)
                            ),
                        });
                    }
                    mem.entries.insert(e.log_id.index, e);
                }
                kind::PURGED => {
                    let p: LogId<NodeId> = decode(&path, r)?;
                    mem.entries = mem.entries.split_off(&(p.index + 1));
                    mem.last_purged = Some(p);
                }
                kind::COMMITTED => mem.committed = Some(decode(&path, r)?),
                k => {
                    return Err(TcmError::Corrupt {
                        path: path.clone(),
                        offset: r.offset,
                        reason: format!("record of kind {k} does not belong in the log"),
                    })
                }
            }
        }
        // The committed id can run ahead of the entries only if a torn tail was
        // cut after it was written; never claim entries the log no longer has.
        let last = mem.last_log_id();
        if mem.committed.map(|c| c.index) > last.map(|l| l.index) {
            tracing::warn!(
                "cluster metadata log {}: committed index {:?} is past the last entry {:?}; \
                 the missing entries will come from the leader",
                path.display(),
                mem.committed.map(|c| c.index),
                last.map(|l| l.index)
            );
            mem.committed = last;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| TcmError::io(&path, e))?;
        if bytes.is_empty() {
            record::sync_dir(&path).map_err(|e| TcmError::io(&path, e))?;
        }
        Ok(LogStore {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                mem: Mutex::new(mem),
                file: Mutex::new(file),
            }),
        })
    }

    /// Runs blocking file I/O off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T, StorageError<NodeId>> + Send + 'static,
    ) -> Result<T, StorageError<NodeId>> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| StorageError::from(StorageIOError::write_logs(any_err(e))))?
    }
}

impl Inner {
    fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    fn append_bytes(&self, bytes: &[u8], sync: bool) -> std::io::Result<()> {
        let mut f = self.file.lock();
        f.write_all(bytes)?;
        if sync {
            f.sync_data()?;
        }
        Ok(())
    }

    /// Rewrites the log file from memory and reopens it for appending.
    fn rewrite(&self) -> Result<(), StorageError<NodeId>> {
        let bytes = self
            .mem
            .lock()
            .encode_all()
            .map_err(|e| StorageError::from(StorageIOError::write_logs(&e)))?;
        let mut f = self.file.lock();
        let path = self.log_path();
        record::write_atomic(&path, &bytes).map_err(io_err)?;
        *f = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_err)?;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let mem = self.inner.mem.lock();
        Ok(mem.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let mem = self.inner.mem.lock();
        Ok(LogState {
            last_purged_log_id: mem.last_purged,
            last_log_id: mem.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let vote = *vote;
        self.blocking(move |inner| {
            let json = serde_json::to_vec(&vote)
                .map_err(|e| StorageError::from(StorageIOError::write_vote(&e)))?;
            record::write_atomic(
                &inner.dir.join(VOTE_FILE),
                &record::encode(kind::VOTE, &json),
            )
            .map_err(|e| StorageError::from(StorageIOError::write_vote(&e)))?;
            inner.mem.lock().vote = Some(vote);
            Ok(())
        })
        .await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.mem.lock().vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        let Some(c) = committed else {
            return Ok(());
        };
        self.blocking(move |inner| {
            let json = serde_json::to_vec(&c)
                .map_err(|e| StorageError::from(StorageIOError::write_logs(&e)))?;
            // No fsync: see the module documentation.
            inner
                .append_bytes(&record::encode(kind::COMMITTED, &json), false)
                .map_err(io_err)?;
            inner.mem.lock().committed = Some(c);
            Ok(())
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.mem.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        let result = self
            .blocking(move |inner| {
                let mut bytes = Vec::new();
                {
                    // Raft appends only right after the last entry (conflicts are
                    // truncated first); a hole would corrupt the log.
                    let mem = inner.mem.lock();
                    let mut next = mem.last_log_id().map(|l| l.index + 1);
                    for e in &entries {
                        if next.is_some_and(|n| n != e.log_id.index) {
                            return Err(StorageIOError::write_log_entry(
                                e.log_id,
                                any_err(format!(
                                    "entry {} appended after entry {:?}",
                                    e.log_id.index,
                                    next.map(|n| n - 1)
                                )),
                            )
                            .into());
                        }
                        next = Some(e.log_id.index + 1);
                        let json = serde_json::to_vec(e).map_err(|err| {
                            StorageError::from(StorageIOError::write_log_entry(e.log_id, &err))
                        })?;
                        bytes.extend(record::encode(kind::ENTRY, &json));
                    }
                }
                inner.append_bytes(&bytes, true).map_err(io_err)?;
                let mut mem = inner.mem.lock();
                for e in entries {
                    mem.entries.insert(e.log_id.index, e);
                }
                Ok(())
            })
            .await;
        match &result {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
        result
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.blocking(move |inner| {
            {
                let mut mem = inner.mem.lock();
                mem.entries.split_off(&log_id.index);
            }
            inner.rewrite()
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.blocking(move |inner| {
            {
                let mut mem = inner.mem.lock();
                if mem.last_purged.is_some_and(|p| p.index >= log_id.index) {
                    return Ok(());
                }
                mem.entries = mem.entries.split_off(&(log_id.index + 1));
                mem.last_purged = Some(log_id);
            }
            inner.rewrite()
        })
        .await
    }
}
