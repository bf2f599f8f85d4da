//! SSTables ("sb"): immutable files of partitions in token order, written by
//! a memtable flush or a compaction. Format version 2; version 1 files (no
//! row indexes, no clustering bounds) are still read.
//!
//! Components of generation N in a table's directory:
//! - `sb-N-Data.db`: chunks `kind u8 | uncompressed u32 | compressed u32 |
//!   crc32(stored bytes) u32 | bytes`; a chunk holds entries
//!   `key_len u32 | key | body_len u32 | body` (body: `serde::encode_partition`).
//!   `kind` 0 is stored as is, 1 is LZ4, 2 Zstd, 3 Snappy, 4 Deflate (zlib).
//!   Every read verifies the CRC. A small partition is one entry. A partition
//!   larger than a chunk is a header entry (partition deletion, static row,
//!   range tombstones) followed by blocks of rows, each block starting a chunk
//!   of its own: the row index.
//! - `sb-N-Index.db`: `b"SBIX" | version u32`, then per partition
//!   `key_len u16 | key | chunk_offset u64 | offset_in_chunk u32`, and in
//!   version 2 `row_index_len u32 | row_index`, where the row index is
//!   `blocks u32` then per block `last clustering | chunk_offset u64 |
//!   offset_in_chunk u32`, so a clustering slice reads only the blocks it
//!   overlaps. One in 128 entries is kept in memory as the summary.
//! - `sb-N-Filter.db`: the bloom filter, `hashes u32 | bits u64 | words`.
//! - `sb-N-Statistics.db`: JSON: counts, token, timestamp and clustering
//!   bounds, whether any partition has a deletion or a static row, the commit
//!   log position the data covers, CRCs of the index and filter.
//! - `sb-N-TOC.txt`: the component list. Components are written under `tmp-`
//!   names, fsynced and renamed; the TOC is renamed last, so an SSTable without
//!   a TOC never became visible and is removed at start-up.

use crate::cache::{KeyCache, KeyEntry};
use crate::clustering::ClusteringComparator;
use crate::clustering::{BoundKind, ClusteringKey};
use crate::data::{DecoratedKey, Partition, Row};
use crate::memtable::Slice;
use crate::serde::{
    decode_clustering, decode_partition, encode_clustering, encode_partition, encode_rows,
    encoded_row_len,
};
use crate::StorageError;
use bytes::Bytes;
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const FORMAT_VERSION: u32 = 2;
/// Versions this build reads.
const READABLE_VERSIONS: [u32; 2] = [1, 2];
const INDEX_MAGIC: &[u8; 4] = b"SBIX";
const CHUNK_HEADER: usize = 13;
const SUMMARY_INTERVAL: usize = 128;
/// Upper bound on a chunk's size, so a corrupt length cannot allocate wildly.
const MAX_CHUNK_BYTES: u32 = 256 * 1024 * 1024;
const COMPONENTS: [&str; 4] = ["Data.db", "Index.db", "Filter.db", "Statistics.db"];

fn io(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Io {
        path: path.display().to_string(),
        source: e,
    }
}

fn corrupt(path: &Path, position: u64, reason: impl Into<String>) -> StorageError {
    StorageError::CorruptSSTable {
        path: path.display().to_string(),
        position,
        reason: reason.into(),
    }
}

/// File name of a component.
pub fn component_path(dir: &Path, generation: u64, component: &str) -> PathBuf {
    dir.join(format!("sb-{generation}-{component}"))
}

/// An SSTable's path without its component (Cassandra's `baseFile`), for
/// log lines.
pub fn base_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("sb-{generation}"))
}

fn tmp_path(dir: &Path, generation: u64, component: &str) -> PathBuf {
    dir.join(format!("tmp-sb-{generation}-{component}"))
}

// ---------- compression ----------

/// Block compression of the Data component (the table's `compression` option).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Compression {
    None,
    Lz4,
    /// Zstd at a level (Cassandra's `compression_level`, default 3).
    Zstd(i32),
    Snappy,
    Deflate,
}

impl Compression {
    /// The name in the statistics (and `sibyl sstable dump`).
    pub fn name(&self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "LZ4",
            Compression::Zstd(_) => "Zstd",
            Compression::Snappy => "Snappy",
            Compression::Deflate => "Deflate",
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd(_) => 2,
            Compression::Snappy => 3,
            Compression::Deflate => 4,
        }
    }

    fn compress(&self, plain: &[u8]) -> Vec<u8> {
        match self {
            Compression::None => plain.to_vec(),
            Compression::Lz4 => lz4_flex::block::compress(plain),
            // compressing into memory cannot fail but for allocation; fall back to none
            Compression::Zstd(level) => {
                zstd::bulk::compress(plain, *level).unwrap_or_else(|_| plain.to_vec())
            }
            Compression::Snappy => snap::raw::Encoder::new()
                .compress_vec(plain)
                .unwrap_or_else(|_| plain.to_vec()),
            Compression::Deflate => {
                let mut e = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(plain.len() / 2),
                    flate2::Compression::default(),
                );
                match e.write_all(plain).and_then(|_| e.finish()) {
                    Ok(v) => v,
                    Err(_) => plain.to_vec(),
                }
            }
        }
    }
}

/// Decompresses a stored chunk of `kind` into exactly `ulen` bytes.
fn decompress(kind: u8, stored: Vec<u8>, ulen: usize) -> Result<Vec<u8>, String> {
    let out = match kind {
        0 => stored,
        1 => lz4_flex::block::decompress(&stored, ulen).map_err(|e| format!("LZ4: {e}"))?,
        2 => zstd::bulk::decompress(&stored, ulen).map_err(|e| format!("Zstd: {e}"))?,
        3 => snap::raw::Decoder::new()
            .decompress_vec(&stored)
            .map_err(|e| format!("Snappy: {e}"))?,
        4 => {
            let mut out = Vec::with_capacity(ulen);
            flate2::read::ZlibDecoder::new(&stored[..])
                .take(ulen as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("Deflate: {e}"))?;
            out
        }
        k => return Err(format!("unknown chunk kind {k}")),
    };
    if out.len() != ulen {
        return Err(format!(
            "chunk decompressed to {} bytes, expected {ulen}",
            out.len()
        ));
    }
    Ok(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Bytes> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()
        .map(Bytes::from)
}

// ---------- bloom filter ----------

/// A bloom filter over partition keys (Cassandra's double hashing of Murmur3).
#[derive(Debug, Clone)]
pub struct BloomFilter {
    hashes: u32,
    bits: u64,
    words: Vec<u64>,
}

impl BloomFilter {
    /// Sized for `keys` entries at the false-positive chance `fp`.
    pub fn new(keys: usize, fp: f64) -> Self {
        let n = keys.max(1) as f64;
        let fp = fp.clamp(1e-6, 1.0);
        let bits = if fp >= 1.0 {
            64
        } else {
            ((-n * fp.ln()) / (std::f64::consts::LN_2.powi(2)))
                .ceil()
                .max(64.0) as u64
        };
        let hashes = if fp >= 1.0 {
            1
        } else {
            ((bits as f64 / n) * std::f64::consts::LN_2)
                .round()
                .clamp(1.0, 20.0) as u32
        };
        BloomFilter {
            hashes,
            bits,
            words: vec![0; bits.div_ceil(64) as usize],
        }
    }

    fn positions(&self, key: &[u8]) -> impl Iterator<Item = u64> + '_ {
        let (h1, h2) = sibyl_types::murmur3::hash3_x64_128(key, 0);
        (0..self.hashes as u64).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % self.bits)
    }

    pub fn add(&mut self, key: &[u8]) {
        let ps: Vec<u64> = self.positions(key).collect();
        for p in ps {
            self.words[(p / 64) as usize] |= 1 << (p % 64);
        }
    }

    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.positions(key).all(|p| {
            self.words
                .get((p / 64) as usize)
                .map(|w| w & (1 << (p % 64)) != 0)
                .unwrap_or(false)
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.words.len() * 8);
        out.extend_from_slice(&self.hashes.to_be_bytes());
        out.extend_from_slice(&self.bits.to_be_bytes());
        for w in &self.words {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out
    }

    fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < 12 {
            return None;
        }
        let hashes = u32::from_be_bytes(b[0..4].try_into().ok()?);
        let bits = u64::from_be_bytes(b[4..12].try_into().ok()?);
        let words: Vec<u64> = b[12..]
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        if bits == 0 || words.len() as u64 != bits.div_ceil(64) || hashes == 0 || hashes > 64 {
            return None;
        }
        Some(BloomFilter {
            hashes,
            bits,
            words,
        })
    }
}

// ---------- statistics ----------

/// The table layout an SSTable was written with (Cassandra's
/// `SerializationHeader`): enough for offline tools to decode it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SerializationHeader {
    pub keyspace: String,
    pub table: String,
    pub partition_key_types: Vec<String>,
    pub clustering_types: Vec<String>,
    pub clustering_reversed: Vec<bool>,
    /// Regular and static columns: name → CQL type.
    pub columns: std::collections::BTreeMap<String, String>,
}

