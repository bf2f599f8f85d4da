//! The commit log: every mutation is appended (with a CRC) before it reaches a
//! memtable, and replayed on start. Sync policies use Cassandra's names:
//! `periodic` (acknowledge at once, fsync every period), `batch` (acknowledge
//! after the fsync that covers the write; concurrent writers share one fsync)
//! and `group` (like batch, but fsync at most once per window).
//!
//! Segment layout (version 1):
//! header  = b"SBCL" | version u32 | segment id u64 | crc32(previous 16 bytes) u32
//! entry   = length u32 | crc32(length) u32 | payload | crc32(payload) u32
//! payload = kind u8 (1 mutation, 2 truncate) | body
//! Entries never span segments. Every write reaches the OS before the write is
//! acknowledged, so a killed process loses nothing acknowledged; `batch`/`group`
//! also survive power loss.
//!
//! A position is `segment_id << 32 | offset`: it only grows, across restarts.
//! Each segment knows which tables wrote to it; once every one of them has
//! flushed past the segment, the segment is deleted.

use crate::StorageError;
use parking_lot::{Condvar, Mutex};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const SEGMENT_MAGIC: &[u8; 4] = b"SBCL";
pub const SEGMENT_VERSION: u32 = 1;
const HEADER_LEN: usize = 20;
/// Bound on a single entry, as Cassandra's `max_mutation_size` (half a segment).
pub const MAX_ENTRY_BYTES: usize = 16 * 1024 * 1024;

/// `commitlog_sync` with its period or window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    Periodic(Duration),
    Batch,
    Group(Duration),
}

/// A commit log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// An encoded mutation (see `serde::encode_mutation`).
    Mutation(Vec<u8>),
    /// All data of a table written before this point is gone.
    Truncate {
        table_id: uuid::Uuid,
        truncated_at_micros: i64,
    },
}

impl Entry {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Entry::Mutation(m) => {
                out.push(1);
                out.extend_from_slice(m);
            }
            Entry::Truncate {
                table_id,
                truncated_at_micros,
            } => {
                out.push(2);
                out.extend_from_slice(table_id.as_bytes());
                out.extend_from_slice(&truncated_at_micros.to_be_bytes());
            }
        }
    }

    fn decode(payload: &[u8]) -> Result<Entry, String> {
        match payload.first() {
            Some(1) => Ok(Entry::Mutation(payload[1..].to_vec())),
            Some(2) if payload.len() == 25 => {
                let mut id = [0u8; 16];
                id.copy_from_slice(&payload[1..17]);
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&payload[17..25]);
                Ok(Entry::Truncate {
                    table_id: uuid::Uuid::from_bytes(id),
                    truncated_at_micros: i64::from_be_bytes(ts),
                })
            }
            Some(k) => Err(format!("unknown entry kind {k}")),
            None => Err("empty entry".into()),
        }
    }
}

struct Writer {
    /// Tables with data in each segment not yet flushed.
    dirty: std::collections::BTreeMap<u64, std::collections::HashSet<uuid::Uuid>>,
    /// The last (segment, table) added to `dirty`: most appends repeat it,
    /// and need no look-up (the active segment's set only grows).
    last_dirty: Option<(u64, uuid::Uuid)>,
    file: Arc<File>,
    segment_id: u64,
    /// Bytes of the current segment, appended entries included.
    segment_bytes: u64,
    /// Logical position: total bytes appended since start.
    position: u64,
    dir: PathBuf,
    /// Entries appended and not yet written (group writing).
    pending: Vec<u8>,
    /// A spent buffer kept for the next `pending`.
    spare_buffer: Option<Vec<u8>>,
    /// Everything up to this position has reached the OS (or failed to).
    written: u64,
    /// Buffered entries of segments that rolled before they were written.
    sealed: Vec<Job>,
    /// Rolled segments the syncer has not fsynced yet.
    unsynced: Vec<Arc<File>>,
    /// The next segment, created ahead of need by the syncer thread so that a
    /// roll on the write path makes no file system calls.
    spare: Option<(u64, File)>,
    /// The next segment id to hand out (ids only grow; a spare made too late
    /// for its roll is deleted, leaving a gap).
    next_id: u64,
    /// After a failed write: the next append starts a new segment.
    must_roll: bool,
    /// The latest failed writes, for the waiters of their entries.
    failures: Vec<Failure>,
}

/// Buffered entries of one segment taken for one write: offsets `start..end`.
struct Job {
    segment_id: u64,
    file: Arc<File>,
    buf: Vec<u8>,
    start: u64,
    end: u64,
}

/// A write of buffered entries that failed: positions `(from, to]`.
struct Failure {
    from: u64,
    to: u64,
    path: PathBuf,
    os_error: Option<i32>,
    kind: std::io::ErrorKind,
    message: String,
}

impl Writer {
    /// Whether the entry ending at `pos` was written (`Some(Ok)`), failed to
    /// be (`Some(Err)`), or is still buffered (`None`).
    fn outcome(&self, pos: u64) -> Option<Result<(), StorageError>> {
        if let Some(f) = self
            .failures
            .iter()
            .rev()
            .find(|f| pos > f.from && pos <= f.to)
        {
            let e = match f.os_error {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(f.kind, f.message.clone()),
            };
            return Some(Err(io_err(&f.path, e)));
        }
        if pos <= self.written {
            return Some(Ok(()));
        }
        None
    }

