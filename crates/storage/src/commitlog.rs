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
//! then zeros to the segment's size. Entries never span segments.
//!
//! Segments are made whole ahead of need (allocated on disk to
//! `commitlog_segment_size`) and mapped into memory, as Cassandra's: an
//! append is a copy into the page cache under a lock (`mapped.rs`), so it has
//! reached the OS when it returns, and a killed process loses nothing
//! acknowledged; `batch`/`group` also survive power loss. A clean shutdown
//! cuts the active segment's unused tail.
//!
//! A position is `segment_id << 32 | offset`: it only grows, across restarts.
//! Each segment knows which tables wrote to it; once every one of them has
//! flushed past the segment, the segment is deleted.

use crate::mapped::{MappedFile, Pages};
use crate::StorageError;
use parking_lot::{Condvar, Mutex};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const SEGMENT_MAGIC: &[u8; 4] = b"SBCL";
pub const SEGMENT_VERSION: u32 = 1;
const HEADER_LEN: usize = 20;
/// Bound on a single entry, as Cassandra's `max_mutation_size` (half a segment).
pub const MAX_ENTRY_BYTES: usize = 16 * 1024 * 1024;
/// Bytes an entry takes besides its payload: length, its CRC, the payload's CRC.
const ENTRY_OVERHEAD: u64 = 12;

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

/// A segment file, allocated and mapped.
struct Segment {
    id: u64,
    file: Arc<File>,
    map: MappedFile,
    /// Bytes from the start faulted in ahead of the appends (periodic
    /// mode, [`POPULATE_AHEAD`]).
    populated: u64,
}

/// How far ahead of the appends the syncer faults a segment's pages in
/// (periodic mode): an append on an event loop then copies into mapped
/// pages instead of taking a page fault every 4 KB (3% of a write's CPU
/// under latte writes, bench/README.md, 2026-12-02). The pages faulted in
/// are dirty, so a sync writes those not yet appended to as well: at most
/// this much more per sync, every 10 s by default. Not in batch or group
/// mode, whose syncs come every few milliseconds: each would write the
/// window again.
const POPULATE_AHEAD: u64 = 1 << 20;

struct Writer {
    /// Tables with data in each segment not yet flushed.
    dirty: std::collections::BTreeMap<u64, std::collections::HashSet<uuid::Uuid>>,
    /// The last (segment, table) added to `dirty`: most appends repeat it,
    /// and need no look-up (the active segment's set only grows).
    last_dirty: Option<(u64, uuid::Uuid)>,
    /// The segment appended to; none once shut down.
    active: Option<Segment>,
    segment_id: u64,
    /// Bytes of the active segment holding its header and entries.
    segment_bytes: u64,
    dir: PathBuf,
    /// Rolled segments the syncer has not fsynced yet (it unmaps them after,
    /// off the write path).
    unsynced: Vec<Segment>,
    /// The next segment, made ahead of need by the syncer thread so that a
    /// roll on the write path makes no file system calls.
    spare: Option<Segment>,
    /// The next segment id to hand out (ids only grow; a spare made too late
    /// for its roll is deleted, leaving a gap).
    next_id: u64,
}

struct SyncState {
    requested: u64,
    synced: u64,
    error: Option<String>,
}

/// An fsync this slow counts as a pause of the node (`nodetool gcstats`, gc.log).
const FSYNC_STALL: std::time::Duration = std::time::Duration::from_millis(100);