/// What an SSTable holds, written at flush and read at open.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Statistics {
    #[serde(default)]
    pub header: SerializationHeader,
    pub version: u32,
    pub partitions: u64,
    pub rows: u64,
    pub min_token: i64,
    pub max_token: i64,
    pub min_timestamp: i64,
    pub max_timestamp: i64,
    /// Every commit log entry of this table before this position is in this
    /// SSTable or an older one (see `commitlog` for the encoding).
    pub commitlog_position: u64,
    pub data_bytes: u64,
    pub compression: String,
    pub index_crc: u32,
    pub filter_crc: u32,
    pub bloom_filter_fp_chance: f64,
    /// Leveled compaction's level (0 for flushed SSTables).
    #[serde(default)]
    pub level: u32,
    /// The latest time (seconds) at which anything here expires or was
    /// deleted; `i32::MAX` when it holds live data that never expires.
    #[serde(default = "never")]
    pub max_local_deletion_time: i32,
    /// The smallest and largest clustering of any row or range tombstone
    /// bound (hex of each component); absent in version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_clustering: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_clustering: Option<Vec<String>>,
    /// Whether any partition has a partition deletion / a static row.
    #[serde(default)]
    pub partition_deletions: bool,
    #[serde(default)]
    pub static_rows: bool,
    /// Partitions written with a row index.
    #[serde(default)]
    pub indexed_partitions: u64,
    /// Partition sizes in bytes and cell counts, as counts per bucket of
    /// [`crate::metrics::bucket_offsets`] (trailing empty buckets left out).
    #[serde(default)]
    pub partition_sizes: Vec<u64>,
    #[serde(default)]
    pub cell_counts: Vec<u64>,
    /// When an incremental repair made this data consistent across its
    /// replicas (ms since the epoch; 0: unrepaired), Cassandra's
    /// `repairedAt`. A build that does not know it reads the SSTable as
    /// unrepaired, the safe side; left out when 0, so an unrepaired SSTable
    /// is written as before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repaired_at: i64,
    /// The incremental repair session this SSTable is set aside for
    /// (Cassandra's `pendingRepair`), until the session is finalized
    /// (repaired) or fails (unrepaired again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_repair: Option<String>,
}

/// Which of a table's SSTable sets an SSTable is in: compaction never mixes
/// them, incremental repair validates and streams only a session's pending
/// set, and a finalized session makes its set repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RepairState {
    Unrepaired,
    Pending(uuid::Uuid),
    /// Repaired as of this time (ms since the epoch).
    Repaired(i64),
}

impl RepairState {
    fn of(stats: &Statistics) -> RepairState {
        match stats
            .pending_repair
            .as_deref()
            .and_then(|s| uuid::Uuid::parse_str(s).ok())
        {
            Some(id) => RepairState::Pending(id),
            None if stats.repaired_at > 0 => RepairState::Repaired(stats.repaired_at),
            None => RepairState::Unrepaired,
        }
    }

    fn apply(self, stats: &mut Statistics) {
        let (at, pending) = match self {
            RepairState::Unrepaired => (0, None),
            RepairState::Pending(id) => (0, Some(id.to_string())),
            RepairState::Repaired(at) => (at, None),
        };
        stats.repaired_at = at;
        stats.pending_repair = pending;
    }

    pub fn is_repaired(self) -> bool {
        matches!(self, RepairState::Repaired(_))
    }
}

