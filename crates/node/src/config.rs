//! Node configuration: a subset of `cassandra.yaml`, same key names and units.
//! Durations accept Cassandra 4.1+ forms (`10s`, `2000ms`) and the old
//! `_in_ms` keys; sizes accept `32MiB`, `16KiB` and the old `_in_mb` keys.
//! Unknown keys are an error.

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid configuration in {path}: {message}")]
    Invalid { path: String, message: String },
}

/// A pluggable class as cassandra.yaml names it: `AllowAllAuthenticator`, or
/// (Cassandra 5.0's form) `{class_name: AllowAllAuthenticator, parameters: ...}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ClassName {
    Name(String),
    Parameterized {
        class_name: String,
        #[allow(dead_code)]
        #[serde(default)]
        parameters: Option<serde_yaml::Value>,
    },
}

impl ClassName {
    fn name(&self) -> &str {
        match self {
            ClassName::Name(n) | ClassName::Parameterized { class_name: n, .. } => n,
        }
    }
}

/// The raw YAML keys we accept.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    cluster_name: Option<String>,
    num_tokens: Option<u32>,
    listen_address: Option<String>,
    rpc_address: Option<String>,
    broadcast_address: Option<String>,
    broadcast_rpc_address: Option<String>,
    native_transport_port: Option<u16>,
    storage_port: Option<u16>,
    data_file_directories: Option<Vec<String>>,
    commitlog_directory: Option<String>,
    hints_directory: Option<String>,
    saved_caches_directory: Option<String>,
    commitlog_sync: Option<String>,
    commitlog_sync_period: Option<String>,
    commitlog_sync_period_in_ms: Option<u64>,
    commitlog_sync_group_window: Option<String>,
    commitlog_sync_group_window_in_ms: Option<u64>,
    commitlog_sync_batch_window_in_ms: Option<f64>,
    commitlog_segment_size: Option<String>,
    commitlog_segment_size_in_mb: Option<u64>,
    native_transport_max_frame_size: Option<String>,
    native_transport_max_frame_size_in_mb: Option<u64>,
    read_request_timeout: Option<String>,
    read_request_timeout_in_ms: Option<u64>,
    write_request_timeout: Option<String>,
    write_request_timeout_in_ms: Option<u64>,
    range_request_timeout: Option<String>,
    range_request_timeout_in_ms: Option<u64>,
    request_timeout: Option<String>,
    request_timeout_in_ms: Option<u64>,
    truncate_request_timeout: Option<String>,
    truncate_request_timeout_in_ms: Option<u64>,
    counter_write_request_timeout: Option<String>,
    counter_write_request_timeout_in_ms: Option<u64>,
    cas_contention_timeout: Option<String>,
    cas_contention_timeout_in_ms: Option<u64>,
    hinted_handoff_enabled: Option<bool>,
    auto_bootstrap: Option<bool>,
    stream_throughput_outbound: Option<String>,
    stream_throughput_outbound_megabits_per_sec: Option<u64>,
    inter_dc_stream_throughput_outbound: Option<String>,
    inter_dc_stream_throughput_outbound_megabits_per_sec: Option<u64>,
    hinted_handoff_disabled_datacenters: Option<Vec<String>>,
    max_hint_window: Option<String>,
    max_hint_window_in_ms: Option<u64>,
    trace_type_query_ttl: Option<String>,
    tracetype_query_ttl: Option<u64>,
    trace_type_repair_ttl: Option<String>,
    tracetype_repair_ttl: Option<u64>,
    hinted_handoff_throttle: Option<String>,
    hinted_handoff_throttle_in_kb: Option<u64>,
    max_hints_delivery_threads: Option<u32>,
    authenticator: Option<ClassName>,
    authorizer: Option<ClassName>,
    endpoint_snitch: Option<String>,
    partitioner: Option<String>,
    native_transport_max_request_data_in_flight: Option<String>,
    native_transport_max_concurrent_requests_in_bytes: Option<i64>,
    native_transport_max_request_data_in_flight_per_ip: Option<String>,
    native_transport_max_concurrent_requests_in_bytes_per_ip: Option<i64>,
    batch_size_warn_threshold: Option<String>,
    batch_size_warn_threshold_in_kb: Option<u64>,
    batch_size_fail_threshold: Option<String>,
    batch_size_fail_threshold_in_kb: Option<u64>,
    unlogged_batch_across_partitions_warn_threshold: Option<u32>,
    tombstone_warn_threshold: Option<u32>,
    start_native_transport: Option<bool>,
    concurrent_compactors: Option<usize>,
    compaction_throughput: Option<String>,
    compaction_throughput_mb_per_sec: Option<u64>,
    disk_failure_policy: Option<String>,
    commit_failure_policy: Option<String>,
    auto_snapshot: Option<bool>,
    admin_address: Option<String>,
    admin_port: Option<u16>,
    memtable_heap_space: Option<String>,
    memtable_heap_space_in_mb: Option<u64>,
    commitlog_total_space: Option<String>,
    commitlog_total_space_in_mb: Option<u64>,
    file_cache_size: Option<String>,
    file_cache_size_in_mb: Option<u64>,
    key_cache_size: Option<String>,
    key_cache_size_in_mb: Option<u64>,
    row_cache_size: Option<String>,
    row_cache_size_in_mb: Option<u64>,
    seed_provider: Option<serde_yaml::Value>,
    phi_convict_threshold: Option<f64>,
    initial_token: Option<String>,
    allocate_tokens_for_local_replication_factor: Option<u32>,
    /// Sibyl: the cluster metadata log's directory (default: beside the
    /// commit log, `metadata`).
    metadata_directory: Option<String>,
    /// Sibyl: background flushes of a table wait while it has more pending
    /// compactions than this (0: never), so writes are held back and refused
    /// as Overloaded instead of SSTables piling up (default 64).
    compaction_backlog_limit: Option<usize>,
    /// Sibyl: the metadata log takes a snapshot after this many entries and
    /// keeps as many behind it (default 1000).
    metadata_snapshot_entries: Option<u64>,
    /// Sibyl: automatic repair of every replicated table's primary ranges
    /// (default off), at least once per interval (default 1d), incremental
    /// (default) or full.
    auto_repair_enabled: Option<bool>,
    auto_repair_interval: Option<String>,
    auto_repair_incremental: Option<bool>,
}