    /// The current segment's buffered entries as a write job.
    fn take_pending(&mut self) -> Option<Job> {
        if self.pending.is_empty() {
            return None;
        }
        let next = self
            .spare_buffer
            .take()
            .unwrap_or_else(|| Vec::with_capacity(64 * 1024));
        let buf = std::mem::replace(&mut self.pending, next);
        Some(Job {
            segment_id: self.segment_id,
            file: self.file.clone(),
            start: self.segment_bytes - buf.len() as u64,
            end: self.segment_bytes,
            buf,
        })
    }
}

/// Buffered entries are written once they reach this size even before a
/// writer waits for them.
const PENDING_WRITE_BYTES: usize = 256 * 1024;

struct SyncState {
    requested: u64,
    synced: u64,
    error: Option<String>,
}

/// An fsync this slow counts as a pause of the node (`nodetool gcstats`, gc.log).
const FSYNC_STALL: std::time::Duration = std::time::Duration::from_millis(100);

/// The commit log of a node.
///
/// Appending only copies an entry into the segment buffer under `writer`, a
/// lock never held across a system call. Writes of the buffer are serialized
/// by `io`; a request thread that finds it taken awaits `written` instead of
/// blocking, and segment files are created and fsynced by the syncer thread.
/// The write itself is made by a request's thread: handing it to a thread of
/// its own cost a third of the writes' throughput (bench/README.md), although
/// a write into the page cache can block for milliseconds where it meets a
/// page being written back.
pub struct CommitLog {
    writer: Mutex<Writer>,
    /// Held while buffered entries are written to their files.
    io: Mutex<()>,
    /// Signalled after every write of buffered entries.
    written: tokio::sync::Notify,
    /// `Writer::written`, readable without the lock, while no write has
    /// failed (`write_failed`): the common check of [`CommitLog::wait_written`].
    written_position: AtomicU64,
    write_failed: AtomicBool,
    /// One fsync pass at a time (its position must cover what it synced).
    sync_pass: Mutex<()>,
    state: Mutex<SyncState>,
    wake_syncer: Condvar,
    synced_tx: tokio::sync::watch::Sender<u64>,
    mode: SyncMode,
    segment_size_bytes: u64,
    stopped: AtomicBool,
    /// A roll used the spare segment: the syncer makes the next one.
    need_spare: AtomicBool,
    /// Held while a spare is made (shutdown waits for it, then removes it).
    making_spare: Mutex<()>,
    /// Bytes of all segment files, kept as they are written and removed (the
    /// write path checks it on every write: no directory listing there).
    disk_bytes: std::sync::atomic::AtomicU64,
    /// Entries appended since start, writes waiting for an fsync now, and
    /// how long they waited (Cassandra's `CommitLog` metrics
    /// `CompletedTasks`, `PendingTasks` and `WaitingOnCommit`).
    pub completed: crate::metrics::Counter,
    pub waiting: crate::metrics::Gauge,
    pub waiting_on_commit: crate::metrics::Timer,
    /// Time writes waited for the next segment (`WaitingOnSegmentAllocation`).
    pub waiting_on_segment_allocation: crate::metrics::Timer,
}

fn io_err(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Io {
        path: path.display().to_string(),
        source: e,
    }
}

fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("CommitLog-{SEGMENT_VERSION}-{id}.log"))
}

