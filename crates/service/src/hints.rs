//! Hinted handoff (Cassandra's `hints` package): a write that a replica
//! missed, because it was down or did not answer in time, is kept by the
//! coordinator as a hint, in a file per target host, and replayed to that
//! host when the failure detector sees it up again.
//!
//! Files are `<host id>-<creation ms>-<version>.hints` in `hints_directory`.
//! Each starts with the magic "SIBH" and a format version byte; each hint is
//! `length u32 | CRC32 of the length u32 | payload | CRC32 of the payload
//! u32`, the payload being the hint's creation time (Unix ms, i64) and the
//! encoded mutation. A torn or corrupt record ends the file's replay with a
//! log line; what came before it is delivered.
//!
//! A hint is not written for a host down longer than `max_hint_window`, nor
//! when hinted handoff is disabled (globally or for the host's data
//! center). A hint expires after the `gc_grace_seconds` of its table.
//! Delivery is throttled to `hinted_handoff_throttle` per second, divided
//! by the number of other nodes as Cassandra divides it.

use bytes::Bytes;
use parking_lot::Mutex;
use sibyl_db::serde::{decode_mutation, encode_mutation};
use sibyl_db::Mutation;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "SIBH": the first bytes of a hints file.
const MAGIC: u32 = 0x5349_4248;
/// The hints file format this build writes (and the only one it reads).
pub const HINTS_VERSION: u8 = 1;
/// A file is closed and a new one begun past this size.
const MAX_FILE_BYTES: u64 = 128 << 20;
/// Hints sent in one message at most (and at most `PAGE_BYTES` of them).
const PAGE_HINTS: usize = 128;
const PAGE_BYTES: usize = 64 << 10;
/// A hint larger than this is not a hint (a corrupt length).
const MAX_HINT_BYTES: usize = 256 << 20;

/// Hinted handoff's settings (`cassandra.yaml`).
#[derive(Debug, Clone)]
pub struct HintsConfig {
    pub directory: PathBuf,
    pub enabled: bool,
    pub disabled_datacenters: Vec<String>,
    pub max_hint_window: Duration,
    /// Bytes per second for the whole node, before division by the number
    /// of other nodes.
    pub throttle_bytes_per_second: u64,
    /// Hosts delivered to at once (`max_hints_delivery_threads`).
    pub delivery_threads: usize,
    /// The storage port, to name endpoints in log lines as Cassandra
    /// does (`/127.0.0.3:7000`).
    pub log_port: u16,
}

/// Counts an operator watches (Cassandra's `HintsServiceMetrics` and
/// `StorageMetrics.totalHints`).
#[derive(Debug, Default)]
pub struct HintsMetrics {
    pub created: AtomicU64,
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    pub expired: AtomicU64,
    pub corrupt_files: AtomicU64,
}

/// Pending hints for one host, as `nodetool listpendinghints` shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingHints {
    pub host_id: uuid::Uuid,
    pub files: usize,
    pub oldest_ms: i64,
    pub newest_ms: i64,
}

struct OpenFile {
    file: std::fs::File,
    bytes: u64,
}

/// The hints this node keeps for others, and their delivery.
pub struct HintsService {
    config: Mutex<HintsConfig>,
    /// `disablehandoff`: no new hints are written.
    enabled: AtomicBool,
    /// `pausehandoff`: no hints are delivered.
    paused: AtomicBool,
    open: Mutex<HashMap<uuid::Uuid, OpenFile>>,
    /// When each host was last seen going down (cleared when it comes up).
    down_since: Mutex<HashMap<IpAddr, Instant>>,
    /// Deliveries hold it shared; `truncatehints` waits for them.
    delivering: tokio::sync::RwLock<()>,
    /// Hosts being delivered to now (one delivery per host at a time).
    delivering_to: Mutex<std::collections::HashSet<uuid::Uuid>>,
    /// One permit per delivery thread.
    delivery_slots: tokio::sync::Semaphore,
    pub metrics: HintsMetrics,
}