/// `commitlog_sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitLogSync {
    Periodic,
    Batch,
    Group,
}

/// The node's configuration with defaults applied.
#[derive(Debug, Clone)]
pub struct Config {
    pub cluster_name: String,
    pub num_tokens: u32,
    pub listen_address: String,
    pub rpc_address: String,
    pub native_transport_port: u16,
    pub storage_port: u16,
    pub data_file_directories: Vec<PathBuf>,
    pub commitlog_directory: PathBuf,
    pub commitlog_sync: CommitLogSync,
    pub commitlog_sync_period: Duration,
    pub commitlog_sync_group_window: Duration,
    pub commitlog_segment_size_bytes: u64,
    pub native_transport_max_frame_size_bytes: usize,
    /// Not a cassandra.yaml key: `-Dcassandra.commitlog.ignorereplayerrors=true`
    /// on the command line, as Cassandra's JVM option.
    pub commitlog_ignore_replay_errors: bool,
    /// `-Dcassandra.override_decommission=true`: a decommissioned node may
    /// start again.
    pub override_decommission: bool,
    /// `-Dsibyl.messaging_version=N`: the newest internode messaging version
    /// this node speaks (a rolling upgrade holds new builds at the old one).
    pub messaging_version: Option<u8>,
    /// `-Dcassandra.repair_fail_timeout_seconds=N`: an incremental repair
    /// session this node prepared and nobody finished is failed after it.
    pub repair_fail_timeout: Duration,
    /// `-Dcassandra.replace_address_first_boot=IP` (or `replace_address`):
    /// this new node takes the dead node's place (its tokens) and streams
    /// its data from the other replicas.
    pub replace_address: Option<std::net::IpAddr>,
    /// Whether it was `replace_address_first_boot`: ignored once this node
    /// has bootstrapped, where `replace_address` is an error.
    pub replace_address_first_boot: bool,
    pub compaction_backlog_limit: usize,
    /// `native_transport_max_request_data_in_flight` (and per IP): request
    /// bytes being processed before reading pauses.
    pub native_transport_max_request_data_in_flight: usize,
    pub native_transport_max_request_data_in_flight_per_ip: usize,
    pub read_request_timeout: Duration,
    pub write_request_timeout: Duration,
    pub range_request_timeout: Duration,
    pub request_timeout: Duration,
    pub truncate_request_timeout: Duration,
    pub counter_write_request_timeout: Duration,
    pub cas_contention_timeout: Duration,
    pub authenticator: String,
    pub endpoint_snitch: String,
    pub batch_size_warn_threshold_bytes: u64,
    pub batch_size_fail_threshold_bytes: u64,
    /// Partitions an unlogged batch covers before a client warning (10).
    pub unlogged_batch_across_partitions_warn_threshold: u32,
    /// Tombstones one read goes through before a client warning (1000).
    pub tombstone_warn_threshold: u32,
    pub start_native_transport: bool,
    pub concurrent_compactors: usize,
    /// Bytes per second; 0 means unthrottled.
    pub compaction_throughput_bytes: u64,
    pub disk_failure_policy: sibyl_storage::store::DiskFailurePolicy,
    pub commit_failure_policy: sibyl_storage::store::CommitFailurePolicy,
    pub auto_snapshot: bool,
    /// Where `sibyl nodetool` reaches the node (Sibyl's stand-in for JMX).
    pub admin_address: String,
    pub admin_port: u16,
    /// Memory for memtables: the largest is flushed when they hold a third of
    /// it (Cassandra's `memtable_cleanup_threshold`), writers wait beyond it.
    pub memtable_heap_space_bytes: u64,
    /// When the commit log holds more, every table is flushed.
    pub commitlog_total_space_bytes: u64,
    /// Cache of decompressed SSTable chunks.
    pub file_cache_size_bytes: u64,
    /// The key cache (Cassandra's default: 100 MiB at most) and the row
    /// cache (off unless set, as in Cassandra).
    pub key_cache_size_bytes: u64,
    pub row_cache_size_bytes: u64,
    /// The address other nodes reach this one at (default: listen_address).
    pub broadcast_address: String,
    /// The address drivers are told to use (default: rpc_address).
    pub broadcast_rpc_address: String,
    /// Seeds from `seed_provider` (`SimpleSeedProvider`'s `seeds` list);
    /// a node that is the only seed, or no seed at all, starts a new cluster.
    pub seeds: Vec<std::net::IpAddr>,
    pub phi_convict_threshold: f64,
    /// Tokens given by the operator (`initial_token`, comma-separated).
    pub initial_tokens: Vec<i64>,
    pub allocate_tokens_for_local_replication_factor: Option<u32>,
    pub metadata_directory: PathBuf,
    pub metadata_snapshot_entries: u64,
    pub auto_repair_enabled: bool,
    pub auto_repair_interval: Duration,
    pub auto_repair_incremental: bool,
    pub hints_directory: PathBuf,
    pub hinted_handoff_enabled: bool,
    /// A new node streams the data of its ranges before it serves them.
    pub auto_bootstrap: bool,
    /// Bytes per second this node streams out (0: unthrottled).
    pub stream_throughput_outbound_bytes: u64,
    pub inter_dc_stream_throughput_outbound_bytes: u64,
    pub hinted_handoff_disabled_datacenters: Vec<String>,
    pub max_hint_window: Duration,
    /// How long the rows of a traced query's session live (1 day).
    pub trace_type_query_ttl: Duration,
    /// How long the rows of a traced repair's session live (7 days).
    pub trace_type_repair_ttl: Duration,
    /// Bytes per second (`hinted_handoff_throttle`, 1024KiB).
    pub hinted_handoff_throttle_bytes: u64,
    pub max_hints_delivery_threads: u32,
    /// The directory of the configuration file (where
    /// `GossipingPropertyFileSnitch` finds `cassandra-rackdc.properties`).
    pub config_directory: Option<PathBuf>,
    /// Keys of the file that Cassandra takes and Sibyl does not act on.
    pub not_acted_on: Vec<String>,
    /// The `-D` properties the node was started with, and where its
    /// configuration came from (`system_views.system_properties`).
    pub system_properties: Vec<(String, String)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cluster_name: "Test Cluster".into(),
            num_tokens: 16,
            listen_address: "127.0.0.1".into(),
            rpc_address: "127.0.0.1".into(),
            native_transport_port: 9042,
            storage_port: 7000,
            data_file_directories: vec![PathBuf::from("data/data")],
            commitlog_directory: PathBuf::from("data/commitlog"),
            commitlog_sync: CommitLogSync::Periodic,
            commitlog_sync_period: Duration::from_secs(10),
            commitlog_sync_group_window: Duration::from_millis(15),
            commitlog_segment_size_bytes: 32 * 1024 * 1024,
            native_transport_max_frame_size_bytes: 16 * 1024 * 1024,
            commitlog_ignore_replay_errors: false,
            override_decommission: false,
            messaging_version: None,
            repair_fail_timeout: Duration::from_secs(24 * 3600),
            replace_address: None,
            replace_address_first_boot: false,
            compaction_backlog_limit: 64,
            native_transport_max_request_data_in_flight: 256 << 20,
            native_transport_max_request_data_in_flight_per_ip: 64 << 20,
            read_request_timeout: Duration::from_millis(5000),
            write_request_timeout: Duration::from_millis(2000),
            range_request_timeout: Duration::from_millis(10000),
            request_timeout: Duration::from_millis(10000),
            truncate_request_timeout: Duration::from_millis(60000),
            counter_write_request_timeout: Duration::from_millis(5000),
            cas_contention_timeout: Duration::from_millis(1000),
            authenticator: "AllowAllAuthenticator".into(),
            endpoint_snitch: "SimpleSnitch".into(),
            batch_size_warn_threshold_bytes: 5 * 1024,
            batch_size_fail_threshold_bytes: 50 * 1024,
            unlogged_batch_across_partitions_warn_threshold: 10,
            tombstone_warn_threshold: 1000,
            start_native_transport: true,
            concurrent_compactors: 2,
            compaction_throughput_bytes: 64 * 1024 * 1024,
            disk_failure_policy: sibyl_storage::store::DiskFailurePolicy::Stop,
            commit_failure_policy: sibyl_storage::store::CommitFailurePolicy::Stop,
            auto_snapshot: true,
            admin_address: "127.0.0.1".into(),
            admin_port: 7199,
            memtable_heap_space_bytes: 512 * 1024 * 1024,
            commitlog_total_space_bytes: 1024 * 1024 * 1024,
            file_cache_size_bytes: 128 * 1024 * 1024,
            key_cache_size_bytes: 100 * 1024 * 1024,
            row_cache_size_bytes: 0,
            broadcast_address: "127.0.0.1".into(),
            broadcast_rpc_address: "127.0.0.1".into(),
            seeds: Vec::new(),
            phi_convict_threshold: 8.0,
            initial_tokens: Vec::new(),
            // cassandra.yaml's default since 4.0
            allocate_tokens_for_local_replication_factor: Some(3),
            metadata_directory: PathBuf::from("data/metadata"),
            metadata_snapshot_entries: 1000,
            auto_repair_enabled: false,
            auto_repair_interval: Duration::from_secs(24 * 3600),
            auto_repair_incremental: true,
            hints_directory: PathBuf::from("data/hints"),
            hinted_handoff_enabled: true,
            auto_bootstrap: true,
            stream_throughput_outbound_bytes: 24 * 1024 * 1024,
            inter_dc_stream_throughput_outbound_bytes: 24 * 1024 * 1024,
            hinted_handoff_disabled_datacenters: Vec::new(),
            max_hint_window: Duration::from_secs(3 * 3600),
            trace_type_query_ttl: Duration::from_secs(86_400),
            trace_type_repair_ttl: Duration::from_secs(7 * 86_400),
            hinted_handoff_throttle_bytes: 1024 * 1024,
            max_hints_delivery_threads: 2,
            config_directory: None,
            not_acted_on: Vec::new(),
            system_properties: Vec::new(),
        }
    }
}

