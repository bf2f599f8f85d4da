//! The rows of `system_views` (Cassandra's virtual tables), made when read
//! from the node's own parts: its settings, connected clients, thread
//! pools, caches, running compactions, tables' figures from the storage
//! engine and the coordinator, hints, peers' messaging, gossip, streams
//! and snapshots.
//!
//! Tables of things Sibyl does not have (the auth caches' keys, CIDR
//! filtering, storage-attached indexes, repair tables, the in-memory log
//! appender) have Cassandra's columns and no rows.

use crate::cluster::ClusterServices;
use crate::config::Config;
use bytes::Bytes;
use sibyl_cluster::endpoint_state::ApplicationState;
use sibyl_cql3::query::QueryProcessor;
use sibyl_cql3::virtual_table::VirtualTables;
use sibyl_db::cells::WriteParams;
use sibyl_db::Mutation;
use sibyl_metrics::{Collection, MetricName, Snapshot, Value};
use sibyl_schema::schema::TableMetadata;
use sibyl_schema::schema_tables::{boolean, double, int, row_mutation, text, text_list, text_map};
use sibyl_storage::StorageEngine;
use sibyl_transport::Server;
use sibyl_types::now_millis;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Weak};

/// The node's parts the views read. The query processor and the CQL
/// server hold this (through the query processor), so they are held
/// weakly here.
pub struct SystemViews {
    pub qp: Weak<QueryProcessor>,
    pub server: Weak<Server>,
    pub storage: Arc<StorageEngine>,
    pub cluster: Arc<ClusterServices>,
    pub config: Config,
}

type Cols = Vec<(&'static str, Option<Bytes>)>;

/// Builds one table's rows.
struct Rows<'a> {
    table: &'a TableMetadata,
    wp: WriteParams,
    out: Vec<Mutation>,
}

impl Rows<'_> {
    fn row(&mut self, pk: &[Bytes], ck: &[Bytes], cols: Cols) {
        let cols: Vec<(&str, Option<Bytes>)> =
            cols.into_iter().filter(|(_, v)| v.is_some()).collect();
        self.out
            .push(row_mutation(self.table, pk, ck, &cols, &self.wp));
    }
}

fn bigint(n: u64) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(
        &(n.min(i64::MAX as u64) as i64).to_be_bytes(),
    ))
}
fn signed(n: i64) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&n.to_be_bytes()))
}
fn int32(n: i64) -> Option<Bytes> {
    Some(int(n.clamp(i32::MIN as i64, i32::MAX as i64) as i32))
}
fn dbl(d: f64) -> Option<Bytes> {
    Some(double(d))
}
fn txt(s: &str) -> Option<Bytes> {
    Some(text(s))
}
use sibyl_schema::schema_tables::inet;
fn timestamp(millis: i64) -> Option<Bytes> {
    signed(millis)
}
fn uuid(u: uuid::Uuid) -> Bytes {
    Bytes::copy_from_slice(u.as_bytes())
}
fn mebibytes(bytes: u64) -> Option<Bytes> {
    bigint(bytes >> 20)
}

/// A task's id as a `timeuuid` column: Sibyl's task ids are time-based;
/// an id from an older node (random) becomes a time-based one at the
/// epoch, the same each time it is read.
fn timeuuid_of(id: uuid::Uuid) -> Bytes {
    if id.get_version_num() == 1 {
        return uuid(id);
    }
    let b = id.as_bytes();
    let mut out = *sibyl_types::timeuuid::min_timeuuid(0).as_bytes();
    out[8] = 0x80 | (b[8] & 0x3F);
    out[9..16].copy_from_slice(&b[9..16]);
    Bytes::copy_from_slice(&out)
}

/// A latency in microseconds as the tables' milliseconds.
fn ms(micros: f64) -> Option<Bytes> {
    dbl(micros / 1000.0)
}