fn file_name(host: uuid::Uuid, created_ms: i64) -> String {
    format!("{host}-{created_ms}-{HINTS_VERSION}.hints")
}

/// (host, creation ms) of a hints file's name.
fn parse_name(name: &str) -> Option<(uuid::Uuid, i64)> {
    let stem = name.strip_suffix(".hints")?;
    // a host id has four dashes of its own
    let mut parts = stem.rsplitn(3, '-');
    let version: u8 = parts.next()?.parse().ok()?;
    let created: i64 = parts.next()?.parse().ok()?;
    let host = uuid::Uuid::parse_str(parts.next()?).ok()?;
    (version == HINTS_VERSION).then_some((host, created))
}

fn now_ms() -> i64 {
    sibyl_types::timeuuid::timestamp_micros_now() / 1000
}

/// Appends one hint record to `out`.
pub fn encode_hint(created_ms: i64, m: &Mutation, out: &mut Vec<u8>) {
    let mut payload = Vec::with_capacity(64);
    payload.extend_from_slice(&created_ms.to_be_bytes());
    encode_mutation(m, &mut payload);
    let len = (payload.len() as u32).to_be_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc32fast::hash(&len).to_be_bytes());
    out.extend_from_slice(&payload);
    out.extend_from_slice(&crc32fast::hash(&payload).to_be_bytes());
}

/// One record read back: its creation time and its encoded mutation, or
/// why the file cannot be read further.
pub fn decode_hints(buf: &[u8]) -> (Vec<(i64, Bytes)>, Option<String>) {
    let mut out = Vec::new();
    if buf.len() < 5 {
        return (out, (!buf.is_empty()).then(|| "truncated header".into()));
    }
    let magic = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if magic != MAGIC {
        return (out, Some(format!("not a hints file (magic {magic:#010x})")));
    }
    if buf[4] != HINTS_VERSION {
        return (out, Some(format!("hints format version {}", buf[4])));
    }
    let mut at = 5;
    while at < buf.len() {
        let Some(h) = buf.get(at..at + 8) else {
            return (out, Some(format!("torn record header at {at}")));
        };
        let len_bytes = [h[0], h[1], h[2], h[3]];
        let len = u32::from_be_bytes(len_bytes) as usize;
        if crc32fast::hash(&len_bytes) != u32::from_be_bytes([h[4], h[5], h[6], h[7]])
            || !(8..=MAX_HINT_BYTES).contains(&len)
        {
            return (out, Some(format!("corrupt record length at {at}")));
        }
        let Some(payload) = buf.get(at + 8..at + 8 + len) else {
            return (out, Some(format!("torn record at {at}")));
        };
        let Some(c) = buf.get(at + 8 + len..at + 12 + len) else {
            return (out, Some(format!("torn record at {at}")));
        };
        if crc32fast::hash(payload) != u32::from_be_bytes([c[0], c[1], c[2], c[3]]) {
            return (out, Some(format!("record checksum mismatch at {at}")));
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&payload[..8]);
        out.push((i64::from_be_bytes(t), Bytes::copy_from_slice(&payload[8..])));
        at += 12 + len;
    }
    (out, None)
}

impl HintsService {
    pub fn new(config: HintsConfig) -> std::io::Result<HintsService> {
        std::fs::create_dir_all(&config.directory)?;
        let threads = config.delivery_threads.max(1);
        Ok(HintsService {
            enabled: AtomicBool::new(config.enabled),
            config: Mutex::new(config),
            paused: AtomicBool::new(false),
            open: Mutex::new(HashMap::new()),
            down_since: Mutex::new(HashMap::new()),
            delivering: tokio::sync::RwLock::new(()),
            delivering_to: Mutex::new(std::collections::HashSet::new()),
            delivery_slots: tokio::sync::Semaphore::new(threads),
            metrics: HintsMetrics::default(),
        })
    }