/// The keys of a cassandra.yaml that Sibyl reads, and those it does not
/// act on; a key Cassandra 5.0.4 does not take is an error in its words.
fn raw_config(text: &str) -> Result<(RawConfig, Vec<String>), String> {
    let doc: serde_yaml::Value = if text.trim().is_empty() {
        serde_yaml::Value::Null
    } else {
        serde_yaml::from_str(text).map_err(|e| e.to_string())?
    };
    let map = match doc {
        serde_yaml::Value::Null => return Ok((RawConfig::default(), Vec::new())),
        serde_yaml::Value::Mapping(m) => m,
        _ => return Err("Invalid yaml: the file is not a mapping of settings".into()),
    };
    let mut kept = serde_yaml::Mapping::new();
    let (mut ignored, mut unknown) = (Vec::new(), Vec::new());
    for (k, v) in map {
        let key = match &k {
            serde_yaml::Value::String(s) => s.clone(),
            other => format!("{other:?}"),
        };
        if sibyl_reads(&key) {
            kept.insert(k, v);
        } else if crate::cassandra_keys::is_cassandra_key(&key) {
            ignored.push(key);
        } else {
            unknown.push(key);
        }
    }
    if !unknown.is_empty() {
        return Err(format!(
            "Invalid yaml. Please remove properties [{}] from your cassandra.yaml",
            unknown.join(", ")
        ));
    }
    // back through text: YAML's plain scalars (`stream_throughput_outbound: 0`)
    // then read as whatever the key takes, as from the file itself
    let text = serde_yaml::to_string(&kept).map_err(|e| e.to_string())?;
    let raw = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
    ignored.sort();
    Ok((raw, ignored))
}

/// Whether `key` is one of Sibyl's settings (a field of [`RawConfig`]).
fn sibyl_reads(key: &str) -> bool {
    let mut m = serde_yaml::Mapping::new();
    m.insert(key.into(), serde_yaml::Value::Null);
    match serde_yaml::from_value::<RawConfig>(serde_yaml::Value::Mapping(m)) {
        Ok(_) => true,
        Err(e) => !e.to_string().contains("unknown field"),
    }
}