impl VirtualTables for SystemViews {
    fn rows(&self, table: &TableMetadata, now: i32) -> Vec<Mutation> {
        let mut r = Rows {
            table,
            wp: WriteParams {
                timestamp: 1,
                ttl: 0,
                now,
            },
            out: Vec::new(),
        };
        if table.keyspace == "system" {
            match table.name.as_str() {
                "IndexInfo" => self.built_indexes(&mut r),
                "size_estimates" | "table_estimates" => self.size_estimates(&mut r),
                _ => {} // the views' tables: Sibyl has no materialized views
            }
            return r.out;
        }
        match table.name.as_str() {
            "settings" => self.settings(&mut r),
            "system_properties" => self.system_properties(&mut r),
            "clients" => self.clients(&mut r),
            "thread_pools" => thread_pools(&mut r),
            "caches" => self.caches(&mut r),
            "sstable_tasks" => self.sstable_tasks(&mut r),
            "disk_usage" | "max_partition_size" | "max_sstable_size" | "max_sstable_duration" => {
                self.table_sizes(&mut r)
            }
            "local_read_latency" => self.latencies(&mut r, "ReadLatency"),
            "local_write_latency" => self.latencies(&mut r, "WriteLatency"),
            "local_scan_latency" => self.latencies(&mut r, "RangeLatency"),
            "coordinator_read_latency" => self.latencies(&mut r, "CoordinatorReadLatency"),
            "coordinator_write_latency" => self.latencies(&mut r, "CoordinatorWriteLatency"),
            "coordinator_scan_latency" => self.latencies(&mut r, "CoordinatorScanLatency"),
            "rows_per_read" => self.per_read(&mut r, "LiveScannedHistogram"),
            "tombstones_per_read" => self.per_read(&mut r, "TombstoneScannedHistogram"),
            "batch_metrics" => self.batch_metrics(&mut r),
            "cql_metrics" => self.cql_metrics(&mut r),
            "pending_hints" => self.pending_hints(&mut r),
            "internode_inbound" | "internode_outbound" => self.internode(&mut r),
            "gossip_info" => self.gossip_info(&mut r),
            "streaming" => self.streaming(&mut r),
            "snapshots" => self.snapshots(&mut r),
            _ => {}
        }
        r.out
    }
}

impl SystemViews {
    fn settings(&self, r: &mut Rows) {
        for (name, value) in self.config.settings() {
            r.row(&[text(name)], &[], vec![("value", value.map(|v| text(&v)))]);
        }
    }

    fn system_properties(&self, r: &mut Rows) {
        let mut props: BTreeMap<String, String> =
            self.config.system_properties.iter().cloned().collect();
        props.insert("os.arch".into(), std::env::consts::ARCH.into());
        props.insert("os.name".into(), std::env::consts::OS.into());
        if let Ok(home) = std::env::var("HOME") {
            props.insert("user.home".into(), home);
        }
        if let Ok(dir) = std::env::current_dir() {
            props.insert("user.dir".into(), dir.display().to_string());
        }
        for (name, value) in props {
            r.row(&[text(&name)], &[], vec![("value", txt(&value))]);
        }
    }