fn never() -> i32 {
    i32::MAX
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The latest local deletion time in `p` (`i32::MAX` when anything lives
/// forever): what a whole-SSTable expiry check needs.
fn local_deletion_times(p: &Partition) -> i32 {
    let mut max = i32::MIN;
    p.for_each_deletion_time(|t| max = max.max(t));
    max
}

// ---------- chunk cache ----------

/// A bounded cache of decompressed chunks shared by all SSTables of the node.
pub struct ChunkCache {
    inner: Mutex<(lru::LruCache<(u64, u64), Arc<Vec<u8>>>, usize)>,
    capacity_bytes: usize,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

impl ChunkCache {
    pub fn new(capacity_bytes: usize) -> Arc<Self> {
        Arc::new(ChunkCache {
            inner: Mutex::new((lru::LruCache::unbounded(), 0)),
            capacity_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    fn get(&self, key: (u64, u64)) -> Option<Arc<Vec<u8>>> {
        let r = self.inner.lock().0.get(&key).cloned();
        if r.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    fn put(&self, key: (u64, u64), chunk: Arc<Vec<u8>>) {
        let mut g = self.inner.lock();
        let (lru, used) = &mut *g;
        *used += chunk.len();
        if let Some(old) = lru.put(key, chunk) {
            *used -= old.len();
        }
        while *used > self.capacity_bytes {
            match lru.pop_lru() {
                Some((_, c)) => *used -= c.len(),
                None => break,
            }
        }
    }
}

static SSTABLE_IDS: AtomicU64 = AtomicU64::new(1);

// ---------- writer ----------

/// Writes one SSTable from partitions given in token order.
pub struct SSTableWriter {
    dir: PathBuf,
    generation: u64,
    data: BufWriter<File>,
    index: BufWriter<File>,
    data_offset: u64,
    chunk: Vec<u8>,
    chunk_target: usize,
    compression: Compression,
    min_clustering: Option<ClusteringKey>,
    max_clustering: Option<ClusteringKey>,
    scratch: Vec<u8>,
    partition_sizes: crate::metrics::Histogram,
    cell_counts: crate::metrics::Histogram,
    key_hashes: Vec<Bytes>,
    index_crc: crc32fast::Hasher,
    stats: Statistics,
    body: Vec<u8>,
}

impl SSTableWriter {
    pub fn create(
        dir: &Path,
        generation: u64,
        chunk_target: usize,
        compress: bool,
        fp_chance: f64,
    ) -> Result<Self, StorageError> {
        let c = if compress {
            Compression::Lz4
        } else {
            Compression::None
        };
        Self::create_with_header(
            dir,
            generation,
            chunk_target,
            c,
            fp_chance,
            SerializationHeader::default(),
        )
    }

    pub fn create_with_header(
        dir: &Path,
        generation: u64,
        chunk_target: usize,
        compression: Compression,
        fp_chance: f64,
        header: SerializationHeader,
    ) -> Result<Self, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let open = |c: &str| -> Result<BufWriter<File>, StorageError> {
            let p = tmp_path(dir, generation, c);
            let f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&p)
                .map_err(|e| io(&p, e))?;
            Ok(BufWriter::with_capacity(256 * 1024, f))
        };
        let data = open("Data.db")?;
        let mut index = open("Index.db")?;
        let mut index_crc = crc32fast::Hasher::new();
        let mut head = INDEX_MAGIC.to_vec();
        head.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
        index
            .write_all(&head)
            .map_err(|e| io(&tmp_path(dir, generation, "Index.db"), e))?;
        index_crc.update(&head);
        Ok(SSTableWriter {
            dir: dir.to_path_buf(),
            generation,
            data,
            index,
            data_offset: 0,
            chunk: Vec::with_capacity(chunk_target + 1024),
            chunk_target: chunk_target.max(4096),
            compression,
            min_clustering: None,
            max_clustering: None,
            scratch: Vec::new(),
            key_hashes: Vec::new(),
            index_crc,
            stats: Statistics {
                header,
                version: FORMAT_VERSION,
                partitions: 0,
                rows: 0,
                min_token: i64::MAX,
                max_token: i64::MIN,
                min_timestamp: i64::MAX,
                max_timestamp: i64::MIN,
                commitlog_position: 0,
                data_bytes: 0,
                compression: compression.name().into(),
                index_crc: 0,
                filter_crc: 0,
                bloom_filter_fp_chance: fp_chance,
                level: 0,
                max_local_deletion_time: i32::MIN,
                min_clustering: None,
                max_clustering: None,
                partition_deletions: false,
                static_rows: false,
                indexed_partitions: 0,
                partition_sizes: Vec::new(),
                cell_counts: Vec::new(),
                repaired_at: 0,
                pending_repair: None,
            },
            partition_sizes: Default::default(),
            cell_counts: Default::default(),
            body: Vec::new(),
        })
    }

    fn flush_chunk(&mut self) -> Result<(), StorageError> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let (kind, stored): (u8, std::borrow::Cow<[u8]>) = match self.compression {
            Compression::None => (0, std::borrow::Cow::Borrowed(&self.chunk[..])),
            c => {
                let packed = c.compress(&self.chunk);
                if packed.len() >= self.chunk.len() {
                    // incompressible: stored as is
                    (0, std::borrow::Cow::Borrowed(&self.chunk[..]))
                } else {
                    (c.kind(), std::borrow::Cow::Owned(packed))
                }
            }
        };
        let mut head = [0u8; CHUNK_HEADER];
        head[0] = kind;
        head[1..5].copy_from_slice(&(self.chunk.len() as u32).to_be_bytes());
        head[5..9].copy_from_slice(&(stored.len() as u32).to_be_bytes());
        head[9..13].copy_from_slice(&crc32fast::hash(&stored).to_be_bytes());
        let path = || tmp_path(&self.dir, self.generation, "Data.db");
        self.data.write_all(&head).map_err(|e| io(&path(), e))?;
        self.data.write_all(&stored).map_err(|e| io(&path(), e))?;
        self.data_offset += (CHUNK_HEADER + stored.len()) as u64;
        self.chunk.clear();
        Ok(())
    }

    /// Adds a Data entry to the current chunk (starting a new chunk when it
    /// would overflow); returns where it is.
    fn put_entry(&mut self, key: &[u8], body: &[u8]) -> Result<(u64, u32), StorageError> {
        let entry_len = 8 + key.len() + body.len();
        if !self.chunk.is_empty() && self.chunk.len() + entry_len > self.chunk_target {
            self.flush_chunk()?;
        }
        let intra = self.chunk.len() as u32;
        self.chunk
            .extend_from_slice(&(key.len() as u32).to_be_bytes());
        self.chunk.extend_from_slice(key);
        self.chunk
            .extend_from_slice(&(body.len() as u32).to_be_bytes());
        self.chunk.extend_from_slice(body);
        Ok((self.data_offset, intra))
    }

    /// Writes a block of rows in a chunk of its own and adds it to the row index.
    fn put_block(
        &mut self,
        key: &[u8],
        rows: &[(&ClusteringKey, &Row)],
        row_index: &mut Vec<u8>,
    ) -> Result<(), StorageError> {
        self.flush_chunk()?;
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        encode_rows(rows, &mut body);
        let (offset, intra) = self.put_entry(key, &body)?;
        self.body = body;
        if let Some((last, _)) = rows.last() {
            encode_clustering(last, row_index);
        }
        row_index.extend_from_slice(&offset.to_be_bytes());
        row_index.extend_from_slice(&intra.to_be_bytes());
        Ok(())
    }

    fn see_clustering(&mut self, ck: &ClusteringKey) {
        if self.min_clustering.as_ref().map(|m| ck < m).unwrap_or(true) {
            self.min_clustering = Some(ck.clone());
        }
        if self.max_clustering.as_ref().map(|m| ck > m).unwrap_or(true) {
            self.max_clustering = Some(ck.clone());
        }
    }

    /// Appends a partition; keys must come in token order. A partition larger
    /// than a chunk gets a row index.
    pub fn append(&mut self, key: &DecoratedKey, p: &Partition) -> Result<(), StorageError> {
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        encode_partition(p, &mut body);
        self.partition_sizes.record(body.len() as u64);
        self.cell_counts.record(p.cell_count() as u64);
        let mut row_index = Vec::new();
        let (offset, intra) = if body.len() > self.chunk_target && p.rows.len() > 1 {
            let head = Partition {
                deletion: p.deletion,
                static_row: p.static_row.clone(),
                rows: Default::default(),
                range_tombstones: p.range_tombstones.clone(),
            };
            body.clear();
            encode_partition(&head, &mut body);
            let at = self.put_entry(&key.key, &body)?;
            self.body = body;
            row_index.extend_from_slice(&0u32.to_be_bytes());
            let mut blocks = 0u32;
            let mut block: Vec<(&ClusteringKey, &Row)> = Vec::new();
            let mut size = 0;
            for (ck, r) in p.rows.iter() {
                size += encoded_row_len(ck, r, &mut self.scratch);
                block.push((ck, r));
                if size >= self.chunk_target {
                    self.put_block(&key.key, &block, &mut row_index)?;
                    blocks += 1;
                    block.clear();
                    size = 0;
                }
            }
            if !block.is_empty() {
                self.put_block(&key.key, &block, &mut row_index)?;
                blocks += 1;
            }
            row_index[0..4].copy_from_slice(&blocks.to_be_bytes());
            self.stats.indexed_partitions += 1;
            at
        } else {
            let at = self.put_entry(&key.key, &body)?;
            self.body = body;
            at
        };
        let mut e = Vec::with_capacity(18 + key.key.len() + row_index.len());
        e.extend_from_slice(&(key.key.len().min(u16::MAX as usize) as u16).to_be_bytes());
        e.extend_from_slice(&key.key);
        e.extend_from_slice(&offset.to_be_bytes());
        e.extend_from_slice(&intra.to_be_bytes());
        e.extend_from_slice(&(row_index.len() as u32).to_be_bytes());
        e.extend_from_slice(&row_index);
        let (dir, generation) = (&self.dir, self.generation);
        self.index
            .write_all(&e)
            .map_err(|err| io(&tmp_path(dir, generation, "Index.db"), err))?;
        self.index_crc.update(&e);
        self.key_hashes.push(key.key.clone());
        if let Some(first) = p.rows.keys().next() {
            self.see_clustering(first);
        }
        if let Some(last) = p.rows.keys().next_back() {
            self.see_clustering(last);
        }
        for rt in &p.range_tombstones {
            self.see_clustering(&rt.start);
            self.see_clustering(&rt.end);
        }
        let s = &mut self.stats;
        s.partitions += 1;
        s.rows += p.rows.len() as u64;
        s.min_token = s.min_token.min(key.token);
        s.max_token = s.max_token.max(key.token);
        s.partition_deletions |= !p.deletion.is_live();
        s.static_rows |= p.static_row.is_some();
        p.timestamps(&mut |t| {
            s.min_timestamp = s.min_timestamp.min(t);
            s.max_timestamp = s.max_timestamp.max(t);
        });
        s.max_local_deletion_time = s.max_local_deletion_time.max(local_deletion_times(p));
        Ok(())
    }

    /// Bytes of data written so far.
    pub fn data_bytes(&self) -> u64 {
        self.data_offset + self.chunk.len() as u64
    }

    /// Removes the temporary files of a writer that wrote nothing.
    pub fn abandon(self) {
        for c in COMPONENTS.iter().chain(["TOC.txt"].iter()) {
            let _ = std::fs::remove_file(tmp_path(&self.dir, self.generation, c));
        }
    }

    pub fn set_level(&mut self, level: u32) {
        self.stats.level = level;
    }

    /// The repair set the SSTable is written into.
    pub fn set_repair_state(&mut self, state: RepairState) {
        state.apply(&mut self.stats);
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes the remaining components, syncs and publishes the SSTable.
    pub fn finish(mut self, commitlog_position: u64) -> Result<u64, StorageError> {
        self.flush_chunk()?;
        let dir = self.dir.clone();
        let g = self.generation;
        let sync = |w: BufWriter<File>, c: &str| -> Result<(), StorageError> {
            let p = tmp_path(&dir, g, c);
            let f = w.into_inner().map_err(|e| io(&p, e.into_error()))?;
            f.sync_all().map_err(|e| io(&p, e))
        };
        sync(self.data, "Data.db")?;
        sync(self.index, "Index.db")?;
        let mut bloom = BloomFilter::new(self.key_hashes.len(), self.stats.bloom_filter_fp_chance);
        for k in &self.key_hashes {
            bloom.add(k);
        }
        let fb = bloom.encode();
        let mut stats = self.stats;
        stats.filter_crc = crc32fast::hash(&fb);
        stats.index_crc = self.index_crc.finalize();
        stats.commitlog_position = commitlog_position;
        stats.data_bytes = self.data_offset;
        let trim = |mut v: Vec<u64>| {
            while v.last() == Some(&0) {
                v.pop();
            }
            v
        };
        stats.partition_sizes = trim(self.partition_sizes.counts());
        stats.cell_counts = trim(self.cell_counts.counts());
        stats.min_clustering = self
            .min_clustering
            .map(|c| c.values.iter().map(|v| hex(v)).collect());
        stats.max_clustering = self
            .max_clustering
            .map(|c| c.values.iter().map(|v| hex(v)).collect());
        let write_all = |c: &str, bytes: &[u8]| -> Result<(), StorageError> {
            let p = tmp_path(&dir, g, c);
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&p)
                .map_err(|e| io(&p, e))?;
            f.write_all(bytes).map_err(|e| io(&p, e))?;
            f.sync_all().map_err(|e| io(&p, e))
        };
        write_all("Filter.db", &fb)?;
        let sj =
            serde_json::to_vec_pretty(&stats).map_err(|e| StorageError::Decode(e.to_string()))?;
        write_all("Statistics.db", &sj)?;
        let toc = COMPONENTS
            .iter()
            .chain(["TOC.txt"].iter())
            .map(|c| format!("{c}\n"))
            .collect::<String>();
        write_all("TOC.txt", toc.as_bytes())?;
        for c in COMPONENTS {
            let (from, to) = (tmp_path(&dir, g, c), component_path(&dir, g, c));
            std::fs::rename(&from, &to).map_err(|e| io(&from, e))?;
        }
        let (from, to) = (
            tmp_path(&dir, g, "TOC.txt"),
            component_path(&dir, g, "TOC.txt"),
        );
        std::fs::rename(&from, &to).map_err(|e| io(&from, e))?;
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(g)
    }
}

// ---------- reader ----------

/// Iterates the partitions of an SSTable in token order.
pub struct Scanner<'a> {
    reader: &'a SSTableReader,
    /// A window of Index.db: `buf[pos..]` is unread; `buf[0]` is at `buf_at`.
    buf: Vec<u8>,
    buf_at: u64,
    pos: usize,
    /// The chunk the last partition came from: a scan reads each chunk once,
    /// in file order, past the chunk cache (compaction would only evict what
    /// reads need from it).
    current: Option<(u64, Arc<Vec<u8>>)>,
}

/// How much of Index.db a scan reads at a time.
const SCAN_INDEX_READ: usize = 256 * 1024;

impl Scanner<'_> {
    /// Makes `buf[pos..]` hold at least one whole entry, reading more of the
    /// index as needed; false at the end of the index.
    fn fill(&mut self) -> Result<bool, StorageError> {
        loop {
            let end = self.buf_at + self.buf.len() as u64;
            if read_index_entry(&self.buf, self.pos, self.reader.stats.version).is_some() {
                return Ok(true);
            }
            let ip = || component_path(&self.reader.dir, self.reader.generation, "Index.db");
            if end >= self.reader.index_len {
                if self.pos < self.buf.len() {
                    return Err(corrupt(
                        &ip(),
                        self.buf_at + self.pos as u64,
                        "truncated index entry",
                    ));
                }
                return Ok(false);
            }
            // keep the unread tail, and read at least as much again as it
            // (an entry with a large row index can exceed one read)
            self.buf.drain(..self.pos);
            self.buf_at += self.pos as u64;
            self.pos = 0;
            let want = SCAN_INDEX_READ.max(self.buf.len());
            let n = want.min((self.reader.index_len - end) as usize);
            let old = self.buf.len();
            self.buf.resize(old + n, 0);
            self.reader
                .index
                .read_exact_at(&mut self.buf[old..], end)
                .map_err(|e| io(&ip(), e))?;
        }
    }
}

impl Iterator for Scanner<'_> {
    type Item = Result<(DecoratedKey, Partition), StorageError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.fill() {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                self.pos = self.buf.len();
                self.buf_at = self.reader.index_len;
                return Some(Err(e));
            }
        }
        let Scanner {
            reader,
            buf,
            pos,
            current,
            ..
        } = self;
        let e = read_index_entry(buf, *pos, reader.stats.version)?;
        *pos = e.next;
        let mut chunk = |offset: u64| -> Result<Arc<Vec<u8>>, StorageError> {
            if let Some((at, c)) = current {
                if *at == offset {
                    return Ok(c.clone());
                }
            }
            let c = reader.load_chunk(offset)?;
            *current = Some((offset, c.clone()));
            Ok(c)
        };
        Some(
            reader
                .partition_with(&e, None, &mut chunk)
                .map(|p| (DecoratedKey::new(e.key), p)),
        )
    }
}