/// Parses `10s`, `100ms`, `1m`, `2h`, `1d`, `500us`, or a bare number in `default_unit_ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("invalid duration '{s}'"))?;
    let ms = match unit.trim().to_ascii_lowercase().as_str() {
        "ms" | "milliseconds" => n,
        "s" | "seconds" => n * 1000.0,
        "m" | "minutes" => n * 60_000.0,
        "h" | "hours" => n * 3_600_000.0,
        "d" | "days" => n * 86_400_000.0,
        "us" | "µs" | "microseconds" => n / 1000.0,
        "ns" | "nanoseconds" => n / 1_000_000.0,
        _ => {
            return Err(format!(
                "invalid duration '{s}': unknown unit '{unit}' (use ms, s, m, h, d)"
            ))
        }
    };
    // Cassandra's durations are longs: an absurd value is refused, not wrapped
    if !ms.is_finite() || !(0.0..=i64::MAX as f64).contains(&ms) {
        return Err(format!("invalid duration '{s}': out of range"));
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

fn to_usize(b: u64) -> Result<usize, String> {
    usize::try_from(b).map_err(|_| format!("{b} bytes is out of range"))
}

/// `n` old-style units (`_in_kb`, `_in_mb`) as bytes, refused when it
/// does not fit in a long (Cassandra's limit) instead of wrapping.
fn scaled(n: u64, unit: u64) -> Result<u64, String> {
    n.checked_mul(unit)
        .filter(|b| *b <= i64::MAX as u64)
        .ok_or_else(|| format!("{n} x {unit} bytes is out of range"))
}

/// Parses `32MiB`, `16KiB`, `1GiB`, `512B`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("invalid size '{s}'"))?;
    let mult = match unit.trim() {
        "B" | "" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        "GiB" => 1024 * 1024 * 1024,
        _ => {
            return Err(format!(
                "invalid size '{s}': unknown unit '{unit}' (use B, KiB, MiB, GiB)"
            ))
        }
    };
    scaled(n, mult)
}