    fn clients(&self, r: &mut Rows) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        for c in server.clients.list() {
            let opt = |k: &str| c.options.get(k).map(|v| text(v));
            r.row(
                &[inet(c.address.ip())],
                &[int(c.address.port() as i32)],
                vec![
                    ("client_options", Some(text_map(&c.options))),
                    ("connection_stage", txt(c.stage.name())),
                    ("driver_name", opt("DRIVER_NAME")),
                    ("driver_version", opt("DRIVER_VERSION")),
                    ("hostname", txt(&hostname_of(c.address.ip()))),
                    ("keyspace_name", c.keyspace.as_deref().and_then(txt)),
                    ("protocol_version", int32(c.protocol_version as i64)),
                    ("request_count", bigint(c.requests)),
                    ("ssl_enabled", Some(boolean(false))),
                    (
                        "username",
                        txt(c.username.as_deref().unwrap_or("anonymous")),
                    ),
                ],
            );
        }
    }

    fn caches(&self, r: &mut Rows) {
        let caches = [
            (
                "keys",
                self.storage.key_cache.usage(),
                &self.storage.key_cache.stats,
            ),
            (
                "rows",
                self.storage.row_cache.usage(),
                &self.storage.row_cache.stats,
            ),
        ];
        for (name, (entries, used, capacity), stats) in caches {
            let hits = stats.hits.load(std::sync::atomic::Ordering::Relaxed);
            let requests = stats.requests.load(std::sync::atomic::Ordering::Relaxed);
            r.row(
                &[text(name)],
                &[],
                vec![
                    ("capacity_bytes", bigint(capacity)),
                    ("entry_count", int32(entries as i64)),
                    ("hit_count", bigint(hits)),
                    (
                        "hit_ratio",
                        dbl(if requests == 0 {
                            f64::NAN
                        } else {
                            hits as f64 / requests as f64
                        }),
                    ),
                    ("request_count", bigint(requests)),
                    ("size_bytes", bigint(used as u64)),
                ],
            );
        }
    }

    fn sstable_tasks(&self, r: &mut Rows) {
        let Some(qp) = self.qp.upgrade() else { return };
        let schema = qp.schema();
        let running = self.storage.compactions_running.lock().clone();
        for p in running {
            let Some(t) = schema.table_by_id(p.table_id) else {
                continue;
            };
            let (done, total) = (p.completed_bytes(), p.total_bytes);
            // Cassandra: a task with nothing to do is complete
            let ratio = if total == 0 {
                1.0
            } else {
                done as f64 / total as f64
            };
            r.row(
                &[text(&t.keyspace)],
                &[text(&t.name), timeuuid_of(p.id)],
                vec![
                    ("completion_ratio", dbl(ratio)),
                    ("kind", txt(&p.kind.to_lowercase())),
                    ("progress", bigint(done)),
                    ("sstables", int32(p.sstables as i64)),
                    ("total", bigint(total)),
                    ("unit", txt("bytes")),
                    (
                        "target_directory",
                        txt(&p.target_directory.display().to_string()),
                    ),
                ],
            );
        }
    }

    /// `disk_usage`, `max_partition_size`, `max_sstable_size` and
    /// `max_sstable_duration`: every table's.
    /// `system."IndexInfo"`: one row per index built on this node, keyed
    /// by its keyspace (the column is called `table_name`, Cassandra's
    /// legacy).
    fn built_indexes(&self, r: &mut Rows) {
        let Some(qp) = self.qp.upgrade() else { return };
        let schema = qp.schema();
        for ks in schema.keyspaces.values() {
            for t in ks.tables.values() {
                for ix in &t.indexes {
                    let built = self
                        .storage
                        .table(ix.store_id(t))
                        .is_some_and(|s| !s.building.load(std::sync::atomic::Ordering::SeqCst));
                    if built {
                        r.row(&[text(&ks.name)], &[text(&ix.name)], vec![]);
                    }
                }
            }
        }
    }

    /// This node's primary ranges and local primary ranges (`(start, end]`):
    /// each of its tokens with the token before it in the whole ring, and
    /// in its own data center (Cassandra's `getPrimaryRanges` and
    /// `getLocalPrimaryRange`).
    fn primary_ranges(&self) -> (Vec<(i64, i64)>, Vec<(i64, i64)>) {
        let ring = self.cluster.state.directory.read().ring();
        let all: Vec<(i64, usize)> = ring.tokens().collect();
        let dc = &self.cluster.datacenter;
        let local: Vec<i64> = all
            .iter()
            .filter(|(_, e)| ring.endpoints.get(*e).is_some_and(|e| &e.datacenter == dc))
            .map(|(t, _)| *t)
            .collect();
        let every: Vec<i64> = all.iter().map(|(t, _)| *t).collect();
        let before = |tokens: &[i64], t: i64| {
            let i = tokens.partition_point(|x| *x < t);
            if i == 0 {
                tokens.last().copied().unwrap_or(t)
            } else {
                tokens[i - 1]
            }
        };
        let mut mine = self.cluster.tokens.clone();
        mine.sort_unstable();
        let of = |tokens: &[i64]| {
            let tokens = if tokens.is_empty() { &mine[..] } else { tokens };
            mine.iter().map(|t| (before(tokens, *t), *t)).collect()
        };
        (of(&every), of(&local))
    }

    /// `system.size_estimates` and `system.table_estimates`: for every table
    /// of the keyspaces placed on the ring, and each of this node's primary
    /// ranges (wrapping ones split at the minimum token), the partitions and
    /// their mean size estimated from the SSTables as Cassandra's
    /// `SizeEstimatesRecorder` does (memtables are not counted).
    fn size_estimates(&self, r: &mut Rows) {
        let Some(qp) = self.qp.upgrade() else { return };
        let schema = qp.schema();
        let (primary, local) = self.primary_ranges();
        let unwrap = |ranges: &[(i64, i64)]| {
            let mut out = Vec::new();
            for &(s, e) in ranges {
                if s < e || e == i64::MIN {
                    out.push((s, e));
                } else {
                    out.push((s, i64::MIN));
                    out.push((i64::MIN, e));
                }
            }
            out
        };
        let types: Vec<(&str, Vec<(i64, i64)>)> = if r.table.name == "size_estimates" {
            vec![("", unwrap(&local))]
        } else {
            vec![
                ("local_primary", unwrap(&local)),
                ("primary", unwrap(&primary)),
            ]
        };
        for ks in schema.keyspaces.values() {
            if ks.is_virtual || ks.replication.strategy == sibyl_schema::ReplicationStrategy::Local
            {
                continue;
            }
            for t in ks.tables.values() {
                let sstables = self
                    .storage
                    .table(t.id)
                    .map(|s| s.sstables())
                    .unwrap_or_default();
                for (kind, ranges) in &types {
                    for &(start, end) in ranges {
                        let (mut count, mut sum, mut n) = (0u64, 0u128, 0u64);
                        for s in sstables.iter().filter(|s| s.intersects_tokens(start, end)) {
                            count += s.estimated_keys_in(start, end);
                            let (mean, parts) = s.partition_size_mean();
                            sum += mean as u128 * parts as u128;
                            n += parts;
                        }
                        let mean = if n > 0 { (sum / n as u128) as u64 } else { 0 };
                        let mut ck = vec![text(&t.name)];
                        if !kind.is_empty() {
                            ck.push(text(kind));
                        }
                        ck.push(text(&start.to_string()));
                        ck.push(text(&end.to_string()));
                        r.row(
                            &[text(&ks.name)],
                            &ck,
                            vec![
                                ("mean_partition_size", bigint(mean)),
                                ("partitions_count", bigint(count)),
                            ],
                        );
                    }
                }
            }
        }
    }

    fn table_sizes(&self, r: &mut Rows) {
        let Some(qp) = self.qp.upgrade() else { return };
        let schema = qp.schema();
        let which = r.table.name.clone();
        for cfs in self.storage.tables() {
            let Some(t) = schema.table_by_id(cfs.table_id) else {
                continue;
            };
            let ss = cfs.sstables();
            let col = match which.as_str() {
                "disk_usage" => (
                    "mebibytes",
                    mebibytes(ss.iter().map(|s| s.size_bytes()).sum()),
                ),
                "max_partition_size" => {
                    let sizes = sibyl_metrics::Histogram::default();
                    for s in &ss {
                        sizes.add_counts(&s.stats.partition_sizes);
                    }
                    ("mebibytes", mebibytes(sizes.max()))
                }
                "max_sstable_size" => (
                    "mebibytes",
                    mebibytes(ss.iter().map(|s| s.size_bytes()).max().unwrap_or(0)),
                ),
                _ => (
                    "max_sstable_duration",
                    bigint(
                        ss.iter()
                            .map(|s| {
                                (s.stats.max_timestamp.saturating_sub(s.stats.min_timestamp) / 1000)
                                    .max(0) as u64
                            })
                            .max()
                            .unwrap_or(0),
                    ),
                ),
            };
            r.row(&[text(&t.keyspace), text(&t.name)], &[], vec![col]);
        }
    }

    /// The tables' figures (storage's and the coordinator's), each
    /// table's metric `name` read once.
    fn each_table_metric(&self, name: &str, mut f: impl FnMut(&str, &str, &Snapshot)) {
        let Some(qp) = self.qp.upgrade() else { return };
        let schema = qp.schema();
        let name_of = |id| crate::metrics::table_name(&schema, id);
        let mut c = Collection::default();
        if name.starts_with("Coordinator") {
            // every table has coordinator figures, requested or not yet
            for cfs in self.storage.tables() {
                qp.proxy.metrics.table(cfs.table_id);
            }
            qp.proxy.metrics.collect(&mut c, &name_of);
        } else {
            self.storage.collect_metrics(&mut c, &name_of);
        }
        for (m, v) in &c.metrics {
            let (Value::Timer(s) | Value::Histogram(s), Some(ks), Some(t)) =
                (v, &m.keyspace, &m.scope)
            else {
                continue;
            };
            if m.kind == "Table" && m.name == name {
                f(ks, t, s);
            }
        }
    }

    /// Every table's timer `name`, in milliseconds.
    fn latencies(&self, r: &mut Rows, name: &str) {
        self.each_table_metric(name, |ks, t, s| {
            r.row(
                &[text(ks), text(t)],
                &[],
                vec![
                    ("count", bigint(s.count)),
                    ("max_ms", ms(s.max)),
                    ("p50th_ms", ms(s.quantiles[0])),
                    ("p99th_ms", ms(s.quantiles[4])),
                    ("per_second", dbl(s.rate)),
                ],
            )
        });
    }

    /// Every table's histogram `name` (rows or tombstones per read).
    fn per_read(&self, r: &mut Rows, name: &str) {
        self.each_table_metric(name, |ks, t, s| {
            r.row(
                &[text(ks), text(t)],
                &[],
                vec![
                    ("count", bigint(s.count)),
                    ("max", dbl(s.max)),
                    ("p50th", dbl(s.quantiles[0])),
                    ("p99th", dbl(s.quantiles[4])),
                ],
            )
        });
    }

    fn batch_metrics(&self, r: &mut Rows) {
        let Some(qp) = self.qp.upgrade() else { return };
        let b = &qp.batch_metrics;
        for (name, h) in [
            ("partitions_per_counter_batch", &b.counter),
            ("partitions_per_logged_batch", &b.logged),
            ("partitions_per_unlogged_batch", &b.unlogged),
        ] {
            let s = Snapshot::of(h);
            r.row(
                &[text(name)],
                &[],
                vec![
                    ("max", bigint(s.max as u64)),
                    ("p50th", dbl(s.quantiles[0])),
                    ("p999th", dbl(s.quantiles[5])),
                    ("p99th", dbl(s.quantiles[4])),
                ],
            );
        }
    }

    fn cql_metrics(&self, r: &mut Rows) {
        let (Some(qp), Some(server)) = (self.qp.upgrade(), self.server.upgrade()) else {
            return;
        };
        let prepared = server.metrics.prepared_executed.get() as f64;
        let regular = server.metrics.regular_executed.get() as f64;
        let all = prepared + regular;
        for (name, v) in [
            ("prepared_statements_count", qp.prepared_count() as f64),
            ("prepared_statements_evicted", qp.prepared_evicted() as f64),
            ("prepared_statements_executed", prepared),
            (
                "prepared_statements_ratio",
                if all == 0.0 { 0.0 } else { prepared / all },
            ),
            ("regular_statements_executed", regular),
        ] {
            r.row(&[text(name)], &[], vec![("value", dbl(v))]);
        }
    }

    fn pending_hints(&self, r: &mut Rows) {
        let Some(qp) = self.qp.upgrade() else { return };
        let Some(hints) = qp.proxy.hints() else {
            return;
        };
        let directory = self.cluster.state.directory.read().clone();
        let g = self.cluster.gossip.gossiper.lock();
        for p in hints.pending() {
            let mut cols = vec![
                ("files", int32(p.files as i64)),
                ("newest", timestamp(p.newest_ms)),
                ("oldest", timestamp(p.oldest_ms)),
            ];
            if let Some(n) = directory.nodes.get(&p.host_id) {
                cols.extend([
                    ("address", Some(inet(n.address))),
                    ("port", int32(self.config.storage_port as i64)),
                    ("dc", txt(&n.datacenter)),
                    ("rack", txt(&n.rack)),
                    (
                        "status",
                        txt(if g.is_alive(n.address) { "UP" } else { "DOWN" }),
                    ),
                ]);
            } else {
                cols.push(("status", txt("UNKNOWN")));
            }
            r.row(&[uuid(p.host_id)], &[], cols);
        }
    }

    fn internode(&self, r: &mut Rows) {
        let directory = self.cluster.state.directory.read().clone();
        let port = self.config.storage_port as i32;
        let inbound = r.table.name == "internode_inbound";
        for (addr, s) in self.cluster.messaging.peers() {
            let node = directory.nodes.values().find(|n| n.address == addr);
            let dc = node.map(|n| n.datacenter.clone()).unwrap_or_default();
            let rack = node.map(|n| n.rack.clone()).unwrap_or_default();
            let cols = if inbound {
                let i = &s.inbound;
                vec![
                    ("corrupt_frames_recovered", bigint(0)),
                    ("corrupt_frames_unrecovered", bigint(i.corrupt_frames.get())),
                    ("error_bytes", bigint(i.error.bytes.get())),
                    ("error_count", bigint(i.error.count.get())),
                    ("processed_bytes", bigint(i.processed.bytes.get())),
                    ("processed_count", bigint(i.processed.count.get())),
                    ("received_bytes", bigint(i.received.bytes.get())),
                    ("received_count", bigint(i.received.count.get())),
                    ("throttled_count", bigint(0)),
                    ("throttled_nanos", bigint(0)),
                ]
            } else {
                let o = &s.outbound;
                vec![
                    (
                        "active_connections",
                        bigint(o.active_connections.get().max(0) as u64),
                    ),
                    ("connection_attempts", bigint(o.connection_attempts.get())),
                    ("error_bytes", bigint(o.error.bytes.get())),
                    ("error_count", bigint(o.error.count.get())),
                    ("expired_count", bigint(s.timeouts.get())),
                    ("overload_bytes", bigint(o.overload.bytes.get())),
                    ("overload_count", bigint(o.overload.count.get())),
                    ("pending_bytes", bigint(o.pending_bytes.get().max(0) as u64)),
                    ("pending_count", bigint(o.pending_count.get().max(0) as u64)),
                    ("sent_bytes", bigint(o.sent.bytes.get())),
                    ("sent_count", bigint(o.sent.count.get())),
                    (
                        "successful_connection_attempts",
                        bigint(o.successful_connection_attempts.get()),
                    ),
                ]
            };
            r.row(&[inet(addr), int(port)], &[text(&dc), text(&rack)], cols);
        }
    }

    fn gossip_info(&self, r: &mut Rows) {
        let port = self.config.storage_port as i32;
        let g = self.cluster.gossip.gossiper.lock();
        for (addr, state) in g.endpoint_states() {
            let mut cols: Cols = vec![
                ("generation", int32(state.heartbeat.generation as i64)),
                ("heartbeat", int32(state.heartbeat.version as i64)),
                ("hostname", txt(&hostname_of(*addr))),
            ];
            for (app, v) in &state.application_states {
                let name = gossip_column(*app);
                if *app != ApplicationState::Tokens {
                    cols.push((name.0, txt(&v.value)));
                }
                cols.push((name.1, int32(v.version as i64)));
            }
            r.row(&[inet(*addr)], &[int(port)], cols);
        }
    }

    fn streaming(&self, r: &mut Rows) {
        let Some(qp) = self.qp.upgrade() else { return };
        let now = now_millis();
        for s in qp.proxy.stream_sessions() {
            use std::sync::atomic::Ordering::Relaxed;
            let elapsed = s.started.elapsed().as_millis() as i64;
            let started_at = if s.id.get_version_num() == 1 {
                sibyl_types::timeuuid::timeuuid_timestamp_millis(s.id.as_bytes())
            } else {
                now - elapsed
            };
            let finished = s.finished.load(Relaxed);
            let error = s.error.lock().clone();
            let status = match (finished, &error) {
                (_, Some(_)) => "failure",
                (true, None) => "success",
                (false, None) => "start",
            };
            let done = s.ranges_done.load(Relaxed);
            let progress = if s.ranges_total == 0 {
                if finished {
                    100.0
                } else {
                    0.0
                }
            } else {
                100.0 * done as f32 / s.ranges_total as f32
            };
            let bytes = s.bytes.load(Relaxed);
            let mut cols = vec![
                ("operation", txt(&s.operation)),
                ("peers", Some(text_list(&[s.peer.to_string()]))),
                ("follower", Some(boolean(!s.receiving))),
                ("status", txt(status)),
                (
                    "progress_percentage",
                    Some(Bytes::copy_from_slice(&progress.to_be_bytes())),
                ),
                ("duration_millis", bigint(elapsed as u64)),
                ("last_updated_at", timestamp(now)),
                ("status_init_timestamp", timestamp(started_at)),
                ("status_start_timestamp", timestamp(started_at)),
                ("failure_cause", error.as_deref().and_then(txt)),
            ];
            if s.receiving {
                cols.push(("bytes_received", bigint(bytes)));
            } else {
                cols.push(("bytes_sent", bigint(bytes)));
            }
            if finished && error.is_none() {
                cols.push(("status_success_timestamp", timestamp(now)));
            }
            if error.is_some() {
                cols.push(("status_failure_timestamp", timestamp(now)));
            }
            r.row(&[timeuuid_of(s.id)], &[], cols);
        }
    }

    fn snapshots(&self, r: &mut Rows) {
        let Some(qp) = self.qp.upgrade() else { return };
        let schema = qp.schema();
        for cfs in self.storage.tables() {
            let Some(t) = schema.table_by_id(cfs.table_id) else {
                continue;
            };
            for (tag, size, true_size) in cfs.snapshots() {
                let created = std::fs::metadata(cfs.dir.join("snapshots").join(&tag))
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_millis() as i64);
                r.row(
                    &[text(&tag)],
                    &[text(&t.keyspace), text(&t.name)],
                    vec![
                        ("created_at", created.and_then(timestamp)),
                        ("ephemeral", Some(boolean(false))),
                        ("size_on_disk", bigint(size)),
                        ("true_size", bigint(true_size)),
                    ],
                );
            }
        }
    }
}