/// An open SSTable.
pub struct SSTableReader {
    pub dir: PathBuf,
    pub generation: u64,
    id: u64,
    data: File,
    /// Data.db's path, for error messages.
    data_file: PathBuf,
    index: File,
    index_len: u64,
    summary: Vec<(DecoratedKey, u64)>,
    bloom: BloomFilter,
    pub stats: Statistics,
    comparator: Arc<ClusteringComparator>,
    cache: Arc<ChunkCache>,
    pub bloom_false_positives: AtomicU64,
    /// The repair set it is in now (`stats` has the one it was opened with).
    repair: Mutex<RepairState>,
    /// Clustering bounds a slice must overlap for this SSTable to matter;
    /// `None` when it cannot be skipped that way (version 1, or partition
    /// deletions or static rows, which every slice reads).
    clustering_bounds: Option<(ClusteringKey, ClusteringKey)>,
}

/// One partition's entry in the Index component.
struct IndexEntry<'a> {
    key: Bytes,
    offset: u64,
    intra: u32,
    /// The encoded row index (empty when the partition has none).
    row_index: &'a [u8],
    next: usize,
}

fn read_index_entry(buf: &[u8], pos: usize, version: u32) -> Option<IndexEntry<'_>> {
    let kl = u16::from_be_bytes(buf.get(pos..pos + 2)?.try_into().ok()?) as usize;
    let key = Bytes::copy_from_slice(buf.get(pos + 2..pos + 2 + kl)?);
    let offset = u64::from_be_bytes(buf.get(pos + 2 + kl..pos + 10 + kl)?.try_into().ok()?);
    let intra = u32::from_be_bytes(buf.get(pos + 10 + kl..pos + 14 + kl)?.try_into().ok()?);
    let mut next = pos + 14 + kl;
    let mut row_index: &[u8] = &[];
    if version >= 2 {
        let rl = u32::from_be_bytes(buf.get(next..next + 4)?.try_into().ok()?) as usize;
        row_index = buf.get(next + 4..(next + 4).checked_add(rl)?)?;
        next += 4 + rl;
    }
    Some(IndexEntry {
        key,
        offset,
        intra,
        row_index,
        next,
    })
}

/// A row index block: the last clustering in it and where it is.
type Block = (ClusteringKey, u64, u32);

fn decode_row_index(b: &[u8], cmp: &Arc<ClusteringComparator>) -> Option<Vec<Block>> {
    let n = u32::from_be_bytes(b.get(0..4)?.try_into().ok()?) as usize;
    let mut out = Vec::with_capacity(n.min(b.len()));
    let mut pos = 4;
    for _ in 0..n {
        let (ck, used) = decode_clustering(b.get(pos..)?, cmp).ok()?;
        pos += used;
        let off = u64::from_be_bytes(b.get(pos..pos + 8)?.try_into().ok()?);
        let intra = u32::from_be_bytes(b.get(pos + 8..pos + 12)?.try_into().ok()?);
        pos += 12;
        out.push((ck, off, intra));
    }
    Some(out)
}

/// Indexes of the blocks (each covering the rows after the previous block's
/// last clustering up to its own) that the slices overlap.
fn blocks_for(blocks: &[Block], slices: &[Slice]) -> std::collections::BTreeSet<usize> {
    let mut out = std::collections::BTreeSet::new();
    for (start, end) in slices {
        if start > end {
            continue;
        }
        let mut i = blocks.partition_point(|(last, _, _)| last < start);
        while i < blocks.len() {
            out.insert(i);
            if blocks[i].0 >= *end {
                break;
            }
            i += 1;
        }
    }
    out
}

impl SSTableReader {
    /// Opens a published SSTable, verifying its index and filter checksums.
    pub fn open(
        dir: &Path,
        generation: u64,
        comparator: Arc<ClusteringComparator>,
        cache: Arc<ChunkCache>,
    ) -> Result<Self, StorageError> {
        let sp = component_path(dir, generation, "Statistics.db");
        let sbytes = std::fs::read(&sp).map_err(|e| missing_or_io(&sp, e))?;
        let stats: Statistics =
            serde_json::from_slice(&sbytes).map_err(|e| corrupt(&sp, 0, e.to_string()))?;
        if !READABLE_VERSIONS.contains(&stats.version) {
            return Err(corrupt(
                &sp,
                0,
                format!("unsupported SSTable format version {}", stats.version),
            ));
        }
        // a missing filter is rebuilt from the index below
        let fp = component_path(dir, generation, "Filter.db");
        let mut bloom = match std::fs::read(&fp) {
            Ok(fbytes) => {
                if crc32fast::hash(&fbytes) != stats.filter_crc {
                    return Err(corrupt(&fp, 0, "bloom filter checksum mismatch"));
                }
                Some(
                    BloomFilter::decode(&fbytes)
                        .ok_or_else(|| corrupt(&fp, 0, "bad bloom filter"))?,
                )
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(&fp, e)),
        };
        let mut filter_keys: Vec<Bytes> = Vec::new();
        let ip = component_path(dir, generation, "Index.db");
        let mut ibytes = Vec::new();
        File::open(&ip)
            .and_then(|mut f| f.read_to_end(&mut ibytes))
            .map_err(|e| missing_or_io(&ip, e))?;
        if crc32fast::hash(&ibytes) != stats.index_crc {
            return Err(corrupt(&ip, 0, "index checksum mismatch"));
        }
        if ibytes.len() < 8 || &ibytes[0..4] != INDEX_MAGIC {
            return Err(corrupt(&ip, 0, "bad index header"));
        }
        let mut summary = Vec::new();
        let mut pos = 8;
        let mut n = 0usize;
        while pos < ibytes.len() {
            let Some(e) = read_index_entry(&ibytes, pos, stats.version) else {
                return Err(corrupt(&ip, pos as u64, "truncated index entry"));
            };
            if bloom.is_none() {
                filter_keys.push(e.key.clone());
            }
            if n.is_multiple_of(SUMMARY_INTERVAL) {
                summary.push((DecoratedKey::new(e.key), pos as u64));
            }
            n += 1;
            pos = e.next;
        }
        let dp = component_path(dir, generation, "Data.db");
        let data = File::open(&dp).map_err(|e| missing_or_io(&dp, e))?;
        let index = File::open(&ip).map_err(|e| io(&ip, e))?;
        let bloom = match bloom.take() {
            Some(b) => b,
            None => rebuild_filter(dir, generation, &stats, &filter_keys),
        };
        let bound = |v: &Option<Vec<String>>, kind| -> Option<ClusteringKey> {
            let values = v
                .as_ref()?
                .iter()
                .map(|h| unhex(h))
                .collect::<Option<Vec<Bytes>>>()?;
            Some(ClusteringKey::bound(values, kind, comparator.clone()))
        };
        let clustering_bounds = if stats.partition_deletions || stats.static_rows {
            None
        } else {
            bound(&stats.min_clustering, BoundKind::StartInclusive)
                .zip(bound(&stats.max_clustering, BoundKind::EndInclusive))
        };
        Ok(SSTableReader {
            clustering_bounds,
            dir: dir.to_path_buf(),
            generation,
            id: SSTABLE_IDS.fetch_add(1, Ordering::Relaxed),
            data,
            data_file: component_path(dir, generation, "Data.db"),
            index,
            index_len: ibytes.len() as u64,
            summary,
            bloom,
            comparator,
            cache,
            bloom_false_positives: AtomicU64::new(0),
            repair: Mutex::new(RepairState::of(&stats)),
            stats,
        })
    }