/// Segment files in `dir`, by id.
pub fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StorageError> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io_err(dir, e)),
    };
    for ent in rd {
        let ent = ent.map_err(|e| io_err(dir, e))?;
        let name = ent.file_name().to_string_lossy().to_string();
        if let Some(rest) = name
            .strip_prefix("CommitLog-")
            .and_then(|r| r.strip_suffix(".log"))
        {
            if let Some((_, id)) = rest.split_once('-') {
                if let Ok(id) = id.parse::<u64>() {
                    out.push((id, ent.path()));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

fn open_segment(dir: &Path, id: u64) -> Result<File, StorageError> {
    let path = segment_path(dir, id);
    let mut f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(SEGMENT_MAGIC);
    h.extend_from_slice(&SEGMENT_VERSION.to_be_bytes());
    h.extend_from_slice(&id.to_be_bytes());
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_be_bytes());
    f.write_all(&h).map_err(|e| io_err(&path, e))?;
    f.sync_all().map_err(|e| io_err(&path, e))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(f)
}

/// What replay found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReplayStats {
    pub segments: usize,
    pub entries: usize,
    /// A torn (partially written) last entry of the newest segment was ignored.
    pub torn_tail: bool,
    /// Damaged entries or segment parts passed over because the operator
    /// said so (`-Dcassandra.commitlog.ignorereplayerrors=true`).
    pub skipped: usize,
}

/// The position of `offset` in segment `id`.
pub fn position(id: u64, offset: u64) -> u64 {
    (id << 32) | (offset & 0xffff_ffff)
}

/// The segment of a position.
pub fn segment_of(position: u64) -> u64 {
    position >> 32
}

/// Reads every entry of every segment in `dir`, oldest first, with the
/// position of its end. A partial entry at the very end of a segment (a write
/// the process died in; a rolled segment is fsynced after the roll, so after a
/// power loss an older segment can end in one too) is ignored, as is garbage
/// after the last whole entry of the newest segment; any other damage is an
/// error naming the file and position — unless `ignore_errors` (Cassandra's
/// `cassandra.commitlog.ignorereplayerrors`): then each damaged entry is
/// logged as an error and skipped (the rest of its segment when its length
/// cannot be trusted, the whole segment when its header cannot).
pub fn replay(
    dir: &Path,
    ignore_errors: bool,
    mut f: impl FnMut(u64, Entry) -> Result<(), StorageError>,
) -> Result<ReplayStats, StorageError> {
    let segments = list_segments(dir)?;
    let mut stats = ReplayStats {
        segments: segments.len(),
        ..Default::default()
    };
    let last = segments.len().saturating_sub(1);
    for (i, (seg_id, path)) in segments.iter().enumerate() {
        let mut data = Vec::new();
        File::open(path)
            .and_then(|mut fl| fl.read_to_end(&mut data))
            .map_err(|e| io_err(path, e))?;
        let corrupt = |pos: usize, reason: &str| StorageError::CorruptCommitLog {
            path: path.display().to_string(),
            position: pos as u64,
            reason: reason.to_string(),
        };
        if data.len() < HEADER_LEN {
            // a segment being created when the process died
            stats.torn_tail = true;
            continue;
        }
        // with the operator's override a damaged part is reported and passed over
        let mut skip = |e: StorageError, what: &str| -> Result<(), StorageError> {
            if !ignore_errors {
                return Err(e);
            }
            tracing::error!(
                "{e}: skipping {what} (cassandra.commitlog.ignorereplayerrors=true); \
                 the writes in it are lost on this node, repair it from its replicas"
            );
            stats.skipped += 1;
            Ok(())
        };
        let version = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
        let header = if &data[0..4] != SEGMENT_MAGIC {
            Some(corrupt(0, "bad magic"))
        } else if crc32fast::hash(&data[0..16]).to_be_bytes() != data[16..20] {
            Some(corrupt(0, "header checksum mismatch"))
        } else if version != SEGMENT_VERSION {
            Some(corrupt(
                4,
                &format!("unsupported segment version {version}"),
            ))
        } else {
            None
        };
        if let Some(e) = header {
            skip(e, "the whole segment")?;
            continue;
        }
        let mut pos = HEADER_LEN;
        while pos < data.len() {
            let is_tail_region = i == last;
            if data.len() - pos < 8 {
                stats.torn_tail = true;
                break;
            }
            let len_bytes = &data[pos..pos + 4];
            let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]])
                as usize;
            let len_crc = &data[pos + 4..pos + 8];
            if crc32fast::hash(len_bytes).to_be_bytes() != len_crc {
                if data[pos..].iter().all(|b| *b == 0) {
                    break;
                }
                if is_tail_region {
                    stats.torn_tail = true;
                    break;
                }
                skip(
                    corrupt(pos, "entry length checksum mismatch"),
                    "the rest of the segment",
                )?;
                break;
            }
            let end = pos + 8 + len + 4;
            if end > data.len() {
                stats.torn_tail = true;
                break;
            }
            let payload = &data[pos + 8..pos + 8 + len];
            if crc32fast::hash(payload).to_be_bytes() != data[pos + 8 + len..end] {
                if end == data.len() {
                    stats.torn_tail = true;
                    break;
                }
                skip(corrupt(pos, "entry checksum mismatch"), "the entry")?;
                pos = end;
                continue;
            }
            match Entry::decode(payload) {
                Ok(entry) => match f(position(*seg_id, end as u64), entry) {
                    Ok(()) => stats.entries += 1,
                    Err(e) => skip(e, "the entry")?,
                },
                Err(r) => skip(corrupt(pos, &r), "the entry")?,
            }
            pos = end;
        }
    }
    Ok(stats)
}

impl CommitLog {
    /// Opens a new segment after any existing ones (replay them first).
    pub fn open(
        dir: &Path,
        mode: SyncMode,
        segment_size_bytes: u64,
    ) -> Result<Arc<CommitLog>, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        let existing = list_segments(dir)?;
        let next_id = existing.last().map(|(id, _)| id + 1).unwrap_or(1);
        let existing_bytes: u64 = existing
            .iter()
            .filter_map(|(_, p)| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let file = open_segment(dir, next_id)?;
        let (synced_tx, _) = tokio::sync::watch::channel(0u64);
        let log = Arc::new(CommitLog {
            writer: Mutex::new(Writer {
                dirty: Default::default(),
                last_dirty: None,
                file: Arc::new(file),
                segment_id: next_id,
                segment_bytes: HEADER_LEN as u64,
                position: 0,
                dir: dir.to_path_buf(),
                pending: Vec::with_capacity(64 * 1024),
                spare_buffer: None,
                written: 0,
                sealed: Vec::new(),
                unsynced: Vec::new(),
                spare: None,
                next_id: next_id + 1,
                must_roll: false,
                failures: Vec::new(),
            }),
            io: Mutex::new(()),
            written: tokio::sync::Notify::new(),
            written_position: AtomicU64::new(0),
            write_failed: AtomicBool::new(false),
            sync_pass: Mutex::new(()),
            state: Mutex::new(SyncState {
                requested: 0,
                synced: 0,
                error: None,
            }),
            wake_syncer: Condvar::new(),
            synced_tx,
            mode,
            segment_size_bytes,
            stopped: AtomicBool::new(false),
            need_spare: AtomicBool::new(true),
            making_spare: Mutex::new(()),
            disk_bytes: std::sync::atomic::AtomicU64::new(existing_bytes + HEADER_LEN as u64),
            completed: Default::default(),
            waiting: Default::default(),
            waiting_on_commit: Default::default(),
            waiting_on_segment_allocation: Default::default(),
        });
        let l2 = log.clone();
        std::thread::Builder::new()
            .name("commitlog-sync".into())
            .spawn(move || l2.sync_loop())
            .map_err(|e| io_err(dir, e))?;
        Ok(log)
    }