/// The commit log of a node.
///
/// Appending copies an entry into the active segment's mapping under
/// `writer`, a lock never held across a system call but where a roll finds no
/// spare segment ready. Segment files are created and fsynced by the syncer
/// thread. (Before segments were mapped, an append went to a buffer that
/// one of the waiting writers then wrote to the file: a `write` per group of
/// writes was 7% of a write's CPU under latte, and every write waited for
/// it, bench/README.md.)
pub struct CommitLog {
    writer: Mutex<Writer>,
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
    /// The syncer faults pages in ahead of the appends (periodic mode, on a
    /// kernel that can; [`POPULATE_AHEAD`]).
    populate_ahead: AtomicBool,
    /// The appends came near the end of what is faulted in.
    need_populate: AtomicBool,
    /// Held while a spare is made (shutdown waits for it, then removes it).
    making_spare: Mutex<()>,
    /// Bytes of all segment files, kept as they are made and removed (the
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

fn shut_down() -> StorageError {
    StorageError::CommitLogStopped("the commit log is shut down".into())
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

/// Makes segment `id` of `size` bytes: its header written and fsynced, its
/// whole size allocated on disk, mapped. Nothing is left behind on failure
/// (a full disk leaves no half-made segment).
fn open_segment(dir: &Path, id: u64, size: u64) -> Result<Segment, StorageError> {
    let path = segment_path(dir, id);
    let mut f = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    let mut made = || {
        let mut h = Vec::with_capacity(HEADER_LEN);
        h.extend_from_slice(SEGMENT_MAGIC);
        h.extend_from_slice(&SEGMENT_VERSION.to_be_bytes());
        h.extend_from_slice(&id.to_be_bytes());
        let crc = crc32fast::hash(&h);
        h.extend_from_slice(&crc.to_be_bytes());
        f.write_all(&h)?;
        let len = usize::try_from(size.max(HEADER_LEN as u64)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "segment too large")
        })?;
        let map = MappedFile::allocate_and_map(&f, len)?;
        f.sync_all()?;
        Ok::<_, std::io::Error>(map)
    };
    match made() {
        Ok(map) => {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(Segment {
                id,
                file: Arc::new(f),
                map,
                populated: 0,
            })
        }
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(io_err(&path, e))
        }
    }
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
/// position of its end. A partial entry at the end of a segment's entries (a
/// copy the process died in; a rolled segment is fsynced after the roll, so
/// after a power loss an older segment can end in one too) is ignored, as is
/// garbage after the last whole entry of the newest segment; any other damage is an
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
        // segments are made whole, zero-filled: zeros where an entry would
        // start end the segment, and a damaged entry with nothing but zeros
        // after it is one a crash cut short (the process died copying it, or
        // a power loss kept only some of its pages)
        let zero_from = |p: usize| data.get(p..).is_none_or(|r| r.iter().all(|b| *b == 0));
        let mut pos = HEADER_LEN;
        while pos < data.len() {
            let is_tail_region = i == last;
            if data.len() - pos < 8 {
                stats.torn_tail |= !zero_from(pos);
                break;
            }
            let len_bytes = &data[pos..pos + 4];
            let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]])
                as usize;
            let len_crc = &data[pos + 4..pos + 8];
            if crc32fast::hash(len_bytes).to_be_bytes() != len_crc {
                if zero_from(pos) {
                    break;
                }
                if is_tail_region || zero_from(pos + 8) {
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
                if zero_from(end) {
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
        let first = open_segment(dir, next_id, segment_size_bytes)?;
        let first_bytes = first.map.len() as u64;
        let (synced_tx, _) = tokio::sync::watch::channel(0u64);
        let log = Arc::new(CommitLog {
            writer: Mutex::new(Writer {
                dirty: Default::default(),
                last_dirty: None,
                active: Some(first),
                segment_id: next_id,
                segment_bytes: HEADER_LEN as u64,
                dir: dir.to_path_buf(),
                unsynced: Vec::new(),
                spare: None,
                next_id: next_id + 1,
            }),
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
            populate_ahead: AtomicBool::new(matches!(mode, SyncMode::Periodic(_))),
            need_populate: AtomicBool::new(true),
            making_spare: Mutex::new(()),
            disk_bytes: std::sync::atomic::AtomicU64::new(existing_bytes + first_bytes),
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
        let mut w = self.writer.lock();
        self.append_locked(&mut w, payload[0], &payload[1..], table)
    }

    /// Appends a mutation entry (`payload` from `serde::encode_mutation`)
    /// and returns its end position. The entry has reached the OS when this
    /// returns (a killed process loses nothing appended): call
    /// [`CommitLog::wait_durable`] before acknowledging.
    pub fn append_mutation(
        &self,
        payload: &[u8],
        table: Option<uuid::Uuid>,
    ) -> Result<u64, StorageError> {
        let mut w = self.writer.lock();
        self.append_locked(&mut w, 1, payload, table)
    }

    fn append_locked(
        &self,
        w: &mut Writer,
        kind: u8,
        payload: &[u8],
        table: Option<uuid::Uuid>,
    ) -> Result<u64, StorageError> {
        if self.stopped.load(Ordering::Relaxed) {
            return Err(shut_down());
        }
        let len = payload.len() + 1;
        if len > MAX_ENTRY_BYTES {
            return Err(StorageError::CommitLogStopped(format!(
                "Mutation of {len} bytes is too large for the maximum size of {MAX_ENTRY_BYTES}"
            )));
        }
        let entry_bytes = len as u64 + ENTRY_OVERHEAD;
        let room = w.active.as_ref().map_or(0, |s| s.map.len() as u64);
        if w.segment_bytes + entry_bytes > room {
            let started = sibyl_metrics::Instant::now();
            self.roll(w, entry_bytes)?;
            self.waiting_on_segment_allocation.record_elapsed(started);
        }
        let at = w.segment_bytes as usize;
        let Some(seg) = w.active.as_mut() else {
            return Err(shut_down());
        };
        // length, its CRC and the kind in one copy, then the body, then the
        // CRC of kind and body
        let lb = (len as u32).to_be_bytes();
        let mut head = [0u8; 9];
        head[..4].copy_from_slice(&lb);
        head[4..8].copy_from_slice(&crc32fast::hash(&lb).to_be_bytes());
        head[8] = kind;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&[kind]);
        crc.update(payload);
        seg.map.write(at, &head);
        seg.map.write(at + 9, payload);
        seg.map.write(at + 8 + len, &crc.finalize().to_be_bytes());
        w.segment_bytes += entry_bytes;
        // (up to the segment's end: past it there is nothing to fault in,
        // and the syncer would be woken by every append)
        let wanted = (w.segment_bytes + POPULATE_AHEAD / 2).min(seg.map.len() as u64);
        if seg.populated < wanted
            && self.populate_ahead.load(Ordering::Relaxed)
            && !self.need_populate.swap(true, Ordering::Relaxed)
        {
            self.wake_syncer.notify_one();
        }
        if let Some(t) = table {
            let seg = w.segment_id;
            if w.last_dirty != Some((seg, t)) {
                w.dirty.entry(seg).or_default().insert(t);
                w.last_dirty = Some((seg, t));
            }
        }
        self.completed.inc();
        Ok(position(w.segment_id, w.segment_bytes))
    }

    /// Starts the next segment, one with room for an entry of `entry_bytes`:
    /// the spare the syncer made, or a new file when it has none ready (or
    /// the entry is larger than a segment). The old segment is fsynced and
    /// unmapped later by the syncer.
    fn roll(&self, w: &mut Writer, entry_bytes: u64) -> Result<(), StorageError> {
        let need = HEADER_LEN as u64 + entry_bytes;
        let next = match w.spare.take() {
            Some(s) if s.map.len() as u64 >= need => s,
            other => {
                w.spare = other;
                // the new segment must exist whole before it is used (a full
                // disk leaves the current one in place, and nothing half-made)
                let id = w.next_id;
                w.next_id += 1;
                let seg = open_segment(&w.dir, id, self.segment_size_bytes.max(need))?;
                self.disk_bytes
                    .fetch_add(seg.map.len() as u64, Ordering::Relaxed);
                seg
            }
        };
        w.segment_id = next.id;
        w.segment_bytes = HEADER_LEN as u64;
        if let Some(old) = w.active.replace(next) {
            w.unsynced.push(old);
        }
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
        match open_segment(&dir, id, self.segment_size_bytes) {
            Ok(mut seg) => {
                if self.populate_ahead.load(Ordering::Relaxed) {
                    self.populate(&seg.map.pages(), 0, POPULATE_AHEAD);
                    seg.populated = POPULATE_AHEAD;
                }
                let bytes = seg.map.len() as u64;
                self.disk_bytes.fetch_add(bytes, Ordering::Relaxed);
                let mut w = self.writer.lock();
                if w.spare.is_none() && id > w.segment_id && !self.stopped.load(Ordering::Relaxed) {
                    w.spare = Some(seg);
                    return;
                }
                drop(w);
                drop(seg);
                self.remove_segment_file(&dir, id, bytes);
            }
            Err(e) => {
                // the roll will try again itself, and report the error
                tracing::warn!("cannot create the next commit log segment: {e}");
            }
        }
    }

    /// Faults in `len` bytes from `from` of a segment; a kernel that cannot
    /// (before Linux 5.14) turns populating off.
    fn populate(&self, pages: &Pages, from: u64, len: u64) {
        let (from, len) = (from as usize, len as usize);
        if !pages.populate(from, len) {
            self.populate_ahead.store(false, Ordering::Relaxed);
        }
    }

    /// Faults in the active segment's pages up to [`POPULATE_AHEAD`] past
    /// its appends (syncer thread). Under `making_spare`: shutdown, which
    /// takes it too, then cuts the segment with no `Pages` handle alive.
    fn populate_active(&self) {
        let _making = self.making_spare.lock();
        self.need_populate.store(false, Ordering::Relaxed);
        if !self.populate_ahead.load(Ordering::Relaxed) {
            return;
        }
        let (id, pages, from, to) = {
            let w = self.writer.lock();
            let Some(seg) = w.active.as_ref() else {
                return;
            };
            let to = (w.segment_bytes + POPULATE_AHEAD).min(seg.map.len() as u64);
            (
                seg.id,
                seg.map.pages(),
                seg.populated.max(w.segment_bytes),
                to,
            )
        };
        if from >= to {
            return;
        }
        self.populate(&pages, from, to - from);
        let mut w = self.writer.lock();
        if let Some(seg) = w.active.as_mut().filter(|s| s.id == id) {
            seg.populated = seg.populated.max(to);
        }
    }

    fn remove_segment_file(&self, dir: &Path, id: u64, bytes: u64) {
        if std::fs::remove_file(segment_path(dir, id)).is_ok() {
            self.count_off(bytes);
        }
    }

    fn count_off(&self, bytes: u64) {
        let _ = self
            .disk_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b - bytes.min(b))
            });
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
                self.count_off(len);
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
        let started = sibyl_metrics::Instant::now();
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

    /// Fsyncs every segment with unsynced entries (unmapping the rolled
    /// ones); returns the position everything before which is durable.
    fn sync_now(&self) -> Result<u64, String> {
        let _pass = self.sync_pass.lock();
        let (rolled, active, pos) = {
            let mut w = self.writer.lock();
            let rolled = std::mem::take(&mut w.unsynced);
            let active = w.active.as_ref().map(|s| s.file.clone());
            (rolled, active, position(w.segment_id, w.segment_bytes))
        };
        // a rolled segment is unmapped before its fsync, with one TLB flush
        // for the whole range: an fsync of a mapped segment makes each page
        // read-only first, one TLB shootdown (an interrupt of every other
        // core running the node) per 4 KB page, 8,192 for a segment
        // (bench/README.md, 2026-12-05)
        let rolled: Vec<Arc<File>> = rolled.into_iter().map(|seg| seg.file).collect();
        let started = std::time::Instant::now();
        for file in rolled {
            file.sync_data().map_err(|e| e.to_string())?;
        }
        if let Some(f) = active {
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
                    // segment durable) or by shutdown, and between syncs by
                    // appends near the end of the pages faulted in; a
                    // wake-up may be missed, so the flags are looked at
                    // every 100 ms
                    let start = std::time::Instant::now();
                    loop {
                        let mut st = self.state.lock();
                        while !self.need_spare.load(Ordering::Relaxed)
                            && !self.stopped.load(Ordering::Relaxed)
                            && !self.need_populate.load(Ordering::Relaxed)
                        {
                            let left = p.saturating_sub(start.elapsed());
                            if left.is_zero() {
                                break;
                            }
                            let _ = self
                                .wake_syncer
                                .wait_for(&mut st, left.min(Duration::from_millis(100)));
                        }
                        drop(st);
                        if self.need_populate.load(Ordering::Relaxed) {
                            self.populate_active();
                        }
                        if self.need_spare.load(Ordering::Relaxed)
                            || self.stopped.load(Ordering::Relaxed)
                            || start.elapsed() >= p
                        {
                            break;
                        }
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

    /// Stops accepting writes and makes everything durable; the active
    /// segment is cut to its entries and the spare removed, so a cleanly
    /// shut down log holds only what was written.
    pub fn shutdown(&self) {
        // under the writer's lock: no append is under way, none follows
        {
            let _w = self.writer.lock();
            self.stopped.store(true, Ordering::Relaxed);
        }
        let _ = self.sync_now();
        let _making = self.making_spare.lock();
        let (active, used, spare, dir) = {
            let mut w = self.writer.lock();
            (
                w.active.take(),
                w.segment_bytes,
                w.spare.take(),
                w.dir.clone(),
            )
        };
        if let Some(seg) = active {
            let Segment { file, map, .. } = seg;
            let mapped = map.len() as u64;
            // unmapped first: the file is never shorter than its mapping
            drop(map);
            if file.set_len(used).and_then(|_| file.sync_all()).is_ok() {
                self.count_off(mapped.saturating_sub(used));
            }
        }
        if let Some(seg) = spare {
            let (id, bytes) = (seg.id, seg.map.len() as u64);
            drop(seg);
            self.remove_segment_file(&dir, id, bytes);
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

    /// Where each entry of a segment's bytes ends.
    fn entry_ends(data: &[u8]) -> Vec<usize> {
        let mut pos = HEADER_LEN;
        let mut ends = Vec::new();
        while pos + 8 <= data.len() {
            let len = u32::from_be_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]);
            if len == 0 {
                break;
            }
            pos += 12 + len as usize;
            ends.push(pos);
        }
        ends
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
        // a rolled segment keeps its zero-filled tail; a power loss that kept
        // only part of its last entry leaves zeros in place of the rest
        let mut data = std::fs::read(&segs[0].1).expect("read");
        let end = entry_ends(&data).pop().expect("entries");
        data[end - 3..end].fill(0);
        std::fs::write(&segs[0].1, data).expect("write");
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
    fn an_appended_entry_is_in_its_file_at_once_and_a_crash_mid_copy_is_a_torn_tail() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = CommitLog::open(
            dir.path(),
            SyncMode::Periodic(Duration::from_secs(3600)),
            1 << 20,
        )
        .expect("open");
        for i in 0..10u8 {
            log.append_mutation(&[i; 50], None).expect("append");
        }
        // no write, no sync, no shutdown: what a killed process leaves
        let mut seen = Vec::new();
        let stats = replay(dir.path(), false, |_, e| {
            seen.push(e);
            Ok(())
        })
        .expect("replay");
        assert_eq!(seen.len(), 10);
        assert_eq!(seen[9], Entry::Mutation(vec![9; 50]));
        assert!(!stats.torn_tail);
        // the process died copying an eleventh entry: its length and part of
        // its payload are there, the rest is the segment's zeros
        let seg = list_segments(dir.path()).expect("list")[0].1.clone();
        let mut data = std::fs::read(&seg).expect("read");
        let end = *entry_ends(&data).last().expect("entries");
        let lb = 51u32.to_be_bytes();
        data[end..end + 4].copy_from_slice(&lb);
        data[end + 4..end + 8].copy_from_slice(&crc32fast::hash(&lb).to_be_bytes());
        data[end + 8..end + 20].fill(1);
        log.shutdown();
        std::fs::write(&seg, &data).expect("write");
        let mut n = 0;
        let stats = replay(dir.path(), false, |_, _| {
            n += 1;
            Ok(())
        })
        .expect("replay");
        assert_eq!(n, 10);
        assert!(stats.torn_tail);
    }

    #[test]
    fn an_entry_larger_than_a_segment_gets_a_segment_of_its_own() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = small_segments(dir.path());
        log.append_mutation(&[1; 100], None).expect("append");
        let big = log.append_mutation(&[2; 10_000], None).expect("append");
        let after = log.append_mutation(&[3; 100], None).expect("append");
        assert!(segment_of(after) > segment_of(big));
        log.shutdown();
        let mut seen = Vec::new();
        replay(dir.path(), false, |_, e| {
            seen.push(e);
            Ok(())
        })
        .expect("replay");
        assert_eq!(
            seen,
            vec![
                Entry::Mutation(vec![1; 100]),
                Entry::Mutation(vec![2; 10_000]),
                Entry::Mutation(vec![3; 100])
            ]
        );
    }

    #[tokio::test]
    async fn a_roll_uses_the_spare_segment_made_ahead_by_the_syncer() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = small_segments(dir.path());
        let spare_ready = || log.writer.lock().spare.as_ref().map(|s| s.id);
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
        assert_eq!(replayed(dir.path()), 60);
    }

    /// Entries a replay of `dir` finds.
    fn replayed(dir: &Path) -> usize {
        let mut n = 0;
        replay(dir, false, |_, _| {
            n += 1;
            Ok(())
        })
        .expect("replay");
        n
    }

    /// (populated bytes, appended bytes) of the active segment.
    fn populated(log: &CommitLog) -> (u64, u64) {
        let w = log.writer.lock();
        (
            w.active.as_ref().map_or(0, |s| s.populated),
            w.segment_bytes,
        )
    }

    #[test]
    fn in_periodic_mode_the_syncer_faults_pages_in_ahead_of_the_appends() {
        let dir = tempfile::tempdir().expect("tmp");
        let period = SyncMode::Periodic(Duration::from_secs(3600));
        let log = CommitLog::open(dir.path(), period, 8 << 20).expect("open");
        let ahead = |log: &CommitLog| {
            let (populated, appended) = populated(log);
            populated >= appended + POPULATE_AHEAD / 2
        };
        let wait = |log: &CommitLog| {
            for _ in 0..300 {
                if ahead(log) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            false
        };
        assert!(wait(&log), "the first segment is faulted in from its start");
        // 3 MB of appends: three times the window, so the syncer (and not
        // a sync, an hour away) must have kept ahead
        for _ in 0..3 {
            for i in 0..5_000u32 {
                log.append_mutation(&[i as u8; 200], None).expect("append");
            }
            assert!(wait(&log), "ahead again: {:?}", populated(&log));
        }
        log.shutdown();
        assert_eq!(replayed(dir.path()), 15_000, "faulting in changes no entry");

        // faulted in to its end, a segment's last appends wake no one
        let dir = tempfile::tempdir().expect("tmp");
        let log = CommitLog::open(dir.path(), period, 2 << 20).expect("open");
        for i in 0..8_000u32 {
            log.append_mutation(&[i as u8; 200], None).expect("append");
        }
        let len = log
            .writer
            .lock()
            .active
            .as_ref()
            .map(|s| s.map.len() as u64);
        // (and the syncer done: an append while it faulted the last pages
        // in may have asked for it again)
        for _ in 0..300 {
            if Some(populated(&log).0) >= len && !log.need_populate.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            Some(populated(&log).0) >= len,
            "{:?} of {len:?}",
            populated(&log)
        );
        for i in 0..100u8 {
            log.append_mutation(&[i; 200], None).expect("append");
            assert!(!log.need_populate.load(Ordering::Relaxed));
        }
        log.shutdown();

        // batch mode syncs every few writes: it never faults ahead
        let dir = tempfile::tempdir().expect("tmp");
        let log = CommitLog::open(dir.path(), SyncMode::Batch, 8 << 20).expect("open");
        for i in 0..5_000u32 {
            log.append_mutation(&[i as u8; 200], None).expect("append");
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(populated(&log).0, 0);
        log.shutdown();
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
        let active = segment_of(last);
        let ids = |d: &Path| -> Vec<u64> {
            list_segments(d)
                .expect("list")
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        };
        assert!(ids(dir.path()).iter().filter(|id| **id < active).count() >= 2);
        // not flushed at all: every segment stays (while no spare is being
        // made: one made too late for its roll is a file of no table until
        // the syncer removes it)
        {
            let _no_spare_in_the_making = log.making_spare.lock();
            assert!(log.discard_flushed(&|_| 0).is_empty());
        }
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

    #[test]
    fn a_clean_shutdown_cuts_the_active_segment_to_its_entries() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = small_segments(dir.path());
        let before = log.total_bytes();
        assert_eq!(before, 4096, "the active segment is made whole");
        let mut last = 0;
        for i in 0..100u8 {
            last = log.append_mutation(&[i; 50], None).expect("append");
        }
        log.shutdown();
        assert!(log.append_mutation(&[0; 50], None).is_err());
        let segs = list_segments(dir.path()).expect("list");
        let (id, path) = segs.last().expect("segments");
        assert_eq!(*id, segment_of(last), "no spare is left");
        let len = std::fs::metadata(path).expect("meta").len();
        assert_eq!(position(*id, len), last);
        let on_disk: u64 = segs
            .iter()
            .map(|(_, p)| std::fs::metadata(p).expect("meta").len())
            .sum();
        assert_eq!(log.total_bytes(), on_disk);
        let mut seen = Vec::new();
        replay(dir.path(), false, |_, e| {
            seen.push(e);
            Ok(())
        })
        .expect("replay");
        assert_eq!(seen.len(), 100);
        assert_eq!(seen[99], Entry::Mutation(vec![99; 50]));
        assert!(segs.len() > 1);
    }
}