/// A size as Cassandra's `DataStorageSpec` prints it (`5KiB`, `256MiB`).
fn size_text(bytes: u64) -> String {
    match bytes {
        0 => "0MiB".into(),
        b if b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

/// A duration as Cassandra's `DurationSpec` prints its defaults (`5000ms`, `3h`).
fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms > 0 && ms.is_multiple_of(86_400_000) {
        format!("{}d", ms / 86_400_000)
    } else if ms > 0 && ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else {
        format!("{ms}ms")
    }
}

/// A policy's name as cassandra.yaml spells it (`best_effort`).
fn policy_text(p: impl std::fmt::Debug) -> String {
    let mut out = String::new();
    for (i, ch) in format!("{p:?}").chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

impl Config {
    /// The settings this node acts on, under Cassandra 5.0's names and in
    /// its units (`system_views.settings`): `None` for one not set.
    pub fn settings(&self) -> Vec<(&'static str, Option<String>)> {
        let path = |p: &std::path::Path| p.display().to_string();
        let dirs = |d: &[PathBuf]| {
            format!(
                "[{}]",
                d.iter().map(|p| path(p)).collect::<Vec<_>>().join(", ")
            )
        };
        let list = |l: &[String]| format!("[{}]", l.join(", "));
        let some = |s: String| Some(s);
        let mut v = vec![
            (
                "allocate_tokens_for_local_replication_factor",
                self.allocate_tokens_for_local_replication_factor
                    .map(|n| n.to_string()),
            ),
            ("authenticator.class_name", some(self.authenticator.clone())),
            ("auto_bootstrap", some(self.auto_bootstrap.to_string())),
            (
                "tombstone_warn_threshold",
                some(self.tombstone_warn_threshold.to_string()),
            ),
            (
                "unlogged_batch_across_partitions_warn_threshold",
                some(
                    self.unlogged_batch_across_partitions_warn_threshold
                        .to_string(),
                ),
            ),
            ("auto_snapshot", some(self.auto_snapshot.to_string())),
            (
                "batch_size_fail_threshold",
                some(size_text(self.batch_size_fail_threshold_bytes)),
            ),
            (
                "batch_size_warn_threshold",
                some(size_text(self.batch_size_warn_threshold_bytes)),
            ),
            ("broadcast_address", some(self.broadcast_address.clone())),
            (
                "broadcast_rpc_address",
                some(self.broadcast_rpc_address.clone()),
            ),
            (
                "cas_contention_timeout",
                some(duration_text(self.cas_contention_timeout)),
            ),
            ("cluster_name", some(self.cluster_name.clone())),
            (
                "commit_failure_policy",
                some(policy_text(self.commit_failure_policy)),
            ),
            ("commitlog_directory", some(path(&self.commitlog_directory))),
            (
                "commitlog_segment_size",
                some(size_text(self.commitlog_segment_size_bytes)),
            ),
            ("commitlog_sync", some(policy_text(self.commitlog_sync))),
            (
                "commitlog_sync_group_window",
                some(duration_text(self.commitlog_sync_group_window)),
            ),
            (
                "commitlog_sync_period",
                some(duration_text(self.commitlog_sync_period)),
            ),
            (
                "commitlog_total_space",
                some(size_text(self.commitlog_total_space_bytes)),
            ),
            (
                "compaction_throughput",
                some(format!("{}/s", size_text(self.compaction_throughput_bytes))),
            ),
            (
                "concurrent_compactors",
                some(self.concurrent_compactors.to_string()),
            ),
            (
                "counter_write_request_timeout",
                some(duration_text(self.counter_write_request_timeout)),
            ),
            (
                "data_file_directories",
                some(dirs(&self.data_file_directories)),
            ),
            (
                "disk_failure_policy",
                some(policy_text(self.disk_failure_policy)),
            ),
            ("endpoint_snitch", some(self.endpoint_snitch.clone())),
            (
                "file_cache_size",
                some(size_text(self.file_cache_size_bytes)),
            ),
            (
                "hinted_handoff_disabled_datacenters",
                some(list(&self.hinted_handoff_disabled_datacenters)),
            ),
            (
                "hinted_handoff_enabled",
                some(self.hinted_handoff_enabled.to_string()),
            ),
            (
                "hinted_handoff_throttle",
                some(size_text(self.hinted_handoff_throttle_bytes)),
            ),
            ("hints_directory", some(path(&self.hints_directory))),
            (
                "initial_token",
                (!self.initial_tokens.is_empty()).then(|| {
                    let t: Vec<String> = self.initial_tokens.iter().map(i64::to_string).collect();
                    t.join(",")
                }),
            ),
            (
                "inter_dc_stream_throughput_outbound",
                some(format!(
                    "{}/s",
                    size_text(self.inter_dc_stream_throughput_outbound_bytes)
                )),
            ),
            ("key_cache_size", some(size_text(self.key_cache_size_bytes))),
            ("listen_address", some(self.listen_address.clone())),
            ("max_hint_window", some(duration_text(self.max_hint_window))),
            (
                "trace_type_query_ttl",
                some(duration_text(self.trace_type_query_ttl)),
            ),
            (
                "trace_type_repair_ttl",
                some(duration_text(self.trace_type_repair_ttl)),
            ),
            (
                "max_hints_delivery_threads",
                some(self.max_hints_delivery_threads.to_string()),
            ),
            (
                "memtable_heap_space",
                some(size_text(self.memtable_heap_space_bytes)),
            ),
            (
                "native_transport_max_frame_size",
                some(size_text(self.native_transport_max_frame_size_bytes as u64)),
            ),
            (
                "native_transport_max_request_data_in_flight",
                some(size_text(
                    self.native_transport_max_request_data_in_flight as u64,
                )),
            ),
            (
                "native_transport_max_request_data_in_flight_per_ip",
                some(size_text(
                    self.native_transport_max_request_data_in_flight_per_ip as u64,
                )),
            ),
            (
                "native_transport_port",
                some(self.native_transport_port.to_string()),
            ),
            ("num_tokens", some(self.num_tokens.to_string())),
            (
                "phi_convict_threshold",
                some(format!("{:?}", self.phi_convict_threshold)),
            ),
            (
                "range_request_timeout",
                some(duration_text(self.range_request_timeout)),
            ),
            (
                "read_request_timeout",
                some(duration_text(self.read_request_timeout)),
            ),
            ("request_timeout", some(duration_text(self.request_timeout))),
            ("row_cache_size", some(size_text(self.row_cache_size_bytes))),
            ("rpc_address", some(self.rpc_address.clone())),
            (
                "seed_provider.class_name",
                some("org.apache.cassandra.locator.SimpleSeedProvider".into()),
            ),
            (
                "seed_provider.parameters",
                some(format!(
                    "{{seeds={}}}",
                    self.seeds
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )),
            ),
            (
                "start_native_transport",
                some(self.start_native_transport.to_string()),
            ),
            ("storage_port", some(self.storage_port.to_string())),
            (
                "stream_throughput_outbound",
                some(format!(
                    "{}/s",
                    size_text(self.stream_throughput_outbound_bytes)
                )),
            ),
            (
                "truncate_request_timeout",
                some(duration_text(self.truncate_request_timeout)),
            ),
            (
                "write_request_timeout",
                some(duration_text(self.write_request_timeout)),
            ),
        ];
        v.sort_by_key(|(k, _)| *k);
        v
    }
    /// Reads a YAML file with `cassandra.yaml` key names.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: p.clone(),
            source: e,
        })?;
        let mut c =
            Self::parse(&text).map_err(|message| ConfigError::Invalid { path: p, message })?;
        c.config_directory = path.parent().map(|d| d.to_path_buf());
        Ok(c)
    }

    /// Parses YAML text. Every key Cassandra 5.0.4 takes is taken: those
    /// Sibyl acts on are used, the others are listed in `not_acted_on` (the
    /// node warns about them once at start). A key Cassandra would refuse
    /// is refused in Cassandra's words.
    pub fn parse(text: &str) -> Result<Config, String> {
        let (raw, not_acted_on) = raw_config(text)?;
        let mut c = Config {
            not_acted_on,
            ..Config::default()
        };
        let dur =
            |new: &Option<String>, old: Option<u64>, cur: Duration| -> Result<Duration, String> {
                if let Some(s) = new {
                    return parse_duration(s);
                }
                match old {
                    Some(ms) if ms > i64::MAX as u64 => Err(format!("{ms} ms is out of range")),
                    Some(ms) => Ok(Duration::from_millis(ms)),
                    None => Ok(cur),
                }
            };
        if let Some(v) = raw.cluster_name {
            c.cluster_name = v;
        }
        if let Some(v) = raw.num_tokens {
            if v == 0 {
                return Err("num_tokens must be at least 1".into());
            }
            c.num_tokens = v;
        }
        if let Some(v) = raw.listen_address {
            c.listen_address = v;
            c.rpc_address = c.listen_address.clone();
        }
        if let Some(v) = raw.rpc_address {
            c.rpc_address = v;
        }
        if let Some(v) = raw.native_transport_port {
            c.native_transport_port = v;
        }
        if let Some(v) = raw.storage_port {
            c.storage_port = v;
        }
        if let Some(v) = raw.data_file_directories {
            if v.is_empty() {
                return Err("data_file_directories must not be empty".into());
            }
            c.data_file_directories = v.into_iter().map(PathBuf::from).collect();
        }
        c.commitlog_directory = match raw.commitlog_directory {
            Some(v) => PathBuf::from(v),
            None => c.data_file_directories[0]
                .parent()
                .map(|p| p.join("commitlog"))
                .unwrap_or_else(|| PathBuf::from("commitlog")),
        };
        if let Some(v) = raw.commitlog_sync {
            c.commitlog_sync = match v.as_str() {
                "periodic" => CommitLogSync::Periodic,
                "batch" => CommitLogSync::Batch,
                "group" => CommitLogSync::Group,
                other => {
                    return Err(format!(
                        "commitlog_sync must be periodic, batch or group, not '{other}'"
                    ))
                }
            };
        }
        c.commitlog_sync_period = dur(
            &raw.commitlog_sync_period,
            raw.commitlog_sync_period_in_ms,
            c.commitlog_sync_period,
        )?;
        c.commitlog_sync_group_window = dur(
            &raw.commitlog_sync_group_window,
            raw.commitlog_sync_group_window_in_ms,
            c.commitlog_sync_group_window,
        )?;
        if let Some(s) = raw.commitlog_segment_size {
            c.commitlog_segment_size_bytes = parse_size(&s)?;
        } else if let Some(mb) = raw.commitlog_segment_size_in_mb {
            c.commitlog_segment_size_bytes = scaled(mb, 1 << 20)?;
        }
        if let Some(s) = raw.native_transport_max_frame_size {
            c.native_transport_max_frame_size_bytes = to_usize(parse_size(&s)?)?;
        } else if let Some(mb) = raw.native_transport_max_frame_size_in_mb {
            c.native_transport_max_frame_size_bytes = to_usize(scaled(mb, 1 << 20)?)?;
        }
        c.read_request_timeout = dur(
            &raw.read_request_timeout,
            raw.read_request_timeout_in_ms,
            c.read_request_timeout,
        )?;
        c.write_request_timeout = dur(
            &raw.write_request_timeout,
            raw.write_request_timeout_in_ms,
            c.write_request_timeout,
        )?;
        c.range_request_timeout = dur(
            &raw.range_request_timeout,
            raw.range_request_timeout_in_ms,
            c.range_request_timeout,
        )?;
        c.request_timeout = dur(
            &raw.request_timeout,
            raw.request_timeout_in_ms,
            c.request_timeout,
        )?;
        c.truncate_request_timeout = dur(
            &raw.truncate_request_timeout,
            raw.truncate_request_timeout_in_ms,
            c.truncate_request_timeout,
        )?;
        c.counter_write_request_timeout = dur(
            &raw.counter_write_request_timeout,
            raw.counter_write_request_timeout_in_ms,
            c.counter_write_request_timeout,
        )?;
        c.cas_contention_timeout = dur(
            &raw.cas_contention_timeout,
            raw.cas_contention_timeout_in_ms,
            c.cas_contention_timeout,
        )?;
        if let Some(v) = raw.auto_bootstrap {
            c.auto_bootstrap = v;
        }
        if let Some(s) = raw.stream_throughput_outbound {
            // "24MiB/s"; 0 turns the throttle off
            c.stream_throughput_outbound_bytes = parse_size(s.trim_end_matches("/s"))?;
        } else if let Some(mbit) = raw.stream_throughput_outbound_megabits_per_sec {
            c.stream_throughput_outbound_bytes = scaled(mbit, 1_000_000)? / 8;
        }
        if let Some(s) = raw.inter_dc_stream_throughput_outbound {
            c.inter_dc_stream_throughput_outbound_bytes = parse_size(s.trim_end_matches("/s"))?;
        } else if let Some(mbit) = raw.inter_dc_stream_throughput_outbound_megabits_per_sec {
            c.inter_dc_stream_throughput_outbound_bytes = scaled(mbit, 1_000_000)? / 8;
        }
        if let Some(v) = raw.hinted_handoff_enabled {
            c.hinted_handoff_enabled = v;
        }
        if let Some(v) = raw.hinted_handoff_disabled_datacenters {
            c.hinted_handoff_disabled_datacenters = v;
        }
        c.max_hint_window = dur(
            &raw.max_hint_window,
            raw.max_hint_window_in_ms,
            c.max_hint_window,
        )?;
        // the old names are in seconds
        let secs = |s: Option<u64>| s.map(|v| v.saturating_mul(1000));
        c.trace_type_query_ttl = dur(
            &raw.trace_type_query_ttl,
            secs(raw.tracetype_query_ttl),
            c.trace_type_query_ttl,
        )?;
        c.trace_type_repair_ttl = dur(
            &raw.trace_type_repair_ttl,
            secs(raw.tracetype_repair_ttl),
            c.trace_type_repair_ttl,
        )?;
        if let Some(s) = raw.hinted_handoff_throttle {
            c.hinted_handoff_throttle_bytes = parse_size(&s)?;
        } else if let Some(kb) = raw.hinted_handoff_throttle_in_kb {
            c.hinted_handoff_throttle_bytes = scaled(kb, 1024)?;
        }
        if let Some(n) = raw.max_hints_delivery_threads {
            if n == 0 {
                return Err("max_hints_delivery_threads must be at least 1".into());
            }
            c.max_hints_delivery_threads = n;
        }
        if let Some(v) = raw.authenticator.as_ref().map(|a| a.name().to_string()) {
            if !matches!(
                v.as_str(),
                "AllowAllAuthenticator" | "org.apache.cassandra.auth.AllowAllAuthenticator"
            ) {
                return Err(format!(
                    "authenticator '{v}' is not supported yet (only AllowAllAuthenticator)"
                ));
            }
            c.authenticator = v;
        }
        if let Some(v) = raw.endpoint_snitch {
            c.endpoint_snitch = v;
        }
        if let Some(v) = raw.partitioner {
            if !v.ends_with("Murmur3Partitioner") {
                return Err(format!("partitioner '{v}' is not supported (only org.apache.cassandra.dht.Murmur3Partitioner)"));
            }
        }
        if let Some(s) = raw.batch_size_warn_threshold {
            c.batch_size_warn_threshold_bytes = parse_size(&s)?;
        } else if let Some(kb) = raw.batch_size_warn_threshold_in_kb {
            c.batch_size_warn_threshold_bytes = scaled(kb, 1024)?;
        }
        if let Some(v) = raw.unlogged_batch_across_partitions_warn_threshold {
            c.unlogged_batch_across_partitions_warn_threshold = v;
        }
        if let Some(v) = raw.tombstone_warn_threshold {
            c.tombstone_warn_threshold = v;
        }
        if let Some(s) = raw.batch_size_fail_threshold {
            c.batch_size_fail_threshold_bytes = parse_size(&s)?;
        } else if let Some(kb) = raw.batch_size_fail_threshold_in_kb {
            c.batch_size_fail_threshold_bytes = scaled(kb, 1024)?;
        }
        let size = |new: &Option<String>, old_mb: Option<u64>, cur: u64| -> Result<u64, String> {
            if let Some(s) = new {
                return parse_size(s);
            }
            old_mb.map_or(Ok(cur), |mb| scaled(mb, 1 << 20))
        };
        c.memtable_heap_space_bytes = size(
            &raw.memtable_heap_space,
            raw.memtable_heap_space_in_mb,
            c.memtable_heap_space_bytes,
        )?;
        c.commitlog_total_space_bytes = size(
            &raw.commitlog_total_space,
            raw.commitlog_total_space_in_mb,
            c.commitlog_total_space_bytes,
        )?;
        c.file_cache_size_bytes = size(
            &raw.file_cache_size,
            raw.file_cache_size_in_mb,
            c.file_cache_size_bytes,
        )?;
        // an empty key_cache_size means "auto", as in cassandra.yaml
        let key_cache = raw.key_cache_size.filter(|s| !s.trim().is_empty());
        c.key_cache_size_bytes =
            size(&key_cache, raw.key_cache_size_in_mb, c.key_cache_size_bytes)?;
        c.row_cache_size_bytes = size(
            &raw.row_cache_size,
            raw.row_cache_size_in_mb,
            c.row_cache_size_bytes,
        )?;
        if let Some(v) = raw.concurrent_compactors {
            if v == 0 {
                return Err("concurrent_compactors must be at least 1".into());
            }
            c.concurrent_compactors = v;
        }
        if let Some(s) = raw.compaction_throughput {
            // "64MiB/s"
            c.compaction_throughput_bytes = parse_size(s.trim_end_matches("/s"))?;
        } else if let Some(mb) = raw.compaction_throughput_mb_per_sec {
            c.compaction_throughput_bytes = scaled(mb, 1 << 20)?;
        }
        if let Some(v) = raw.disk_failure_policy {
            use sibyl_storage::store::DiskFailurePolicy as D;
            c.disk_failure_policy = match v.as_str() {
                "die" => D::Die,
                "stop_paranoid" => D::StopParanoid,
                "stop" => D::Stop,
                "best_effort" => D::BestEffort,
                "ignore" => D::Ignore,
                other => return Err(format!("disk_failure_policy must be die, stop_paranoid, stop, best_effort or ignore, not '{other}'")),
            };
        }
        if let Some(v) = raw.commit_failure_policy {
            use sibyl_storage::store::CommitFailurePolicy as C;
            c.commit_failure_policy = match v.as_str() {
                "die" => C::Die,
                "stop" => C::Stop,
                "stop_commit" => C::StopCommit,
                "ignore" => C::Ignore,
                other => {
                    return Err(format!(
                    "commit_failure_policy must be die, stop, stop_commit or ignore, not '{other}'"
                ))
                }
            };
        }
        if let Some(v) = raw.auto_snapshot {
            c.auto_snapshot = v;
        }
        if let Some(v) = raw.admin_address {
            c.admin_address = v;
        }
        if let Some(v) = raw.admin_port {
            c.admin_port = v;
        }
        if let Some(v) = raw.start_native_transport {
            c.start_native_transport = v;
        }
        c.broadcast_address = raw
            .broadcast_address
            .unwrap_or_else(|| c.listen_address.clone());
        c.broadcast_rpc_address = raw
            .broadcast_rpc_address
            .unwrap_or_else(|| c.rpc_address.clone());
        if let Some(sp) = &raw.seed_provider {
            c.seeds = parse_seeds(sp)?;
        }
        if let Some(v) = raw.phi_convict_threshold {
            if !(5.0..=16.0).contains(&v) {
                return Err(format!(
                    "phi_convict_threshold must be between 5 and 16, not {v}"
                ));
            }
            c.phi_convict_threshold = v;
        }
        if let Some(v) = raw.initial_token {
            c.initial_tokens = v
                .split(',')
                .map(|t| {
                    t.trim().parse::<i64>().map_err(|_| {
                        format!("initial_token: '{}' is not a Murmur3 token", t.trim())
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(rf) = raw.allocate_tokens_for_local_replication_factor {
            c.allocate_tokens_for_local_replication_factor = Some(rf);
        }
        if let Some(n) = raw.compaction_backlog_limit {
            c.compaction_backlog_limit = n;
        }
        if let Some(v) = raw.auto_repair_enabled {
            c.auto_repair_enabled = v;
        }
        if let Some(v) = &raw.auto_repair_interval {
            c.auto_repair_interval =
                parse_duration(v).map_err(|e| format!("auto_repair_interval: {e}"))?;
            if c.auto_repair_interval.is_zero() {
                return Err("auto_repair_interval must be more than 0".into());
            }
        }
        if let Some(v) = raw.auto_repair_incremental {
            c.auto_repair_incremental = v;
        }
        if let Some(n) = raw.metadata_snapshot_entries {
            if n == 0 {
                return Err("metadata_snapshot_entries must be at least 1".into());
            }
            c.metadata_snapshot_entries = n;
        }
        c.metadata_directory = match raw.metadata_directory {
            Some(v) => PathBuf::from(v),
            None => c
                .commitlog_directory
                .parent()
                .map(|p| p.join("metadata"))
                .unwrap_or_else(|| PathBuf::from("metadata")),
        };
        c.hints_directory = match raw.hints_directory {
            Some(v) => PathBuf::from(v),
            None => c
                .commitlog_directory
                .parent()
                .map(|p| p.join("hints"))
                .unwrap_or_else(|| PathBuf::from("hints")),
        };
        let _ = raw.saved_caches_directory;
        for (new, old, field) in [
            (
                raw.native_transport_max_request_data_in_flight,
                raw.native_transport_max_concurrent_requests_in_bytes,
                &mut c.native_transport_max_request_data_in_flight,
            ),
            (
                raw.native_transport_max_request_data_in_flight_per_ip,
                raw.native_transport_max_concurrent_requests_in_bytes_per_ip,
                &mut c.native_transport_max_request_data_in_flight_per_ip,
            ),
        ] {
            let bytes = match (new, old) {
                (Some(s), _) => Some(parse_size(&s)?),
                // the old name took a number of bytes; -1 meant the default
                (None, Some(n)) if n > 0 => Some(n as u64),
                _ => None,
            };
            if let Some(b) = bytes {
                if b == 0 {
                    return Err(
                        "native_transport_max_request_data_in_flight must be positive".into(),
                    );
                }
                *field = to_usize(b)?;
            }
        }
        let _ = (raw.commitlog_sync_batch_window_in_ms, raw.authorizer);
        Ok(c)
    }
}

/// The seeds of `seed_provider`, as cassandra.yaml writes them:
///
/// ```yaml
/// seed_provider:
///   - class_name: org.apache.cassandra.locator.SimpleSeedProvider
///     parameters:
///       - seeds: "127.0.0.1:7000,127.0.0.2"
/// ```
fn parse_seeds(v: &serde_yaml::Value) -> Result<Vec<std::net::IpAddr>, String> {
    let bad = || {
        "seed_provider: expected a list with class_name and parameters: [{seeds: \"host,host\"}]"
            .to_string()
    };
    let providers = v.as_sequence().ok_or_else(bad)?;
    let mut out = Vec::new();
    for p in providers {
        let class = p.get("class_name").and_then(|c| c.as_str()).unwrap_or("");
        if !class.ends_with("SimpleSeedProvider") {
            return Err(format!(
                "seed_provider: unknown class_name '{class}' (only SimpleSeedProvider)"
            ));
        }
        let params = p
            .get("parameters")
            .and_then(|x| x.as_sequence())
            .ok_or_else(bad)?;
        for param in params {
            let Some(seeds) = param.get("seeds").and_then(|s| s.as_str()) else {
                continue;
            };
            for s in seeds.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                // host, host:port, [v6]:port
                let host = if let Some(rest) = s.strip_prefix('[') {
                    rest.split(']').next().unwrap_or(rest)
                } else if s.matches(':').count() == 1 {
                    s.split(':').next().unwrap_or(s)
                } else {
                    s
                };
                let ip = host
                    .parse::<std::net::IpAddr>()
                    .map_err(|_| format!("seed_provider: seed '{s}' is not an IP address"))?;
                if !out.contains(&ip) {
                    out.push(ip);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cassandra_key_names_and_units() {
        let c = Config::parse(
            "cluster_name: x\nnative_transport_port: 9100\ncommitlog_sync: batch\ncommitlog_sync_period: 2s\ndata_file_directories: [/tmp/a]\nwrite_request_timeout_in_ms: 500\nnative_transport_max_frame_size: 1MiB\n",
        )
        .expect("parse");
        assert_eq!(c.cluster_name, "x");
        assert_eq!(c.native_transport_port, 9100);
        assert_eq!(c.commitlog_sync, CommitLogSync::Batch);
        assert_eq!(c.commitlog_sync_period, Duration::from_secs(2));
        assert_eq!(c.write_request_timeout, Duration::from_millis(500));
        assert_eq!(c.native_transport_max_frame_size_bytes, 1 << 20);
        assert_eq!(c.commitlog_directory, PathBuf::from("/tmp/commitlog"));
    }

    #[test]
    fn absurd_sizes_and_durations_are_refused_not_wrapped() {
        for bad in [
            "commitlog_segment_size_in_mb: 18446744073709551615",
            "native_transport_max_frame_size: 18446744073709551615GiB",
            "hinted_handoff_throttle_in_kb: 18014398509481984",
            "compaction_throughput_mb_per_sec: 17592186044416",
            "stream_throughput_outbound_megabits_per_sec: 18446744073709551615",
            "memtable_heap_space_in_mb: 9007199254740992",
            "write_request_timeout: 99999999999999999999999999999999d",
            "read_request_timeout_in_ms: 18446744073709551615",
            "native_transport_max_request_data_in_flight: 9999999999GiB",
            "native_transport_max_request_data_in_flight_per_ip: 0B",
        ] {
            assert!(Config::parse(bad).is_err(), "accepted {bad}");
        }
        let c = Config::parse(
            "native_transport_max_request_data_in_flight: 32MiB\nnative_transport_max_concurrent_requests_in_bytes_per_ip: 1048576\n",
        )
        .expect("parse");
        assert_eq!(c.native_transport_max_request_data_in_flight, 32 << 20);
        assert_eq!(
            c.native_transport_max_request_data_in_flight_per_ip,
            1 << 20
        );
    }

    #[test]
    fn reads_the_cluster_settings() {
        let c = Config::parse(
            "listen_address: 127.0.0.3\nseed_provider:\n  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n    parameters:\n      - seeds: \"127.0.0.1:7000, 127.0.0.2\"\ninitial_token: -9223372036854775808,0\nphi_convict_threshold: 12\ncommitlog_directory: /d/commitlog\n",
        )
        .expect("parse");
        assert_eq!(c.broadcast_address, "127.0.0.3");
        assert_eq!(c.broadcast_rpc_address, "127.0.0.3");
        assert_eq!(
            c.seeds,
            vec![
                "127.0.0.1".parse::<std::net::IpAddr>().expect("ip"),
                "127.0.0.2".parse().expect("ip")
            ]
        );
        assert_eq!(c.initial_tokens, vec![i64::MIN, 0]);
        assert_eq!(c.phi_convict_threshold, 12.0);
        assert_eq!(c.metadata_directory, PathBuf::from("/d/metadata"));
        assert!(Config::parse("phi_convict_threshold: 2\n").is_err());
        assert!(Config::parse("initial_token: abc\n").is_err());
        assert!(Config::parse(
            "seed_provider:\n  - class_name: Foo\n    parameters:\n      - seeds: \"1.2.3.4\"\n"
        )
        .is_err());
    }

    #[test]
    fn unknown_keys_are_an_error() {
        let e = Config::parse("clustr_name: x\nnum_tokens: 4\nfoo: 1\n").expect_err("must fail");
        assert_eq!(
            e,
            "Invalid yaml. Please remove properties [clustr_name, foo] from your cassandra.yaml"
        );
    }

    /// Keys Cassandra 5.0.4 takes (old names too) are taken and listed;
    /// Cassandra 5.0's `{class_name: ...}` form of pluggable classes is read.
    #[test]
    fn cassandras_keys_are_taken_and_those_not_acted_on_listed() {
        let c = Config::parse(
            "num_tokens: 8\n\
             enable_materialized_views: false\n\
             default_secondary_index: legacy_local_table\n\
             materialized_views_enabled: false\n\
             concurrent_reads: 32\n\
             authenticator:\n  class_name: AllowAllAuthenticator\n\
             authorizer:\n  class_name: AllowAllAuthorizer\n",
        )
        .unwrap();
        assert_eq!(c.num_tokens, 8);
        assert_eq!(
            c.not_acted_on,
            vec![
                "concurrent_reads",
                "default_secondary_index",
                "enable_materialized_views",
                "materialized_views_enabled"
            ]
        );
        assert!(crate::cassandra_keys::is_cassandra_key(
            "enable_materialized_views"
        ));
        assert_eq!(
            crate::cassandra_keys::field_of("enable_materialized_views"),
            "materialized_views_enabled"
        );
        // plain scalars read as the key's type, as from the file itself
        let c = Config::parse(
            "stream_throughput_outbound: 0\ncluster_name: 123\nconcurrent_reads: 8\n",
        )
        .unwrap();
        assert_eq!(c.stream_throughput_outbound_bytes, 0);
        assert_eq!(c.cluster_name, "123");
        // a Sibyl key given a bad value is still an error
        assert!(Config::parse("num_tokens: many\n").is_err());
        assert!(Config::parse("authenticator:\n  class_name: PasswordAuthenticator\n").is_err());
    }

    #[test]
    fn bad_units_are_an_error() {
        assert!(Config::parse("commitlog_sync_period: 10 parsecs\n").is_err());
    }
}