    pub fn mode(&self) -> SyncMode {
        self.mode
    }

    /// Appends an entry of `table` and returns its end position; the entry has
    /// reached the OS when this returns. Call [`CommitLog::wait_durable`]
    /// before acknowledging.
    pub fn append(&self, entry: &Entry, table: Option<uuid::Uuid>) -> Result<u64, StorageError> {
        let mut payload = Vec::with_capacity(64);
        entry.encode(&mut payload);
        let pos = self.append_deferred(&payload, table)?;
        self.write_pending(self.io.lock());
        self.writer.lock().outcome(pos).unwrap_or_else(|| {
            Err(StorageError::CommitLogStopped(
                "commit log entry not written".into(),
            ))
        })?;
        Ok(pos)
    }

    /// Appends a mutation entry (`payload` from `serde::encode_mutation`)
    /// to the segment buffer and returns its end position. It reaches the OS
    /// at the next write of the buffer, one write for everything appended
    /// meanwhile (group writing): await [`CommitLog::wait_written`] before
    /// acknowledging. Call [`CommitLog::write_if_full`] once no lock of the
    /// caller's is held.
    pub fn append_mutation(
        &self,
        payload: &[u8],
        table: Option<uuid::Uuid>,
    ) -> Result<u64, StorageError> {
        let mut w = self.writer.lock();
        self.append_locked(&mut w, 1, payload, table)
    }

    /// Writes the buffer now if it holds a large amount, unless a write is
    /// under way already (large mutations then go out without waiting for
    /// the first waiter's turn).
    pub fn write_if_full(&self) {
        if self.writer.lock().pending.len() < PENDING_WRITE_BYTES {
            return;
        }
        if let Some(io) = self.io.try_lock() {
            self.write_pending(io);
        }
    }

    fn append_deferred(
        &self,
        encoded: &[u8],
        table: Option<uuid::Uuid>,
    ) -> Result<u64, StorageError> {
        let mut w = self.writer.lock();
        self.append_locked(&mut w, encoded[0], &encoded[1..], table)
    }

    fn append_locked(
        &self,
        w: &mut Writer,
        kind: u8,
        payload: &[u8],
        table: Option<uuid::Uuid>,
    ) -> Result<u64, StorageError> {
        if self.stopped.load(Ordering::Relaxed) {
            return Err(StorageError::CommitLogStopped(
                "the commit log is shut down".into(),
            ));
        }
        let len = payload.len() + 1;
        if len > MAX_ENTRY_BYTES {
            return Err(StorageError::CommitLogStopped(format!(
                "Mutation of {len} bytes is too large for the maximum size of {MAX_ENTRY_BYTES}"
            )));
        }
        let entry_bytes = (len + 12) as u64;
        if w.must_roll
            || (w.segment_bytes + entry_bytes > self.segment_size_bytes
                && w.segment_bytes > HEADER_LEN as u64)
        {
            let started = std::time::Instant::now();
            self.roll(w)?;
            self.waiting_on_segment_allocation.record_elapsed(started);
        }
        let lb = (len as u32).to_be_bytes();
        w.pending.extend_from_slice(&lb);
        w.pending
            .extend_from_slice(&crc32fast::hash(&lb).to_be_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&[kind]);
        crc.update(payload);
        w.pending.push(kind);
        w.pending.extend_from_slice(payload);
        w.pending.extend_from_slice(&crc.finalize().to_be_bytes());
        w.segment_bytes += entry_bytes;
        w.position = position(w.segment_id, w.segment_bytes);
        if let Some(t) = table {
            let seg = w.segment_id;
            if w.last_dirty != Some((seg, t)) {
                w.dirty.entry(seg).or_default().insert(t);
                w.last_dirty = Some((seg, t));
            }
        }
        self.completed.inc();
        Ok(w.position)
    }

    /// Starts the next segment: the spare the syncer made, or a new file when
    /// it has none ready. The old segment's buffered entries are written and
    /// its file fsynced later, in order, by the next write and sync.
    fn roll(&self, w: &mut Writer) -> Result<(), StorageError> {
        let (id, file) = match w.spare.take() {
            Some((id, f)) => (id, f),
            None => {
                // the new segment must exist whole before it is used (a full
                // disk leaves the current one in place, and nothing half-made)
                let id = w.next_id;
                w.next_id += 1;
                match open_segment(&w.dir, id) {
                    Ok(f) => {
                        self.disk_bytes
                            .fetch_add(HEADER_LEN as u64, Ordering::Relaxed);
                        (id, f)
                    }
                    Err(e) => {
                        let _ = std::fs::remove_file(segment_path(&w.dir, id));
                        return Err(e);
                    }
                }
            }
        };
        if let Some(job) = w.take_pending() {
            w.sealed.push(job);
        }
        let old = std::mem::replace(&mut w.file, Arc::new(file));
        w.unsynced.push(old);
        w.segment_id = id;
        w.segment_bytes = HEADER_LEN as u64;
        w.must_roll = false;
        // the syncer makes the next spare
        self.need_spare.store(true, Ordering::Relaxed);
        self.wake_syncer.notify_one();
        Ok(())
    }