    /// The repair set this SSTable is in.
    pub fn repair_state(&self) -> RepairState {
        *self.repair.lock()
    }

    /// Moves the SSTable to another repair set: its Statistics component is
    /// rewritten (under a `tmp-` name, synced, renamed), as Cassandra's
    /// `mutateRepairedAndReload`.
    pub fn set_repair_state(&self, state: RepairState) -> Result<(), StorageError> {
        let mut current = self.repair.lock();
        if *current == state {
            return Ok(());
        }
        let mut stats = self.stats.clone();
        state.apply(&mut stats);
        let bytes =
            serde_json::to_vec_pretty(&stats).map_err(|e| StorageError::Decode(e.to_string()))?;
        let tmp = tmp_path(&self.dir, self.generation, "Statistics.db");
        let mut f = File::create(&tmp).map_err(|e| io(&tmp, e))?;
        f.write_all(&bytes).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
        let target = component_path(&self.dir, self.generation, "Statistics.db");
        std::fs::rename(&tmp, &target).map_err(|e| io(&tmp, e))?;
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        *current = state;
        Ok(())
    }

    /// Index entries from the summary sample at or before `key` (or from the start).
    fn index_block(&self, from_sample: usize) -> Result<(Vec<u8>, u64), StorageError> {
        let start = self.summary.get(from_sample).map(|s| s.1).unwrap_or(8);
        let end = self
            .summary
            .get(from_sample + 1)
            .map(|s| s.1)
            .unwrap_or(self.index_len);
        let mut buf = vec![0u8; (end - start) as usize];
        self.index
            .read_exact_at(&mut buf, start)
            .map_err(|e| io(&component_path(&self.dir, self.generation, "Index.db"), e))?;
        Ok((buf, start))
    }

    fn sample_for(&self, key: &DecoratedKey) -> Option<usize> {
        let i = self.summary.partition_point(|(k, _)| k <= key);
        if i == 0 {
            None
        } else {
            Some(i - 1)
        }
    }

    fn chunk(&self, offset: u64) -> Result<Arc<Vec<u8>>, StorageError> {
        if let Some(c) = self.cache.get((self.id, offset)) {
            return Ok(c);
        }
        let c = self.load_chunk(offset)?;
        self.cache.put((self.id, offset), c.clone());
        Ok(c)
    }

    /// Reads, verifies and decompresses the chunk at `offset`.
    fn load_chunk(&self, offset: u64) -> Result<Arc<Vec<u8>>, StorageError> {
        let dp = &self.data_file;
        let mut head = [0u8; CHUNK_HEADER];
        self.data
            .read_exact_at(&mut head, offset)
            .map_err(|e| corrupt(dp, offset, format!("cannot read chunk header: {e}")))?;
        let kind = head[0];
        let ulen = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        let clen = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
        let crc = u32::from_be_bytes([head[9], head[10], head[11], head[12]]);
        if ulen > MAX_CHUNK_BYTES || clen > MAX_CHUNK_BYTES {
            return Err(corrupt(dp, offset, "chunk length out of bounds"));
        }
        let mut stored = vec![0u8; clen as usize];
        self.data
            .read_exact_at(&mut stored, offset + CHUNK_HEADER as u64)
            .map_err(|e| corrupt(dp, offset, format!("cannot read chunk: {e}")))?;
        if crc32fast::hash(&stored) != crc {
            return Err(corrupt(dp, offset, "chunk checksum mismatch"));
        }
        let plain = decompress(kind, stored, ulen as usize).map_err(|e| corrupt(dp, offset, e))?;
        Ok(Arc::new(plain))
    }