    pub fn directory(&self) -> PathBuf {
        self.config.lock().directory.clone()
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// `disablehintsfordc` / `enablehintsfordc`.
    pub fn set_datacenter_enabled(&self, dc: &str, on: bool) {
        let mut c = self.config.lock();
        c.disabled_datacenters.retain(|d| d != dc);
        if !on {
            c.disabled_datacenters.push(dc.to_string());
        }
    }

    pub fn disabled_datacenters(&self) -> Vec<String> {
        self.config.lock().disabled_datacenters.clone()
    }

    pub fn max_hint_window(&self) -> Duration {
        self.config.lock().max_hint_window
    }

    pub fn set_max_hint_window(&self, w: Duration) {
        self.config.lock().max_hint_window = w;
    }

    pub fn throttle_bytes_per_second(&self) -> u64 {
        self.config.lock().throttle_bytes_per_second
    }

    pub fn set_throttle_bytes_per_second(&self, b: u64) {
        self.config.lock().throttle_bytes_per_second = b;
    }

    /// The failure detector saw `addr` go down or come up.
    pub fn note_liveness(&self, addr: IpAddr, alive: bool) {
        let mut d = self.down_since.lock();
        if alive {
            d.remove(&addr);
        } else {
            d.entry(addr).or_insert_with(Instant::now);
        }
    }

    /// Whether a write `addr` missed is to be hinted (Cassandra's
    /// `StorageProxy.shouldHint`).
    pub fn should_hint(&self, addr: IpAddr, datacenter: &str) -> bool {
        if !self.is_enabled() {
            return false;
        }
        let c = self.config.lock();
        if c.disabled_datacenters.iter().any(|d| d == datacenter) {
            return false;
        }
        let down_for = self
            .down_since
            .lock()
            .get(&addr)
            .map(|t| t.elapsed())
            .unwrap_or_default();
        if down_for > c.max_hint_window {
            tracing::debug!("not hinting {addr}: down for {down_for:?}, past max_hint_window");
            return false;
        }
        true
    }

    /// Stores hints of `mutations` for `host`.
    pub fn store(&self, host: uuid::Uuid, mutations: &[Mutation]) {
        let mut buf = Vec::new();
        let created = now_ms();
        for m in mutations {
            encode_hint(created, m, &mut buf);
        }
        let mut open = self.open.lock();
        if let Err(e) = self.append(&mut open, host, created, &buf) {
            tracing::warn!("could not write hints for {host}: {e}");
            return;
        }
        self.metrics
            .created
            .fetch_add(mutations.len() as u64, Ordering::Relaxed);
    }

    fn append(
        &self,
        open: &mut HashMap<uuid::Uuid, OpenFile>,
        host: uuid::Uuid,
        created: i64,
        buf: &[u8],
    ) -> std::io::Result<()> {
        if open.get(&host).is_some_and(|f| f.bytes >= MAX_FILE_BYTES) {
            open.remove(&host);
        }
        let f = match open.entry(host) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let dir = self.directory();
                // a name unused so far (one per millisecond and host)
                let mut ms = created;
                let path = loop {
                    let p = dir.join(file_name(host, ms));
                    if !p.exists() {
                        break p;
                    }
                    ms += 1;
                };
                let mut file = std::fs::OpenOptions::new()
                    .create_new(true)
                    .append(true)
                    .open(&path)?;
                let mut header = MAGIC.to_be_bytes().to_vec();
                header.push(HINTS_VERSION);
                file.write_all(&header)?;
                v.insert(OpenFile {
                    file,
                    bytes: header.len() as u64,
                })
            }
        };
        f.file.write_all(buf)?;
        f.bytes += buf.len() as u64;
        Ok(())
    }

    /// The hints files of each host, oldest first.
    fn files(&self) -> BTreeMap<uuid::Uuid, Vec<(i64, PathBuf)>> {
        let mut out: BTreeMap<uuid::Uuid, Vec<(i64, PathBuf)>> = BTreeMap::new();
        let Ok(rd) = std::fs::read_dir(self.directory()) else {
            return out;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some((host, created)) = parse_name(&name) {
                out.entry(host).or_default().push((created, e.path()));
            }
        }
        for v in out.values_mut() {
            v.sort();
        }
        out
    }

    /// The hints service's metrics: Cassandra's `Storage` `TotalHints`, its
    /// `HintsService` counts, and the hint files on disk per host (bytes and
    /// files), which Cassandra shows in `nodetool listpendinghints`.
    pub fn collect(&self, c: &mut sibyl_metrics::Collection) {
        use sibyl_metrics::{Family, MetricName};
        use std::sync::atomic::Ordering::Relaxed;
        let m = &self.metrics;
        c.counter(
            MetricName::new("Storage", "TotalHints"),
            m.created.load(Relaxed),
        );
        let h = |name: &str| MetricName::new("HintsService", name);
        c.counter(h("HintsSucceeded"), m.delivered.load(Relaxed));
        c.counter(h("HintsFailed"), m.failed.load(Relaxed));
        let (mut bytes, mut files) = (Vec::new(), Vec::new());
        for (host, fs) in self.files() {
            let size: u64 = fs
                .iter()
                .filter_map(|(_, p)| std::fs::metadata(p).ok())
                .map(|m| m.len())
                .sum();
            let labels = vec![("host_id", host.to_string())];
            bytes.push((labels.clone(), size as f64));
            files.push((labels, fs.len() as f64));
        }
        c.families.push(Family {
            name: "cassandra_hints_on_disk_bytes",
            help: "Bytes of hint files waiting for delivery, per host.",
            counter: false,
            samples: bytes,
        });
        c.families.push(Family {
            name: "cassandra_hints_on_disk_files",
            help: "Hint files waiting for delivery, per host.",
            counter: false,
            samples: files,
        });
    }

    /// The hosts this node has hints for (`nodetool listpendinghints`).
    pub fn pending(&self) -> Vec<PendingHints> {
        self.files()
            .into_iter()
            .filter_map(|(host, files)| {
                let oldest = files.first()?.0;
                // the newest hint: the last write to the newest file
                let newest = files
                    .last()
                    .and_then(|(_, p)| std::fs::metadata(p).ok()?.modified().ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(oldest, |d| d.as_millis() as i64);
                Some(PendingHints {
                    host_id: host,
                    files: files.len(),
                    oldest_ms: oldest,
                    newest_ms: newest.max(oldest),
                })
            })
            .collect()
    }

    /// Whether hints wait for `host`.
    pub fn has_hints_for(&self, host: uuid::Uuid) -> bool {
        self.files().contains_key(&host)
    }

    /// Deletes the hints of `host`, or of every host (`truncatehints`).
    pub async fn truncate(&self, host: Option<uuid::Uuid>) {
        let _g = self.delivering.write().await;
        let mut open = self.open.lock();
        for (h, files) in self.files() {
            if host.is_none_or(|x| x == h) {
                open.remove(&h);
                for (_, p) in files {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
    }

    /// Delivers the hints of `host` through `send` (which answers whether
    /// the target applied the mutations), file by file, at the throttle
    /// shared by `other_nodes` peers. A file is deleted once all of it is
    /// delivered; a failure stops delivery, to be tried again later.
    /// `gc_grace` gives a mutation's expiry in seconds (None: its table is
    /// gone). Returns how many hints were delivered.
    #[allow(clippy::too_many_arguments)]
    pub async fn deliver<F, Fut>(
        &self,
        host: uuid::Uuid,
        address: std::net::IpAddr,
        other_nodes: usize,
        gc_grace: impl Fn(uuid::Uuid) -> Option<i32>,
        comparator: &(dyn Fn(uuid::Uuid) -> Option<std::sync::Arc<sibyl_db::clustering::ClusteringComparator>>
              + Sync),
        send: F,
    ) -> usize
    where
        F: Fn(Vec<Mutation>) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        if self.is_paused() {
            return 0;
        }
        // one delivery per host; at most `delivery_threads` hosts at once
        if !self.delivering_to.lock().insert(host) {
            return 0;
        }
        struct Done<'a>(&'a Mutex<std::collections::HashSet<uuid::Uuid>>, uuid::Uuid);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.lock().remove(&self.1);
            }
        }
        let _done = Done(&self.delivering_to, host);
        let queued = sibyl_metrics::stages::HINTS_DISPATCHER.enqueue();
        let Ok(_slot) = self.delivery_slots.acquire().await else {
            return 0;
        };
        let _running = queued.start();
        let _g = self.delivering.read().await;
        // new hints go to a new file from now on
        self.open.lock().remove(&host);
        let Some(files) = self.files().remove(&host) else {
            return 0;
        };
        let mut delivered = 0;
        let endpoint = std::net::SocketAddr::new(address, self.config.lock().log_port);
        for (_, path) in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut buf = Vec::new();
            if std::fs::File::open(&path)
                .and_then(|mut f| f.read_to_end(&mut buf))
                .is_err()
            {
                continue;
            }
            let (records, damage) = decode_hints(&buf);
            if let Some(d) = &damage {
                self.metrics.corrupt_files.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "hints file {}: {d}; delivering the {} hints before it",
                    path.display(),
                    records.len()
                );
            }
            let now = now_ms();
            // pages of hints, one message each
            let mut page: Vec<Mutation> = Vec::new();
            let mut page_bytes = 0usize;
            let mut records = records.into_iter().peekable();
            while let Some((created, bytes)) = records.next() {
                if self.is_paused() {
                    return delivered;
                }
                match decode_mutation(&bytes, comparator) {
                    Ok(Some(m)) => match gc_grace(m.table_id) {
                        Some(g) if created + i64::from(g) * 1000 >= now => {
                            page_bytes += bytes.len();
                            page.push(m);
                        }
                        _ => {
                            self.metrics.expired.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    _ => {
                        self.metrics.expired.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let last = records.peek().is_none();
                if page.is_empty() || (!last && page.len() < PAGE_HINTS && page_bytes < PAGE_BYTES)
                {
                    continue;
                }
                let started = Instant::now();
                let n = page.len();
                if !send(std::mem::take(&mut page)).await {
                    self.metrics.failed.fetch_add(n as u64, Ordering::Relaxed);
                    tracing::info!(
                        "Finished hinted handoff of file {name} to endpoint /{endpoint}: {host}, partially"
                    );
                    return delivered;
                }
                delivered += n;
                self.metrics
                    .delivered
                    .fetch_add(n as u64, Ordering::Relaxed);
                // throttle: this page's bytes at the per-peer rate
                let rate = self.throttle_bytes_per_second() / other_nodes.max(1) as u64;
                if rate > 0 {
                    let due = Duration::from_secs_f64(page_bytes as f64 / rate as f64);
                    if let Some(wait) = due.checked_sub(started.elapsed()) {
                        tokio::time::sleep(wait).await;
                    }
                }
                page_bytes = 0;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => tracing::info!("Deleted hint file {name}"),
                Err(e) => tracing::error!("Failed to delete hint file {name}: {e}"),
            }
            tracing::info!(
                "Finished hinted handoff of file {name} to endpoint /{endpoint}: {host}"
            );
        }
        delivered
    }

    /// Flushes open files to the OS (for a clean stop).
    pub fn flush(&self) {
        for f in self.open.lock().values_mut() {
            let _ = f.file.flush();
            let _ = f.file.sync_data();
        }
    }
}

/// The path of the hints directory for a data directory.
pub fn default_directory(data: &Path) -> PathBuf {
    data.join("hints")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_records_survive_a_torn_tail() {
        let h = uuid::Uuid::from_u128(0x1234);
        assert_eq!(parse_name(&file_name(h, 1700)), Some((h, 1700)));
        assert_eq!(parse_name("x.hints"), None);
        let m = Mutation {
            table_id: uuid::Uuid::from_u128(9),
            key: sibyl_db::DecoratedKey::new(Bytes::from_static(b"k")),
            update: sibyl_db::Partition::new(),
        };
        let mut buf = MAGIC.to_be_bytes().to_vec();
        buf.push(HINTS_VERSION);
        encode_hint(5, &m, &mut buf);
        encode_hint(6, &m, &mut buf);
        let (all, damage) = decode_hints(&buf);
        assert_eq!((all.len(), damage), (2, None));
        let (some, damage) = decode_hints(&buf[..buf.len() - 3]);
        assert_eq!(some.len(), 1);
        assert!(damage.is_some_and(|d| d.contains("torn")));
        let mut bad = buf.clone();
        let last = bad.len() - 6;
        bad[last] ^= 0xff;
        let (some, damage) = decode_hints(&bad);
        assert_eq!(some.len(), 1);
        assert!(damage.is_some_and(|d| d.contains("checksum")));
        // random bytes never panic
        for n in 0..200u32 {
            let junk: Vec<u8> = (0..n)
                .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
                .collect();
            let _ = decode_hints(&junk);
        }
    }

    /// Hosts are delivered to in parallel up to `delivery_threads`, and
    /// never twice at once.
    #[tokio::test]
    async fn deliveries_run_in_parallel_up_to_the_thread_count() {
        for threads in [1usize, 2] {
            let dir = tempfile::tempdir().unwrap();
            let hints = std::sync::Arc::new(
                HintsService::new(HintsConfig {
                    directory: dir.path().to_path_buf(),
                    enabled: true,
                    disabled_datacenters: Vec::new(),
                    max_hint_window: Duration::from_secs(3600),
                    throttle_bytes_per_second: 0,
                    delivery_threads: threads,
                    log_port: 7000,
                })
                .unwrap(),
            );
            let m = Mutation {
                table_id: uuid::Uuid::from_u128(9),
                key: sibyl_db::DecoratedKey::new(Bytes::from_static(b"k")),
                update: sibyl_db::Partition::new(),
            };
            let hosts: Vec<uuid::Uuid> = (1..=3).map(uuid::Uuid::from_u128).collect();
            for h in &hosts {
                hints.store(*h, std::slice::from_ref(&m));
            }
            hints.flush();
            let now = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let most = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let mut tasks = tokio::task::JoinSet::new();
            // the same host twice: the second finds it taken
            for h in hosts.iter().chain(&hosts[..1]) {
                let (hints, now, most, h) = (hints.clone(), now.clone(), most.clone(), *h);
                tasks.spawn(async move {
                    let comparator =
                        |_| Some(sibyl_db::clustering::ClusteringComparator::new(Vec::new()));
                    hints
                        .deliver(
                            h,
                            std::net::IpAddr::from([127, 0, 0, 2]),
                            2,
                            |_| Some(864_000),
                            &comparator,
                            |_| {
                                let (now, most) = (now.clone(), most.clone());
                                async move {
                                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                                    most.fetch_max(n, Ordering::SeqCst);
                                    tokio::time::sleep(Duration::from_millis(50)).await;
                                    now.fetch_sub(1, Ordering::SeqCst);
                                    true
                                }
                            },
                        )
                        .await
                });
            }
            let mut delivered = 0;
            while let Some(n) = tasks.join_next().await {
                delivered += n.unwrap();
            }
            assert_eq!(delivered, 3, "threads {threads}");
            assert_eq!(most.load(Ordering::SeqCst), threads);
            assert!(hints.pending().is_empty());
        }
    }
}