    /// Creates the next spare segment if there is none (syncer thread).
    fn make_spare(&self) {
        let _making = self.making_spare.lock();
        self.need_spare.store(false, Ordering::Relaxed);
        let (id, dir) = {
            let mut w = self.writer.lock();
            if w.spare.is_some() || self.stopped.load(Ordering::Relaxed) {
                return;
            }
            let id = w.next_id;
            w.next_id += 1;
            (id, w.dir.clone())
        };
        match open_segment(&dir, id) {
            Ok(f) => {
                self.disk_bytes
                    .fetch_add(HEADER_LEN as u64, Ordering::Relaxed);
                let mut w = self.writer.lock();
                if w.spare.is_none() && id > w.segment_id && !self.stopped.load(Ordering::Relaxed) {
                    w.spare = Some((id, f));
                    return;
                }
                drop(w);
                self.remove_spare_file(&dir, id);
            }
            Err(e) => {
                // the roll will try again itself, and report the error
                tracing::warn!("cannot create the next commit log segment: {e}");
                let _ = std::fs::remove_file(segment_path(&dir, id));
            }
        }
    }

    fn remove_spare_file(&self, dir: &Path, id: u64) {
        if std::fs::remove_file(segment_path(dir, id)).is_ok() {
            self.disk_bytes
                .fetch_sub(HEADER_LEN as u64, Ordering::Relaxed);
        }
    }