    fn partition_at(
        &self,
        chunk_offset: u64,
        intra: u32,
        chunk: &mut dyn FnMut(u64) -> Result<Arc<Vec<u8>>, StorageError>,
    ) -> Result<Partition, StorageError> {
        let c = chunk(chunk_offset)?;
        let dp = &self.data_file;
        let bad = || corrupt(dp, chunk_offset, format!("bad partition entry at {intra}"));
        let p = intra as usize;
        let kl = u32::from_be_bytes(
            c.get(p..p + 4)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        let bpos = p + 4 + kl;
        let bl = u32::from_be_bytes(
            c.get(bpos..bpos + 4)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        let body = c.get(bpos + 4..bpos + 4 + bl).ok_or_else(bad)?;
        decode_partition(body, &self.comparator)
            .map_err(|e| corrupt(dp, chunk_offset, e.to_string()))
    }

    /// The partition of an index entry, restricted to `slices`: a partition
    /// with a row index reads its header and the blocks the slices overlap.
    fn partition_for(
        &self,
        e: &IndexEntry,
        slices: Option<&[Slice]>,
    ) -> Result<Partition, StorageError> {
        self.partition_with(e, slices, &mut |offset| self.chunk(offset))
    }

    /// [`Self::partition_for`] with chunks from `chunk`.
    fn partition_with(
        &self,
        e: &IndexEntry,
        slices: Option<&[Slice]>,
        chunk: &mut dyn FnMut(u64) -> Result<Arc<Vec<u8>>, StorageError>,
    ) -> Result<Partition, StorageError> {
        let mut p = self.partition_at(e.offset, e.intra, chunk)?;
        if e.row_index.is_empty() {
            return Ok(match slices {
                Some(s) => p.sliced(Some(s)),
                None => p,
            });
        }
        let blocks = decode_row_index(e.row_index, &self.comparator).ok_or_else(|| {
            corrupt(
                &component_path(&self.dir, self.generation, "Index.db"),
                0,
                "bad row index",
            )
        })?;
        let chosen: Vec<usize> = match slices {
            Some(s) => blocks_for(&blocks, s).into_iter().collect(),
            None => (0..blocks.len()).collect(),
        };
        for i in chosen {
            let (_, off, intra) = &blocks[i];
            let b = self.partition_at(*off, *intra, chunk)?;
            for (ck, row) in b.rows.iter() {
                p.rows.insert(ck.clone(), row.clone());
            }
        }
        Ok(match slices {
            Some(s) => p.sliced(Some(s)),
            None => p,
        })
    }

    /// Whether a read of `slices` can find anything here (clustering bounds).
    pub fn intersects(&self, slices: &[Slice]) -> bool {
        match &self.clustering_bounds {
            None => true,
            Some((min, max)) => slices
                .iter()
                .any(|(start, end)| start <= end && end >= min && start <= max),
        }
    }

    /// The partition (restricted to `slices`), if this SSTable has it.
    pub fn read(
        &self,
        key: &DecoratedKey,
        slices: Option<&[Slice]>,
    ) -> Result<Option<Partition>, StorageError> {
        if !self.may_contain(key) {
            return Ok(None);
        }
        self.read_filtered(key, slices, None)
    }

    /// [`Self::read`] for a key [`Self::may_contain`] already let through;
    /// with a key cache, the index entry comes from it when it can.
    pub fn read_filtered(
        &self,
        key: &DecoratedKey,
        slices: Option<&[Slice]>,
        key_cache: Option<&KeyCache>,
    ) -> Result<Option<Partition>, StorageError> {
        if let Some(e) = key_cache.and_then(|kc| kc.get(self.id, &key.key)) {
            let entry = IndexEntry {
                key: key.key.clone(),
                offset: e.offset,
                intra: e.intra,
                row_index: &e.row_index,
                next: 0,
            };
            return self.partition_for(&entry, slices).map(Some);
        }
        let Some(sample) = self.sample_for(key) else {
            return Ok(None);
        };
        let (buf, _) = self.index_block(sample)?;
        let mut pos = 0;
        while pos < buf.len() {
            let Some(e) = read_index_entry(&buf, pos, self.stats.version) else {
                break;
            };
            if e.key == key.key {
                if let Some(kc) = key_cache {
                    kc.put(
                        self.id,
                        key.key.clone(),
                        KeyEntry {
                            offset: e.offset,
                            intra: e.intra,
                            row_index: Bytes::copy_from_slice(e.row_index),
                        },
                    );
                }
                return self.partition_for(&e, slices).map(Some);
            }
            pos = e.next;
        }
        self.bloom_false_positives.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    }

    /// Whether any partition here may have a token in `(start, end]`; an
    /// `end` of `i64::MIN` (the minimum token) runs to the end of the ring.
    pub fn intersects_tokens(&self, start: i64, end: i64) -> bool {
        self.stats.max_token > start && (end == i64::MIN || self.stats.min_token <= end)
    }

    /// The partitions with a token in `(start, end]` (as in `intersects_tokens`)
    /// as Cassandra's `SSTableReader.estimatedKeysForRanges` counts them:
    /// the summary's samples in the range times the sampling interval, and
    /// never less than 1 (it is asked only of SSTables that overlap).
    pub fn estimated_keys_in(&self, start: i64, end: i64) -> u64 {
        let samples = self
            .summary
            .iter()
            .filter(|(k, _)| k.token > start && (end == i64::MIN || k.token <= end))
            .count() as u64;
        (samples * SUMMARY_INTERVAL as u64).max(1)
    }

    /// The mean partition size and the number of partitions, from the
    /// partition size histogram (Cassandra's `EstimatedHistogram.mean`: the
    /// buckets' upper offsets, rounded up).
    pub fn partition_size_mean(&self) -> (u64, u64) {
        let offsets = sibyl_metrics::histogram::bucket_offsets();
        let (mut n, mut sum) = (0u64, 0u128);
        for (i, c) in self.stats.partition_sizes.iter().enumerate() {
            n += c;
            sum += *c as u128 * offsets.get(i).copied().unwrap_or(u64::MAX) as u128;
        }
        if n == 0 {
            return (0, 0);
        }
        (sum.div_ceil(n as u128) as u64, n)
    }

    /// Keys after `after` (or from `start_token`) up to `end_token`, at most `limit`.
    pub fn keys(
        &self,
        after: Option<&DecoratedKey>,
        start_token: i64,
        end_token: i64,
        limit: usize,
    ) -> Result<Vec<DecoratedKey>, StorageError> {
        let mut out = Vec::new();
        if start_token > self.stats.max_token || end_token < self.stats.min_token {
            return Ok(out);
        }
        let lower = after.cloned().unwrap_or(DecoratedKey {
            token: start_token,
            key: Bytes::new(),
        });
        let mut sample = self.sample_for(&lower).unwrap_or(0);
        while sample < self.summary.len().max(1) && out.len() < limit {
            let (buf, _) = self.index_block(sample)?;
            let mut pos = 0;
            while pos < buf.len() {
                let Some(e) = read_index_entry(&buf, pos, self.stats.version) else {
                    break;
                };
                pos = e.next;
                let dk = DecoratedKey::new(e.key);
                let beyond = match after {
                    Some(a) => &dk > a,
                    None => dk.token >= start_token,
                };
                if !beyond {
                    continue;
                }
                if dk.token > end_token || out.len() >= limit {
                    return Ok(out);
                }
                out.push(dk);
            }
            sample += 1;
        }
        Ok(out)
    }

    /// Every partition in token order (for compaction, dump and verify).
    pub fn scan(&self) -> Result<Vec<(DecoratedKey, Partition)>, StorageError> {
        self.scanner()?.collect()
    }

    /// A lazy scan of every partition in token order.
    pub fn scanner(&self) -> Result<Scanner<'_>, StorageError> {
        Ok(Scanner {
            reader: self,
            buf: Vec::new(),
            buf_at: 8,
            pos: 0,
            current: None,
        })
    }

    /// Whether this SSTable may hold `key` (bloom filter and token bounds).
    pub fn may_contain(&self, key: &DecoratedKey) -> bool {
        key.token >= self.stats.min_token
            && key.token <= self.stats.max_token
            && self.bloom.may_contain(&key.key)
    }

    /// Hard-links every component into `target` (a snapshot).
    pub fn link_into(&self, target: &Path) -> Result<(), StorageError> {
        std::fs::create_dir_all(target).map_err(|e| io(target, e))?;
        for c in COMPONENTS.iter().chain(["TOC.txt"].iter()) {
            let from = component_path(&self.dir, self.generation, c);
            let to = component_path(target, self.generation, c);
            if to.exists() {
                continue;
            }
            std::fs::hard_link(&from, &to).map_err(|e| io(&from, e))?;
        }
        Ok(())
    }

    /// Moves the files aside into `<table>/quarantine/` (a corrupt SSTable under
    /// `disk_failure_policy: best_effort`): kept for inspection, never read again.
    pub fn quarantine(&self) -> Result<PathBuf, StorageError> {
        let q = self.dir.join("quarantine");
        std::fs::create_dir_all(&q).map_err(|e| io(&q, e))?;
        let _ = std::fs::rename(
            component_path(&self.dir, self.generation, "TOC.txt"),
            component_path(&q, self.generation, "TOC.txt"),
        );
        for c in COMPONENTS {
            let _ = std::fs::rename(
                component_path(&self.dir, self.generation, c),
                component_path(&q, self.generation, c),
            );
        }
        Ok(q)
    }

    /// Removes the files of this SSTable (after TRUNCATE or DROP).
    pub fn delete_files(&self) {
        let _ = std::fs::remove_file(component_path(&self.dir, self.generation, "TOC.txt"));
        for c in COMPONENTS {
            let _ = std::fs::remove_file(component_path(&self.dir, self.generation, c));
        }
    }

    pub fn size_bytes(&self) -> u64 {
        COMPONENTS
            .iter()
            .filter_map(|c| std::fs::metadata(component_path(&self.dir, self.generation, c)).ok())
            .map(|m| m.len())
            .sum()
    }
}

/// Removes the temporary files of an SSTable whose writing failed.
pub fn remove_unfinished(dir: &Path, generation: u64) {
    for c in COMPONENTS.iter().chain(["TOC.txt"].iter()) {
        let _ = std::fs::remove_file(tmp_path(dir, generation, c));
    }
}

/// A component that is not there is a damaged SSTable (for the disk
/// failure policy to judge), not a mere I/O error.
fn missing_or_io(path: &Path, e: std::io::Error) -> StorageError {
    if e.kind() == std::io::ErrorKind::NotFound {
        corrupt(path, 0, "the component is missing")
    } else {
        io(path, e)
    }
}

/// A bloom filter rebuilt from the index's keys, for an SSTable whose
/// `Filter.db` is gone; written back when it comes out byte for byte as
/// the one lost (same keys, same parameters), as it normally does.
fn rebuild_filter(dir: &Path, generation: u64, stats: &Statistics, keys: &[Bytes]) -> BloomFilter {
    let mut bloom = BloomFilter::new(keys.len(), stats.bloom_filter_fp_chance);
    for k in keys {
        bloom.add(k);
    }
    let fb = bloom.encode();
    let fp = component_path(dir, generation, "Filter.db");
    let written = crc32fast::hash(&fb) == stats.filter_crc && {
        let tmp = tmp_path(dir, generation, "Filter.db");
        std::fs::write(&tmp, &fb)
            .and_then(|_| File::open(&tmp)?.sync_all())
            .and_then(|_| std::fs::rename(&tmp, &fp))
            .is_ok()
    };
    tracing::warn!(
        "{} was missing: rebuilt the bloom filter from the index ({} keys){}",
        fp.display(),
        keys.len(),
        if written { " and wrote it back" } else { "" }
    );
    bloom
}

/// Generations of the SSTables in `dir`.
///
/// Only what is provably unfinished is removed: `tmp-` files, and the
/// components of a generation whose TOC still has its `tmp-` name (the TOC
/// is renamed last, so its publication was interrupted). A generation that
/// lost its TOC after it was published is kept and its TOC rebuilt, with a
/// warning; a missing component is then the opener's to report.
pub fn list_generations(dir: &Path) -> Result<Vec<u64>, StorageError> {
    let mut gens = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(gens),
        Err(e) => return Err(io(dir, e)),
    };
    let mut partial = std::collections::BTreeSet::new();
    let mut tmp_files = Vec::new();
    let mut unpublished = std::collections::HashSet::new();
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().to_string();
        if let Some(rest) = name.strip_prefix("tmp-sb-") {
            if let Some(g) = rest
                .strip_suffix("-TOC.txt")
                .and_then(|g| g.parse::<u64>().ok())
            {
                unpublished.insert(g);
            }
            tmp_files.push(ent.path());
            continue;
        }
        if let Some(rest) = name.strip_prefix("sb-") {
            if let Some((g, comp)) = rest.split_once('-') {
                if let Ok(g) = g.parse::<u64>() {
                    if comp == "TOC.txt" {
                        gens.push(g);
                    } else {
                        partial.insert(g);
                    }
                }
            }
        }
    }
    gens.sort();
    let mut rebuilt = Vec::new();
    for g in partial {
        if gens.binary_search(&g).is_ok() {
            continue;
        }
        if unpublished.contains(&g) {
            for c in COMPONENTS {
                let _ = std::fs::remove_file(component_path(dir, g, c));
            }
            continue;
        }
        let present: Vec<&str> = COMPONENTS
            .iter()
            .copied()
            .filter(|c| component_path(dir, g, c).exists())
            .collect();
        let toc = present
            .iter()
            .chain(["TOC.txt"].iter())
            .map(|c| format!("{c}\n"))
            .collect::<String>();
        let p = component_path(dir, g, "TOC.txt");
        std::fs::write(&p, toc).map_err(|e| io(&p, e))?;
        tracing::warn!(
            "{} was missing: rebuilt it from the components present ({})",
            p.display(),
            present.join(", ")
        );
        rebuilt.push(g);
    }
    gens.extend(rebuilt);
    for t in tmp_files {
        let _ = std::fs::remove_file(t);
    }
    gens.sort();
    Ok(gens)
}