fn thread_pools(r: &mut Rows) {
    for s in sibyl_metrics::stages::all() {
        r.row(
            &[text(s.name)],
            &[],
            vec![
                ("active_tasks", int32(s.active())),
                ("blocked_tasks", bigint(s.blocked().max(0) as u64)),
                ("blocked_tasks_all_time", bigint(s.blocked_total())),
                ("completed_tasks", bigint(s.completed())),
                ("pending_tasks", int32(s.pending().max(0))),
            ],
        );
    }
}

/// A gossip state's columns in `gossip_info`: its value's and its version's.
fn gossip_column(s: ApplicationState) -> (&'static str, &'static str) {
    use ApplicationState::*;
    match s {
        Status => ("status", "status_version"),
        Load => ("load", "load_version"),
        Schema => ("schema", "schema_version"),
        Dc => ("dc", "dc_version"),
        Rack => ("rack", "rack_version"),
        ReleaseVersion => ("release_version", "release_version_version"),
        RemovalCoordinator => ("removal_coordinator", "removal_coordinator_version"),
        InternalIp => ("internal_ip", "internal_ip_version"),
        RpcAddress => ("rpc_address", "rpc_address_version"),
        X11Padding => ("x_11_padding", "x_11_padding_version"),
        Severity => ("severity", "severity_version"),
        NetVersion => ("net_version", "net_version_version"),
        HostId => ("host_id", "host_id_version"),
        Tokens => ("tokens", "tokens_version"),
        RpcReady => ("rpc_ready", "rpc_ready_version"),
        InternalAddressAndPort => (
            "internal_address_and_port",
            "internal_address_and_port_version",
        ),
        NativeAddressAndPort => ("native_address_and_port", "native_address_and_port_version"),
        StatusWithPort => ("status_with_port", "status_with_port_version"),
        SstableVersions => ("sstable_versions", "sstable_versions_version"),
        DiskUsage => ("disk_usage", "disk_usage_version"),
        IndexStatus => ("index_status", "index_status_version"),
        X1 => ("x1", "x1_version"),
        X2 => ("x2", "x2_version"),
        X3 => ("x3", "x3_version"),
        X4 => ("x4", "x4_version"),
        X5 => ("x5", "x5_version"),
        X6 => ("x6", "x6_version"),
        X7 => ("x7", "x7_version"),
        X8 => ("x8", "x8_version"),
        X9 => ("x9", "x9_version"),
        X10 => ("x10", "x10_version"),
    }
}

/// An address's name from `/etc/hosts`, or the address itself (what
/// Java's `getHostName` answers without a DNS name).
fn hostname_of(ip: IpAddr) -> String {
    std::fs::read_to_string("/etc/hosts")
        .ok()
        .and_then(|hosts| {
            hosts.lines().find_map(|l| {
                let l = l.split('#').next()?;
                let mut f = l.split_whitespace();
                let addr: IpAddr = f.next()?.parse().ok()?;
                (addr == ip).then(|| f.next().map(str::to_string)).flatten()
            })
        })
        .unwrap_or_else(|| ip.to_string())
}

/// The Prometheus families and JMX names of the batch figures.
pub fn collect_batches(c: &mut Collection, qp: &QueryProcessor) {
    let b = &qp.batch_metrics;
    c.histogram(
        MetricName::new("Batch", "PartitionsPerLoggedBatch"),
        &b.logged,
    );
    c.histogram(
        MetricName::new("Batch", "PartitionsPerUnloggedBatch"),
        &b.unlogged,
    );
    c.histogram(
        MetricName::new("Batch", "PartitionsPerCounterBatch"),
        &b.counter,
    );
}