    /// Writes the buffered entries, one write per segment (nearly always
    /// one), then releases `io` and wakes the waiters. On failure (a full
    /// disk) the partial write is cut off so the segment holds whole entries
    /// only; those entries, and any appended to that segment after them, are
    /// recorded as failed for their waiters, and the next append starts a new
    /// segment (positions are never reused).
    fn write_pending(&self, io: parking_lot::MutexGuard<'_, ()>) {
        let jobs = {
            let mut w = self.writer.lock();
            let mut jobs = std::mem::take(&mut w.sealed);
            jobs.extend(w.take_pending());
            jobs
        };
        for job in jobs {
            let r = (&*job.file).write_all(&job.buf);
            let mut w = self.writer.lock();
            match r {
                Ok(()) => {
                    w.written = w.written.max(position(job.segment_id, job.end));
                    self.written_position
                        .fetch_max(w.written, Ordering::Release);
                    self.disk_bytes
                        .fetch_add(job.buf.len() as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    let undone = job.file.set_len(job.start).and_then(|_| {
                        (&*job.file)
                            .seek(std::io::SeekFrom::Start(job.start))
                            .map(|_| ())
                    });
                    if undone.is_err() {
                        self.stopped.store(true, Ordering::Relaxed);
                    }
                    // what was appended to this segment meanwhile can no
                    // longer follow in the file: it fails with this write
                    let mut to = job.end;
                    w.sealed.retain(|j| {
                        let same = j.segment_id == job.segment_id;
                        if same {
                            to = to.max(j.end);
                        }
                        !same
                    });
                    if w.segment_id == job.segment_id {
                        to = to.max(w.segment_bytes);
                        w.pending.clear();
                        w.must_roll = true;
                    }
                    let failure = Failure {
                        from: position(job.segment_id, job.start),
                        to: position(job.segment_id, to),
                        path: segment_path(&w.dir, job.segment_id),
                        os_error: e.raw_os_error(),
                        kind: e.kind(),
                        message: e.to_string(),
                    };
                    if w.failures.len() >= 64 {
                        w.failures.remove(0);
                    }
                    self.write_failed.store(true, Ordering::Release);
                    w.failures.push(failure);
                }
            }
            let mut buf = job.buf;
            buf.clear();
            if buf.capacity() <= 4 * PENDING_WRITE_BYTES && w.spare_buffer.is_none() {
                w.spare_buffer = Some(buf);
            }
        }
        drop(io);
        self.written.notify_waiters();
    }

    /// Waits until the entry ending at `position` has reached the OS (a
    /// process crash no longer loses it). It first lets the other ready
    /// writers append, so one write carries many entries; then it writes the
    /// buffer itself, or, while another thread is writing, waits for that
    /// write without holding its thread. Errors when the write failed.
    pub async fn wait_written(&self, position: u64) -> Result<(), StorageError> {
        // the first yield lets the requests already running on this thread
        // append too: one write for all of them
        let mut yielded = false;
        loop {
            if let Some(r) = self.written_outcome(position) {
                return r;
            }
            if !yielded {
                tokio::task::yield_now().await;
                yielded = true;
                continue;
            }
            if let Some(io) = self.io.try_lock() {
                self.write_pending(io);
                continue;
            }
            // another thread is writing: wait for it to signal (registered
            // first, then checked again, so that its signal is not missed)
            let written = self.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            if let Some(r) = self.written_outcome(position) {
                return r;
            }
            written.await;
        }
    }

    /// [`Writer::outcome`], without the writer's lock while no write failed.
    fn written_outcome(&self, position: u64) -> Option<Result<(), StorageError>> {
        if !self.write_failed.load(Ordering::Acquire)
            && position <= self.written_position.load(Ordering::Acquire)
        {
            return Some(Ok(()));
        }
        self.writer.lock().outcome(position)
    }

    /// The position after the last appended entry.
    pub fn current_position(&self) -> u64 {
        let w = self.writer.lock();
        position(w.segment_id, w.segment_bytes)
    }

    /// Records that `table` has unflushed data in segment `seg` (after replay).
    pub fn mark_dirty(&self, seg: u64, table: uuid::Uuid) {
        self.writer
            .lock()
            .dirty
            .entry(seg)
            .or_default()
            .insert(table);
    }

    /// Deletes every closed segment all of whose tables have flushed past it.
    /// `flushed(t)` is the position up to which table `t` is in SSTables (0
    /// for none; `u64::MAX` for a table that no longer exists).
    ///
    /// Only the choice is made under the writer's lock: the directory is
    /// listed before and the files removed after, because every append takes
    /// that lock, and unlinking a segment whose pages are still cached took
    /// 20-50 ms here (a node's writes stalled that long after each flush).
    pub fn discard_flushed(&self, flushed: &dyn Fn(uuid::Uuid) -> u64) -> Vec<u64> {
        let dir = self.writer.lock().dir.clone();
        let segs: Vec<(u64, PathBuf)> = list_segments(&dir).unwrap_or_default();
        let clean: Vec<(u64, PathBuf)> = {
            let mut w = self.writer.lock();
            let active = w.segment_id;
            let clean: Vec<(u64, PathBuf)> = segs
                .into_iter()
                .filter(|(id, _)| *id < active)
                .filter(|(id, _)| match w.dirty.get_mut(id) {
                    None => true,
                    Some(tables) => {
                        tables.retain(|t| segment_of(flushed(*t)) <= *id);
                        tables.is_empty()
                    }
                })
                .collect();
            // a clean segment's entry is empty: dropping it now changes
            // nothing if the removal below fails (it is clean next time too)
            for (id, _) in &clean {
                w.dirty.remove(id);
            }
            clean
        };
        let mut removed = Vec::new();
        for (id, path) in clean {
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if std::fs::remove_file(&path).is_ok() {
                let _ = self
                    .disk_bytes
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                        Some(b - len.min(b))
                    });
                removed.push(id);
            }
        }
        removed
    }

    /// Bytes of all segment files.
    pub fn total_bytes(&self) -> u64 {
        self.disk_bytes.load(Ordering::Relaxed)
    }

    /// Waits until the entry ending at `position` is durable as the sync mode
    /// requires (returns at once in periodic mode).
    pub async fn wait_durable(&self, position: u64) -> Result<(), StorageError> {
        if let SyncMode::Periodic(_) = self.mode {
            return Ok(());
        }
        {
            let mut st = self.state.lock();
            if st.synced >= position {
                return Ok(());
            }
            if st.requested < position {
                st.requested = position;
            }
            self.wake_syncer.notify_one();
        }
        let started = std::time::Instant::now();
        self.waiting.add(1);
        let mut rx = self.synced_tx.subscribe();
        let r = rx.wait_for(|p| *p >= position || *p == u64::MAX).await;
        self.waiting.add(-1);
        self.waiting_on_commit.record_elapsed(started);
        if let Some(e) = &self.state.lock().error {
            return Err(StorageError::CommitLogStopped(e.clone()));
        }
        match r {
            Ok(_) => Ok(()),
            Err(_) => Err(StorageError::CommitLogStopped(
                "commit log sync stopped".into(),
            )),
        }
    }

    /// Writes the buffer and fsyncs every segment with unsynced writes;
    /// returns the position everything before which is durable.
    fn sync_now(&self) -> Result<u64, String> {
        let _pass = self.sync_pass.lock();
        self.write_pending(self.io.lock());
        let (files, pos) = {
            let mut w = self.writer.lock();
            let mut files = std::mem::take(&mut w.unsynced);
            files.push(w.file.clone());
            (files, w.written)
        };
        let started = std::time::Instant::now();
        for f in files {
            f.sync_data().map_err(|e| e.to_string())?;
        }
        // a slow fsync holds back every synced write: a pause of the node
        let took = started.elapsed();
        if took >= FSYNC_STALL {
            let pauses = sibyl_metrics::pauses::global();
            pauses.record(took);
            let ms = took.as_millis();
            tracing::info!(target: "gc", "Commit log fsync stalled writes for {ms} ms");
            if took >= sibyl_metrics::pauses::WARN_THRESHOLD {
                tracing::warn!("Commit log fsync took {ms} ms");
            } else if took >= sibyl_metrics::pauses::LOG_THRESHOLD {
                tracing::info!("Commit log fsync took {ms} ms");
            }
        }
        Ok(pos)
    }

    fn sync_loop(&self) {
        loop {
            let stop = self.stopped.load(Ordering::Relaxed);
            match self.mode {
                SyncMode::Periodic(p) => {
                    // woken early by a roll (which also makes the rolled
                    // segment durable) or by shutdown; a wake-up may be
                    // missed, so the flags are looked at every 100 ms
                    let start = std::time::Instant::now();
                    let mut st = self.state.lock();
                    while !self.need_spare.load(Ordering::Relaxed)
                        && !self.stopped.load(Ordering::Relaxed)
                    {
                        let left = p.saturating_sub(start.elapsed());
                        if left.is_zero() {
                            break;
                        }
                        let _ = self
                            .wake_syncer
                            .wait_for(&mut st, left.min(Duration::from_millis(100)));
                    }
                }
                SyncMode::Batch | SyncMode::Group(_) => {
                    let mut st = self.state.lock();
                    while st.requested <= st.synced
                        && !self.stopped.load(Ordering::Relaxed)
                        && !self.need_spare.load(Ordering::Relaxed)
                    {
                        let _ = self
                            .wake_syncer
                            .wait_for(&mut st, Duration::from_millis(100));
                    }
                    drop(st);
                    if let SyncMode::Group(w) = self.mode {
                        std::thread::sleep(w);
                    }
                }
            }
            self.make_spare();
            match self.sync_now() {
                Ok(pos) => {
                    let mut st = self.state.lock();
                    if pos > st.synced {
                        st.synced = pos;
                    }
                    drop(st);
                    self.synced_tx.send_replace(pos);
                }
                Err(e) => {
                    tracing::error!("commit log sync failed: {e}");
                    self.state.lock().error = Some(e);
                    self.synced_tx.send_replace(u64::MAX);
                    return;
                }
            }
            if stop {
                return;
            }
        }
    }

    /// Makes everything durable and stops accepting writes.
    pub fn shutdown(&self) {
        let _ = self.sync_now();
        self.stopped.store(true, Ordering::Relaxed);
        let _making = self.making_spare.lock();
        let spare = {
            let mut w = self.writer.lock();
            w.spare.take().map(|(id, _)| (id, w.dir.clone()))
        };
        if let Some((id, dir)) = spare {
            self.remove_spare_file(&dir, id);
        }
        self.wake_syncer.notify_all();
    }

    /// Forces an fsync now (drain, flush).
    pub fn sync(&self) -> Result<(), StorageError> {
        self.sync_now()
            .map(|_| ())
            .map_err(StorageError::CommitLogStopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of 4 KB segments that syncs only when asked.
    fn small_segments(dir: &Path) -> Arc<CommitLog> {
        CommitLog::open(dir, SyncMode::Periodic(Duration::from_secs(3600)), 4096).expect("open")
    }

    #[test]
    fn entries_replay_in_order_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().expect("tmp");
        {
            let log = CommitLog::open(
                dir.path(),
                SyncMode::Periodic(Duration::from_secs(10)),
                1 << 20,
            )
            .expect("open");
            for i in 0..100u8 {
                log.append(&Entry::Mutation(vec![i; 100]), None)
                    .expect("append");
            }
            log.append(
                &Entry::Truncate {
                    table_id: uuid::Uuid::from_u128(1),
                    truncated_at_micros: 5,
                },
                None,
            )
            .expect("append");
            log.shutdown();
        }
        let segs = list_segments(dir.path()).expect("list");
        assert_eq!(segs.len(), 1);
        // tear the last entry
        let len = std::fs::metadata(&segs[0].1).expect("meta").len();
        let f = OpenOptions::new()
            .write(true)
            .open(&segs[0].1)
            .expect("open");
        f.set_len(len - 3).expect("truncate");
        let mut seen = Vec::new();
        let stats = replay(dir.path(), false, |_, e| {
            seen.push(e);
            Ok(())
        })
        .expect("replay");
        assert!(stats.torn_tail);
        assert_eq!(seen.len(), 100);
        assert_eq!(seen[7], Entry::Mutation(vec![7; 100]));
    }

    /// A log of 100 entries of 100 bytes in 4 KB segments, shut down.
    fn hundred_entries_in_small_segments() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tmp");
        let log = CommitLog::open(
            dir.path(),
            SyncMode::Periodic(Duration::from_secs(10)),
            4096,
        )
        .expect("open");
        for i in 0..100u8 {
            log.append(&Entry::Mutation(vec![i; 100]), None)
                .expect("append");
        }
        log.shutdown();
        dir
    }

    #[test]
    fn corruption_in_an_older_segment_is_reported_with_path_and_position() {
        let dir = hundred_entries_in_small_segments();
        let segs = list_segments(dir.path()).expect("list");
        assert!(segs.len() > 2, "segments roll at the size bound");
        let mut data = std::fs::read(&segs[0].1).expect("read");
        data[HEADER_LEN + 20] ^= 0xff;
        std::fs::write(&segs[0].1, data).expect("write");
        let err = replay(dir.path(), false, |_, _| Ok(())).expect_err("must fail");
        let msg = err.to_string();
        assert!(
            msg.contains("CommitLog-1-1.log") && msg.contains("position 20"),
            "{msg}"
        );
        // the operator's override passes over the damaged entry only
        let mut seen = Vec::new();
        let stats = replay(dir.path(), true, |_, e| {
            if let Entry::Mutation(m) = e {
                seen.push(m[0]);
            }
            Ok(())
        })
        .expect("replays past the damage");
        assert_eq!(stats.skipped, 1);
        assert_eq!(seen.len(), 99);
        assert!(!seen.contains(&0) && seen.contains(&1) && seen.contains(&99));
        // a damaged segment header: that segment is passed over
        let mut data = std::fs::read(&segs[1].1).expect("read");
        data[0] ^= 0xff;
        std::fs::write(&segs[1].1, data).expect("write");
        assert!(replay(dir.path(), false, |_, _| Ok(())).is_err());
        let stats = replay(dir.path(), true, |_, _| Ok(())).expect("replays");
        assert_eq!(stats.skipped, 2);
    }

    #[test]
    fn an_older_segment_cut_short_by_a_crash_replays_up_to_its_last_whole_entry() {
        let dir = hundred_entries_in_small_segments();
        let segs = list_segments(dir.path()).expect("list");
        assert!(segs.len() > 2);
        // the spare segment was removed at shutdown: the last one has entries
        assert!(
            std::fs::metadata(&segs[segs.len() - 1].1)
                .expect("meta")
                .len()
                > HEADER_LEN as u64
        );
        let len = std::fs::metadata(&segs[0].1).expect("meta").len();
        let f = OpenOptions::new()
            .write(true)
            .open(&segs[0].1)
            .expect("open");
        f.set_len(len - 3).expect("truncate");
        let mut seen = Vec::new();
        let stats = replay(dir.path(), false, |_, e| {
            seen.push(e);
            Ok(())
        })
        .expect("replay");
        assert!(stats.torn_tail);
        assert_eq!(seen.len(), 99, "only the cut entry is missing");
        assert_eq!(seen[98], Entry::Mutation(vec![99; 100]));
    }

    #[test]
    #[allow(clippy::await_holding_lock)] // the held lock is the point: another writer
    fn a_writer_waiting_for_another_threads_write_does_not_hold_its_thread() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = CommitLog::open(
            dir.path(),
            SyncMode::Periodic(Duration::from_secs(3600)),
            1 << 20,
        )
        .expect("open");
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let l = log.clone();
        std::thread::spawn(move || {
            // one thread for every task: a blocked wait would stop them all
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let pos = l.append_mutation(&[7; 50], None).expect("append");
                let io = l.io.lock(); // another thread is writing
                let l2 = l.clone();
                let waiter = tokio::spawn(async move { l2.wait_written(pos).await });
                let ticks = tokio::spawn(async {
                    for _ in 0..5 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                });
                ticks.await.expect("other tasks ran meanwhile");
                assert!(!waiter.is_finished());
                // that write covers the waiter's entry and wakes it
                l.write_pending(io);
                waiter.await.expect("join").expect("written");
            });
            let _ = done_tx.send(());
        });
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiting task did not block the runtime's thread");
        log.shutdown();
    }

    #[tokio::test]
    async fn a_roll_uses_the_spare_segment_made_ahead_by_the_syncer() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = small_segments(dir.path());
        let spare_ready = || log.writer.lock().spare.as_ref().map(|(id, _)| *id);
        for _ in 0..200 {
            if spare_ready().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let spare = spare_ready().expect("a spare segment is made at start");
        let mut last = 0;
        for i in 0..60u8 {
            last = log.append_mutation(&[i; 100], None).expect("append");
        }
        log.wait_written(last).await.expect("written");
        assert_eq!(segment_of(last), spare, "the roll went to the spare");
        for _ in 0..200 {
            if spare_ready().is_some_and(|id| id > spare) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            spare_ready().is_some_and(|id| id > spare),
            "and a new spare follows"
        );
        log.shutdown();
        let mut n = 0;
        replay(dir.path(), false, |_, _| {
            n += 1;
            Ok(())
        })
        .expect("replay");
        assert_eq!(n, 60);
    }

    #[tokio::test]
    async fn segments_flushed_past_are_removed_and_counted_off() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = small_segments(dir.path());
        let table = uuid::Uuid::from_u128(7);
        let mut last = 0;
        for i in 0..150u8 {
            last = log.append_mutation(&[i; 100], Some(table)).expect("append");
        }
        log.wait_written(last).await.expect("written");
        let active = segment_of(last);
        let ids = |d: &Path| -> Vec<u64> {
            list_segments(d)
                .expect("list")
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        };
        assert!(ids(dir.path()).iter().filter(|id| **id < active).count() >= 2);
        // not flushed at all: every segment stays
        assert!(log.discard_flushed(&|_| 0).is_empty());
        let before = log.total_bytes();
        // flushed up to the active segment: every older one goes
        let removed = log.discard_flushed(&|_| position(active, 0));
        assert!(!removed.is_empty());
        assert!(ids(dir.path()).iter().all(|id| *id >= active));
        // (not compared with the files exactly: the syncer may be adding a
        // spare segment meanwhile, counted once it exists)
        assert!(
            log.total_bytes() < before,
            "the removed bytes are counted off"
        );
        log.shutdown();
    }

    #[tokio::test]
    async fn batch_mode_waits_for_fsync() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = CommitLog::open(dir.path(), SyncMode::Batch, 1 << 20).expect("open");
        let pos = log
            .append(&Entry::Mutation(vec![1; 10]), None)
            .expect("append");
        log.wait_durable(pos).await.expect("durable");
        log.shutdown();
    }

    #[tokio::test]
    async fn buffered_entries_reach_the_os_in_one_write_before_acknowledgement() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = small_segments(dir.path());
        let seg = list_segments(dir.path()).expect("list")[0].1.clone();
        let mut ends = Vec::new();
        for i in 0..10u8 {
            ends.push(log.append_mutation(&[i; 50], None).expect("append"));
        }
        // appended, not yet written: a crash now would lose only unacknowledged entries
        assert_eq!(
            std::fs::metadata(&seg).expect("meta").len(),
            HEADER_LEN as u64
        );
        log.wait_written(ends[3]).await.expect("written");
        assert_eq!(
            std::fs::metadata(&seg).expect("meta").len(),
            HEADER_LEN as u64 + 10 * 63,
            "one write carries all ten"
        );
        for e in &ends {
            log.wait_written(*e).await.expect("written");
        }
        // a segment rolls past its size with the buffered entries written first
        for i in 0..100u8 {
            let end = log.append_mutation(&[i; 50], None).expect("append");
            log.wait_written(end).await.expect("written");
        }
        log.shutdown();
        let mut seen = Vec::new();
        replay(dir.path(), false, |_, e| {
            seen.push(e);
            Ok(())
        })
        .expect("replay");
        assert_eq!(seen.len(), 110);
        assert_eq!(seen[9], Entry::Mutation(vec![9; 50]));
        assert_eq!(seen[109], Entry::Mutation(vec![99; 50]));
        assert!(list_segments(dir.path()).expect("list").len() > 1);
    }
}