/// Test support: rewrites a published format-2 SSTable without wide
/// partitions the way format 1 laid it out (no row index field in the Index
/// component, no clustering bounds in Statistics).
#[cfg(test)]
pub(crate) fn rewrite_as_format_1(dir: &Path, generation: u64) {
    // Index.db: drop each entry's row_index_len (all zero), version 1
    let ip = component_path(dir, generation, "Index.db");
    let v2 = std::fs::read(&ip).expect("index");
    let mut v1 = INDEX_MAGIC.to_vec();
    v1.extend_from_slice(&1u32.to_be_bytes());
    let mut pos = 8;
    while pos < v2.len() {
        let e = read_index_entry(&v2, pos, 2).expect("entry");
        assert!(e.row_index.is_empty());
        v1.extend_from_slice(&v2[pos..e.next - 4]);
        pos = e.next;
    }
    std::fs::write(&ip, &v1).expect("write");
    // Statistics.db: version 1, without the fields version 1 did not have
    let sp = component_path(dir, generation, "Statistics.db");
    let mut stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&sp).expect("stats")).expect("json");
    let o = stats.as_object_mut().expect("object");
    for f in [
        "min_clustering",
        "max_clustering",
        "partition_deletions",
        "static_rows",
        "indexed_partitions",
        "partition_sizes",
        "cell_counts",
    ] {
        o.remove(f);
    }
    o.insert("version".into(), 1.into());
    o.insert("index_crc".into(), crc32fast::hash(&v1).into());
    std::fs::write(&sp, serde_json::to_vec(&stats).expect("json")).expect("write");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clustering::ClusteringKey;
    use crate::data::{Cell, ColumnData, RowCells};
    use sibyl_types::CqlType;

    fn part(cmp: &Arc<ClusteringComparator>, n: i32) -> Partition {
        let mut p = Partition::new();
        for c in 0..n {
            let mut cells = RowCells::new();
            cells.insert(
                "v",
                ColumnData::Simple(Cell::live(c as i64 + 1, Bytes::from(vec![c as u8; 50]))),
            );
            p.rows.insert(
                ClusteringKey::row(vec![Bytes::copy_from_slice(&c.to_be_bytes())], cmp.clone()),
                Row {
                    liveness: None,
                    deletion: None,
                    cells,
                },
            );
        }
        p
    }

    #[test]
    fn written_sstable_reads_back_and_corruption_is_detected() {
        let dir = tempfile::tempdir().expect("tmp");
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        let cache = ChunkCache::new(1 << 20);
        let mut keys: Vec<DecoratedKey> = (0..2000u32)
            .map(|i| DecoratedKey::new(Bytes::copy_from_slice(&i.to_be_bytes())))
            .collect();
        keys.sort();
        let mut w = SSTableWriter::create(dir.path(), 1, 16 * 1024, true, 0.01).expect("writer");
        for k in &keys {
            w.append(k, &part(&cmp, 3)).expect("append");
        }
        w.finish(42).expect("finish");
        assert_eq!(list_generations(dir.path()).expect("list"), vec![1]);
        let r = SSTableReader::open(dir.path(), 1, cmp.clone(), cache.clone()).expect("open");
        assert_eq!(r.stats.partitions, 2000);
        assert_eq!(r.stats.commitlog_position, 42);
        for k in keys.iter().step_by(97) {
            let p = r.read(k, None).expect("read").expect("present");
            assert_eq!(p.rows.len(), 3);
        }
        let missing = DecoratedKey::new(Bytes::from_static(b"nope"));
        assert!(r.read(&missing, None).expect("read").is_none());
        let first = r.keys(None, i64::MIN, i64::MAX, 10).expect("keys");
        assert_eq!(first, keys[..10].to_vec());
        let next = r.keys(Some(&keys[9]), i64::MIN, i64::MAX, 5).expect("keys");
        assert_eq!(next, keys[10..15].to_vec());
        assert_eq!(r.scan().expect("scan").len(), 2000);
        // flip a byte in the data file: the read reports the file and position
        let dp = component_path(dir.path(), 1, "Data.db");
        let mut bytes = std::fs::read(&dp).expect("read");
        bytes[20] ^= 0xff;
        std::fs::write(&dp, bytes).expect("write");
        let r2 = SSTableReader::open(dir.path(), 1, cmp, ChunkCache::new(1 << 20)).expect("open");
        let err = r2.read(&keys[0], None).expect_err("corrupt");
        assert!(
            err.to_string().contains("Data.db") && err.to_string().contains("checksum"),
            "{err}"
        );
    }

    #[test]
    fn a_scan_streams_the_index_and_reads_each_chunk_once_past_the_cache() {
        let dir = tempfile::tempdir().expect("tmp");
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        let cache = ChunkCache::new(64 << 20);
        // an index of about 1 MB (several scan reads), with partitions large
        // enough for a row index spread through it
        let mut keys: Vec<DecoratedKey> = (0..30_000u32)
            .map(|i| DecoratedKey::new(Bytes::from(format!("partition-key-{i:08}"))))
            .collect();
        keys.sort();
        let mut w = SSTableWriter::create(dir.path(), 1, 4096, true, 0.01).expect("writer");
        for (i, k) in keys.iter().enumerate() {
            let rows = if i % 5000 == 17 { 400 } else { 1 };
            w.append(k, &part(&cmp, rows)).expect("append");
        }
        w.finish(1).expect("finish");
        let r = SSTableReader::open(dir.path(), 1, cmp.clone(), cache.clone()).expect("open");
        assert!(r.index_len > 3 * SCAN_INDEX_READ as u64, "{}", r.index_len);
        assert!(r.stats.indexed_partitions >= 6);
        let scanned: Vec<(DecoratedKey, Partition)> = r.scan().expect("scan");
        assert_eq!(
            scanned.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
            keys
        );
        for (i, (_, p)) in scanned.iter().enumerate() {
            assert_eq!(p.rows.len(), if i % 5000 == 17 { 400 } else { 1 }, "{i}");
        }
        // nothing went through the chunk cache
        assert_eq!(cache.hits.load(Ordering::Relaxed), 0);
        assert_eq!(cache.misses.load(Ordering::Relaxed), 0);
        // a read of the same partition through the cache agrees with the scan
        for i in [0, 17, 5017, 29_999] {
            let p = r.read(&keys[i], None).expect("read").expect("present");
            assert_eq!(p.rows.len(), scanned[i].1.rows.len());
        }
        // an index cut in the middle of an entry is reported, not skipped
        let ip = component_path(dir.path(), 1, "Index.db");
        let bytes = std::fs::read(&ip).expect("read");
        std::fs::write(&ip, &bytes[..bytes.len() - 3]).expect("write");
        let cut = SSTableReader {
            index_len: bytes.len() as u64 - 3,
            ..r
        };
        let err = cut
            .scanner()
            .expect("scanner")
            .find_map(|p| p.err())
            .expect("error");
        assert!(err.to_string().contains("truncated index entry"), "{err}");
    }

    fn bound(cmp: &Arc<ClusteringComparator>, v: i32, kind: BoundKind) -> ClusteringKey {
        ClusteringKey::bound(
            vec![Bytes::copy_from_slice(&v.to_be_bytes())],
            kind,
            cmp.clone(),
        )
    }

    #[test]
    fn large_partitions_get_a_row_index_and_slices_read_only_their_blocks() {
        let dir = tempfile::tempdir().expect("tmp");
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        let cache = ChunkCache::new(64 << 20);
        let big = DecoratedKey::new(Bytes::from_static(b"big"));
        let small = DecoratedKey::new(Bytes::from_static(b"small"));
        let mut keys = vec![big.clone(), small.clone()];
        keys.sort();
        let mut w = SSTableWriter::create(dir.path(), 1, 4096, true, 0.01).expect("writer");
        let (full, two) = (part(&cmp, 5000), part(&cmp, 2));
        for k in &keys {
            w.append(k, if *k == big { &full } else { &two })
                .expect("append");
        }
        w.finish(1).expect("finish");
        let r = SSTableReader::open(dir.path(), 1, cmp.clone(), cache.clone()).expect("open");
        assert_eq!(r.stats.indexed_partitions, 1);
        assert_eq!(
            r.stats.min_clustering.as_deref(),
            Some(&["00000000".to_string()][..])
        );
        assert_eq!(
            r.stats.max_clustering.as_deref(),
            Some(&[hex(&4999i32.to_be_bytes())][..])
        );
        // the whole partition, and slices of it, equal slicing the original
        assert_eq!(
            r.read(&big, None)
                .expect("read")
                .expect("present")
                .rows
                .len(),
            5000
        );
        for (a, b) in [
            (0, 0),
            (10, 20),
            (2500, 2600),
            (4990, 6000),
            (-5, 3),
            (1234, 1234),
        ] {
            let sl = vec![(
                bound(&cmp, a, BoundKind::StartInclusive),
                bound(&cmp, b, BoundKind::EndInclusive),
            )];
            let got = r.read(&big, Some(&sl)).expect("read").expect("present");
            let want = full.sliced(Some(&sl));
            assert_eq!(
                got.rows.keys().collect::<Vec<_>>(),
                want.rows.keys().collect::<Vec<_>>(),
                "slice {a}..{b}"
            );
        }
        // a narrow slice decompresses a few chunks, not the partition's ~70
        let misses = cache.misses.load(Ordering::Relaxed);
        let fresh = SSTableReader::open(dir.path(), 1, cmp.clone(), ChunkCache::new(64 << 20))
            .expect("open");
        let sl = vec![(
            bound(&cmp, 3000, BoundKind::StartInclusive),
            bound(&cmp, 3001, BoundKind::EndInclusive),
        )];
        assert_eq!(
            fresh
                .read(&big, Some(&sl))
                .expect("read")
                .expect("present")
                .rows
                .len(),
            2
        );
        assert!(
            fresh.cache.misses.load(Ordering::Relaxed) <= 3,
            "chunks read: {}",
            fresh.cache.misses.load(Ordering::Relaxed)
        );
        assert!(misses > 0);
        // clustering bounds let a read skip the SSTable
        let outside = vec![(
            bound(&cmp, 6000, BoundKind::StartInclusive),
            bound(&cmp, 7000, BoundKind::EndInclusive),
        )];
        assert!(!r.intersects(&outside));
        assert!(r.intersects(&sl));
        // compaction's scan sees every row
        let all = r.scan().expect("scan");
        assert_eq!(all.iter().map(|(_, p)| p.rows.len()).sum::<usize>(), 5002);
    }

    #[test]
    fn every_compression_round_trips() {
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        for c in [
            Compression::None,
            Compression::Lz4,
            Compression::Zstd(3),
            Compression::Snappy,
            Compression::Deflate,
        ] {
            let dir = tempfile::tempdir().expect("tmp");
            let mut w = SSTableWriter::create_with_header(
                dir.path(),
                1,
                4096,
                c,
                0.01,
                SerializationHeader::default(),
            )
            .expect("writer");
            let mut keys: Vec<DecoratedKey> = (0..300u32)
                .map(|i| DecoratedKey::new(Bytes::copy_from_slice(&i.to_be_bytes())))
                .collect();
            keys.sort();
            for k in &keys {
                w.append(k, &part(&cmp, 4)).expect("append");
            }
            w.finish(1).expect("finish");
            let r = SSTableReader::open(dir.path(), 1, cmp.clone(), ChunkCache::new(1 << 20))
                .expect("open");
            assert_eq!(r.stats.compression, c.name());
            assert_eq!(r.scan().expect("scan").len(), 300, "{c:?}");
            if c != Compression::None {
                let size = std::fs::metadata(component_path(dir.path(), 1, "Data.db"))
                    .expect("meta")
                    .len();
                assert!(size < 300 * 4 * 60, "{c:?} compressed to {size}");
            }
        }
    }

    /// Writes the fixed SSTable of the format fixtures: small partitions, a
    /// wide one with a row index, a partition deletion and a range tombstone.
    fn write_fixture(dir: &Path, cmp: &Arc<ClusteringComparator>) {
        let mut w = SSTableWriter::create(dir, 1, 4096, true, 0.01).expect("writer");
        let mut keys: Vec<DecoratedKey> = (0..40u32)
            .map(|i| DecoratedKey::new(Bytes::copy_from_slice(&i.to_be_bytes())))
            .collect();
        keys.sort();
        for (i, k) in keys.iter().enumerate() {
            let mut p = part(cmp, if i == 7 { 400 } else { 3 });
            if i == 11 {
                p.deletion = crate::data::DeletionTime {
                    marked_for_delete_at: 5,
                    local_deletion_time: 1_700_000_000,
                };
            }
            if i == 12 {
                p.range_tombstones.push(crate::data::RangeTombstone {
                    start: bound(cmp, 1, BoundKind::StartInclusive),
                    end: bound(cmp, 2, BoundKind::EndExclusive),
                    deletion: crate::data::DeletionTime {
                        marked_for_delete_at: 9,
                        local_deletion_time: 1_700_000_000,
                    },
                });
            }
            w.append(k, &p).expect("append");
        }
        w.finish(77).expect("finish");
    }

    /// Format 2 is pinned byte for byte: a change to what the writer
    /// produces must come with a new format version. Record the fixture
    /// again with `SIBYL_RECORD_FIXTURES=1 cargo test -p sibyl-storage`.
    #[test]
    fn format_2_matches_its_fixture_byte_for_byte() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sstable-v2");
        let dir = tempfile::tempdir().expect("tmp");
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        write_fixture(dir.path(), &cmp);
        if std::env::var_os("SIBYL_RECORD_FIXTURES").is_some() {
            std::fs::create_dir_all(&fixtures).expect("mkdir");
            for c in COMPONENTS.iter().chain(["TOC.txt"].iter()) {
                std::fs::copy(
                    component_path(dir.path(), 1, c),
                    component_path(&fixtures, 1, c),
                )
                .expect("copy");
            }
        }
        for c in COMPONENTS.iter().chain(["TOC.txt"].iter()) {
            let want = std::fs::read(component_path(&fixtures, 1, c))
                .expect("fixture (record it, see the doc comment)");
            let got = std::fs::read(component_path(dir.path(), 1, c)).expect("written");
            assert!(got == want, "{c} differs from the format-2 fixture");
        }
        // and the fixture itself reads back
        let r =
            SSTableReader::open(&fixtures, 1, cmp, ChunkCache::new(1 << 20)).expect("open fixture");
        assert_eq!(r.stats.version, 2);
        assert_eq!(r.stats.indexed_partitions, 1);
        assert_eq!(
            r.scan()
                .expect("scan")
                .iter()
                .map(|(_, p)| p.rows.len())
                .sum::<usize>(),
            39 * 3 + 400
        );
    }

    /// Version 1 files (no row index field in the Index component) are still
    /// read: a format-2 SSTable without wide partitions, rewritten the way
    /// version 1 laid it out.
    #[test]
    fn format_1_sstables_are_still_read() {
        let dir = tempfile::tempdir().expect("tmp");
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        let mut w = SSTableWriter::create(dir.path(), 1, 4096, true, 0.01).expect("writer");
        let mut keys: Vec<DecoratedKey> = (0..300u32)
            .map(|i| DecoratedKey::new(Bytes::copy_from_slice(&i.to_be_bytes())))
            .collect();
        keys.sort();
        for k in &keys {
            w.append(k, &part(&cmp, 3)).expect("append");
        }
        w.finish(5).expect("finish");
        rewrite_as_format_1(dir.path(), 1);
        let r = SSTableReader::open(dir.path(), 1, cmp.clone(), ChunkCache::new(1 << 20))
            .expect("open v1");
        assert_eq!(r.stats.version, 1);
        assert!(
            r.clustering_bounds.is_none(),
            "version 1 has no clustering bounds to skip by"
        );
        for k in keys.iter().step_by(13) {
            assert_eq!(
                r.read(k, None).expect("read").expect("present").rows.len(),
                3
            );
        }
        assert_eq!(
            r.keys(None, i64::MIN, i64::MAX, 1000).expect("keys").len(),
            300
        );
        assert_eq!(r.scan().expect("scan").len(), 300);
    }

    #[test]
    fn unpublished_sstables_are_removed() {
        let dir = tempfile::tempdir().expect("tmp");
        let w = SSTableWriter::create(dir.path(), 7, 4096, true, 0.01).expect("writer");
        drop(w);
        // interrupted between renaming the components and the TOC
        std::fs::write(component_path(dir.path(), 8, "Data.db"), b"half").expect("write");
        std::fs::write(tmp_path(dir.path(), 8, "TOC.txt"), b"toc").expect("write");
        assert!(list_generations(dir.path()).expect("list").is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }

    #[test]
    fn a_lost_toc_or_filter_is_rebuilt_and_a_lost_index_is_reported() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        let cache = ChunkCache::new(1 << 20);
        let mut keys: Vec<DecoratedKey> = (0..500u32)
            .map(|i| DecoratedKey::new(Bytes::copy_from_slice(&i.to_be_bytes())))
            .collect();
        keys.sort();
        for g in [1, 2] {
            let mut w = SSTableWriter::create(d, g, 16 * 1024, true, 0.01).expect("writer");
            for k in &keys {
                w.append(k, &part(&cmp, 2)).expect("append");
            }
            w.finish(0).expect("finish");
        }
        let filter = std::fs::read(component_path(d, 1, "Filter.db")).expect("filter");
        std::fs::remove_file(component_path(d, 1, "TOC.txt")).expect("rm");
        std::fs::remove_file(component_path(d, 1, "Filter.db")).expect("rm");
        assert_eq!(list_generations(d).expect("list"), vec![1, 2]);
        assert!(component_path(d, 1, "TOC.txt").exists(), "TOC rebuilt");
        let r = SSTableReader::open(d, 1, cmp.clone(), cache.clone()).expect("open");
        for k in &keys {
            assert_eq!(
                r.read(k, None).expect("read").expect("present").rows.len(),
                2
            );
        }
        assert_eq!(
            std::fs::read(component_path(d, 1, "Filter.db")).expect("filter"),
            filter
        );
        // the index cannot be rebuilt: reported as a damaged SSTable, and kept
        std::fs::remove_file(component_path(d, 2, "Index.db")).expect("rm");
        let e = SSTableReader::open(d, 2, cmp, cache)
            .err()
            .expect("an error");
        assert!(matches!(e, StorageError::CorruptSSTable { .. }), "{e}");
        assert!(
            e.to_string().contains("sb-2-Index.db") && e.to_string().contains("missing"),
            "{e}"
        );
        assert!(component_path(d, 2, "Data.db").exists());
    }

    #[test]
    fn bloom_filter_has_no_false_negatives() {
        let mut b = BloomFilter::new(1000, 0.01);
        for i in 0..1000u32 {
            b.add(&i.to_be_bytes());
        }
        assert!((0..1000u32).all(|i| b.may_contain(&i.to_be_bytes())));
        let fp = (1000..11000u32)
            .filter(|i| b.may_contain(&i.to_be_bytes()))
            .count();
        assert!(fp < 300, "false positives {fp}");
        let back = BloomFilter::decode(&b.encode()).expect("decode");
        assert!(back.may_contain(&5u32.to_be_bytes()));
    }
}
