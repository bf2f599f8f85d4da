//! The Prometheus text format (version 0.0.4) of a [`Collection`], with the
//! metric families and labels of instaclustr's `cassandra-exporter`
//! (`cassandra_client_request_latency_seconds{operation="read",
//! consistency="QUORUM",quantile="0.99"}`, `cassandra_table_…{keyspace,
//! table, table_type}`, `cassandra_thread_pool_…{group, pool}`, …) and its
//! global labels (`cassandra_cluster`, `cassandra_node`,
//! `cassandra_datacenter`, `cassandra_rack`), so that its Grafana
//! dashboards and alerts read a Sibyl node as they read a Cassandra one.
//! Metrics the exporter leaves out (read repair, the hints service) follow
//! its naming rules.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::{Collection, MetricName, Snapshot, Value, QUANTILES};

/// How a metric's value becomes a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Conv {
    Counter,
    Gauge,
    /// A percentage shown as a ratio.
    PercentAsRatio,
    /// A timer (microseconds) as a summary in seconds.
    Seconds,
    /// A histogram as a summary in its own unit.
    Plain,
}

type Labels = Vec<(&'static str, String)>;

struct Mapped {
    family: String,
    help: &'static str,
    labels: Labels,
    conv: Conv,
}

fn mapped(family: String, help: &'static str, labels: Labels, conv: Conv) -> Option<Mapped> {
    Some(Mapped {
        family,
        help,
        labels,
        conv,
    })
}

/// The exporter's family, labels and type for a Cassandra metric (none for
/// those it leaves out).
fn map(n: &MetricName) -> Option<Mapped> {
    use Conv::*;
    let scope = n.scope.clone().unwrap_or_default();
    let f = |prefix: &str, suffix: &str| format!("cassandra_{prefix}_{suffix}");
    match n.kind {
        "ClientRequest" => {
            // `Read-QUORUM`: operation and consistency; the totals of reads
            // and writes over every level are left out, as the exporter does
            let (op, cl) = match scope.split_once('-') {
                Some((op, cl)) => (op.to_lowercase(), Some(cl.to_string())),
                None => (scope.to_lowercase(), None),
            };
            if cl.is_none() && (op == "read" || op == "write") {
                return None;
            }
            let mut labels = vec![("operation", op)];
            if let Some(cl) = cl {
                labels.push(("consistency", cl));
            }
            let (suffix, help, conv) = match n.name.as_str() {
                "Latency" => ("latency_seconds", "Request latency.", Seconds),
                "Timeouts" => (
                    "timeouts_total",
                    "Total number of timeouts encountered (since server start).",
                    Counter,
                ),
                "Unavailables" => (
                    "unavailable_exceptions_total",
                    "Total number of UnavailableExceptions thrown (since server start).",
                    Counter,
                ),
                "Failures" => (
                    "failures_total",
                    "Total number of failed requests (since server start).",
                    Counter,
                ),
                "ConditionNotMet" => (
                    "cas_write_precondition_not_met_total",
                    "Total number of transaction preconditions did not match current values (since server start).",
                    Counter,
                ),
                _ => return None,
            };
            mapped(f("client_request", suffix), help, labels, conv)
        }
        "Client" => {
            let (suffix, help, conv) = match n.name.as_str() {
                "connectedNativeClients" => (
                    "native_connections",
                    "Current number of CQL connections.",
                    Gauge,
                ),
                "AuthSuccess" => (
                    "authentication_successes_total",
                    "Total number of successful client authentication requests (since server start).",
                    Counter,
                ),
                "AuthFailure" => (
                    "authentication_failures_total",
                    "Total number of failed client authentication requests (since server start).",
                    Counter,
                ),
                _ => return None,
            };
            mapped(f("client", suffix), help, vec![], conv)
        }
        "CQL" => {
            let help = "Total number of CQL statements executed.";
            match n.name.as_str() {
                "PreparedStatementsCount" => mapped(
                    f("cql", "prepared_statements"),
                    "The current number of CQL and Thrift prepared statements in the statement cache.",
                    vec![],
                    Gauge,
                ),
                "PreparedStatementsEvicted" => mapped(
                    f("cql", "prepared_statements_evicted_total"),
                    "Total number of CQL and Thrift prepared statements evicted from the statement cache.",
                    vec![],
                    Counter,
                ),
                "PreparedStatementsExecuted" => mapped(
                    f("cql", "statements_executed_total"),
                    help,
                    vec![("statement_type", "prepared".into())],
                    Counter,
                ),
                "RegularStatementsExecuted" => mapped(
                    f("cql", "statements_executed_total"),
                    help,
                    vec![("statement_type", "regular".into())],
                    Counter,
                ),
                _ => None,
            }
        }
        "CommitLog" => {
            let (suffix, help, conv) = match n.name.as_str() {
                "CompletedTasks" => (
                    "completed_tasks_total",
                    "Total number of commit log messages written (since server start).",
                    Counter,
                ),
                "PendingTasks" => (
                    "pending_tasks",
                    "Number of commit log messages written not yet fsync'd.",
                    Gauge,
                ),
                "TotalCommitLogSize" => (
                    "size_bytes",
                    "Total size used by all current commit log segments.",
                    Gauge,
                ),
                "WaitingOnCommit" => (
                    "commit_latency_seconds",
                    "Time spent waiting on commit log fsync.",
                    Seconds,
                ),
                "WaitingOnSegmentAllocation" => (
                    "segment_allocation_latency_seconds",
                    "Time spent waiting for a commit log segment to be allocated.",
                    Seconds,
                ),
                _ => return None,
            };
            mapped(f("commit_log", suffix), help, vec![], conv)
        }
        "Compaction" => {
            let (suffix, help, conv) = match n.name.as_str() {
                "BytesCompacted" => (
                    "bytes_compacted_total",
                    "Total number of bytes compacted (since server start).",
                    Counter,
                ),
                "CompletedTasks" => (
                    "completed_tasks_total",
                    "Total number of completed compaction tasks (since server start).",
                    Counter,
                ),
                "TotalCompactionsCompleted" => (
                    "completed_total",
                    "Total number of compactions (since server start).",
                    Counter,
                ),
                _ => return None,
            };
            mapped(f("compaction", suffix), help, vec![], conv)
        }
        "DroppedMessage" => {
            let labels = vec![("message_type", scope)];
            match n.name.as_str() {
                "Dropped" => mapped(
                    "cassandra_dropped_messages_total".into(),
                    "Total number of dropped messages (since server start).",
                    labels,
                    Counter,
                ),
                "InternalDroppedLatency" => mapped(
                    f("dropped_messages", "internal_latency_seconds"),
                    "How long dropped messages waited before they were dropped (this node's own).",
                    labels,
                    Seconds,
                ),
                "CrossNodeDroppedLatency" => mapped(
                    f("dropped_messages", "cross_node_latency_seconds"),
                    "How long dropped messages waited before they were dropped (from other nodes).",
                    labels,
                    Seconds,
                ),
                _ => None,
            }
        }
        "Messaging" => {
            let dc = n.name.strip_suffix("-Latency")?;
            mapped(
                f("messaging", "cross_node_latency_seconds"),
                "Latency of messages from other nodes, by their data center.",
                vec![("datacenter", dc.to_string())],
                Seconds,
            )
        }
        "Connection" => {
            let labels = vec![("endpoint", scope)];
            match n.name.as_str() {
                "Timeouts" => mapped(
                    f("endpoint_connection", "timeouts_total"),
                    "Requests to the endpoint that timed out (since server start).",
                    labels,
                    Counter,
                ),
                "Latency" => mapped(
                    f("endpoint_connection", "latency_seconds"),
                    "Time from sending a request to the endpoint to its response.",
                    labels,
                    Seconds,
                ),
                _ => None,
            }
        }
        "Storage" => {
            let (suffix, help, conv) = match n.name.as_str() {
                "Exceptions" => (
                    "exceptions_total",
                    "Total number of internal storage exceptions (since server start).",
                    Counter,
                ),
                "Load" => (
                    "load_bytes",
                    "Size of the live data on this node's disks.",
                    Gauge,
                ),
                "TotalHints" => (
                    "hints_total",
                    "Total number of hints written (since server start).",
                    Counter,
                ),
                "TotalHintsInProgress" => (
                    "hints_in_progress",
                    "Number of hints being written now.",
                    Counter,
                ),
                _ => return None,
            };
            mapped(f("storage", suffix), help, vec![], conv)
        }
        "HintsService" => {
            let (suffix, help) = match n.name.as_str() {
                "HintsSucceeded" => (
                    "hints_succeeded_total",
                    "Hints delivered (since server start).",
                ),
                "HintsFailed" => (
                    "hints_failed_total",
                    "Hints whose delivery failed (since server start).",
                ),
                "HintsTimedOut" => (
                    "hints_timed_out_total",
                    "Hints that expired before delivery (since server start).",
                ),
                _ => return None,
            };
            mapped(f("hints_service", suffix), help, vec![], Counter)
        }
        "ReadRepair" => {
            let (suffix, help) = match n.name.as_str() {
                "RepairedBlocking" => (
                    "repaired_blocking_total",
                    "Read repairs done while the read waited (since server start).",
                ),
                "SpeculatedRead" => (
                    "speculated_reads_total",
                    "Reads sent to one more replica than needed (since server start).",
                ),
                _ => return None,
            };
            mapped(f("read_repair", suffix), help, vec![], Counter)
        }
        "ThreadPools" => {
            let labels = vec![
                ("group", n.path.clone().unwrap_or_default()),
                ("pool", scope),
            ];
            let (suffix, help, conv) = match n.name.as_str() {
                "ActiveTasks" => ("active_tasks", "Number of tasks being run now.", Gauge),
                "PendingTasks" => ("pending_tasks", "Number of tasks waiting to run.", Gauge),
                "CompletedTasks" => (
                    "completed_tasks_total",
                    "Total number of tasks run (since server start).",
                    Counter,
                ),
                "TotalBlockedTasks" => (
                    "blocked_tasks_total",
                    "Total number of tasks held back by a bound (since server start).",
                    Counter,
                ),
                "CurrentlyBlockedTasks" => (
                    "blocked_tasks",
                    "Number of tasks held back by a bound now.",
                    Gauge,
                ),
                _ => return None,
            };
            mapped(f("thread_pool", suffix), help, labels, conv)
        }
        "Table" => {
            let (keyspace, table) = (n.keyspace.clone()?, scope);
            let mut labels = vec![
                ("keyspace", keyspace),
                ("table", table),
                ("table_type", "table".to_string()),
            ];
            let op = |o: &str| ("operation", o.to_string());
            let (suffix, help, conv) = match n.name.as_str() {
                "ReadLatency" => {
                    labels.push(op("read"));
                    ("operation_latency_seconds", "Local operation latency.", Seconds)
                }
                "WriteLatency" => {
                    labels.push(op("write"));
                    ("operation_latency_seconds", "Local operation latency.", Seconds)
                }
                "RangeLatency" => {
                    labels.push(op("range_read"));
                    ("operation_latency_seconds", "Local operation latency.", Seconds)
                }
                "CoordinatorReadLatency" | "CoordinatorWriteLatency" | "CoordinatorScanLatency" => {
                    labels.push(op(match n.name.as_str() {
                        "CoordinatorReadLatency" => "read",
                        "CoordinatorWriteLatency" => "write",
                        _ => "scan",
                    }));
                    (
                        "coordinator_latency_seconds",
                        "Latency of the requests this node coordinated.",
                        Seconds,
                    )
                }
                "SSTablesPerReadHistogram" => (
                    "sstables_per_read",
                    "SSTables a read looked into.",
                    Plain,
                ),
                "EstimatedPartitionSizeHistogram" => (
                    "estimated_partition_size_bytes",
                    "Partition sizes in the SSTables.",
                    Plain,
                ),
                "EstimatedColumnCountHistogram" => (
                    "estimated_columns",
                    "Cells per partition in the SSTables.",
                    Plain,
                ),
                "TombstoneScannedHistogram" => (
                    "tombstones_scanned",
                    "Tombstones a read went past.",
                    Plain,
                ),
                "LiveScannedHistogram" => ("live_rows_scanned", "Live rows a read read.", Plain),
                "EstimatedPartitionCount" => (
                    "estimated_partitions",
                    "Partitions in the SSTables (an estimate: one partition in several SSTables counts several times).",
                    Gauge,
                ),
                "LiveSSTableCount" => ("live_sstables", "Live SSTables.", Gauge),
                "LiveDiskSpaceUsed" => (
                    "live_disk_space_bytes",
                    "Disk space of the live SSTables.",
                    Gauge,
                ),
                "TotalDiskSpaceUsed" => (
                    "disk_space_bytes",
                    "Disk space of the SSTables, obsolete ones not yet deleted included.",
                    Gauge,
                ),
                "MemtableLiveDataSize" => (
                    "memtable_live_bytes",
                    "Size of the live data in the memtable.",
                    Gauge,
                ),
                "MemtableColumnsCount" => ("memtable_columns", "Cells in the memtable.", Gauge),
                "MemtableOnHeapSize" => {
                    labels.push(("region", "on_heap".into()));
                    labels.push(("pool", "memtable".into()));
                    ("memory_used_bytes", "Memory used.", Gauge)
                }
                "MemtableSwitchCount" => (
                    "memtable_switches",
                    "Memtables switched out for flushing (since server start).",
                    Counter,
                ),
                "PendingFlushes" => ("pending_flushes", "Memtables waiting to be flushed.", Gauge),
                "BytesFlushed" => (
                    "flushed_bytes_total",
                    "Bytes written by flushes (since server start).",
                    Counter,
                ),
                "CompactionBytesWritten" => (
                    "compaction_bytes_written_total",
                    "Bytes written by compactions (since server start).",
                    Counter,
                ),
                "PendingCompactions" => (
                    "estimated_pending_compactions",
                    "Compactions the strategy would run now.",
                    Gauge,
                ),
                "MaxPartitionSize" => (
                    "partition_size_maximum_bytes",
                    "Size of the largest partition.",
                    Gauge,
                ),
                "MeanPartitionSize" => (
                    "partition_size_mean_bytes",
                    "Mean partition size.",
                    Gauge,
                ),
                "MinPartitionSize" => (
                    "partition_size_minimum_bytes",
                    "Size of the smallest partition.",
                    Gauge,
                ),
                "BloomFilterFalsePositives" => (
                    "bloom_filter_false_positives_total",
                    "Bloom filter false positives (since server start).",
                    Counter,
                ),
                "BloomFilterDiskSpaceUsed" => (
                    "bloom_filter_disk_space_used_bytes",
                    "Disk space of the bloom filters.",
                    Gauge,
                ),
                "SpeculativeRetries" => (
                    "speculative_retries_total",
                    "Reads sent to one more replica (since server start).",
                    Counter,
                ),
                "KeyCacheHitRate" => ("key_cache_hit_ratio", "Key cache hit ratio.", Gauge),
                "RowCacheHit" => ("row_cache_hits", "Row cache hits.", Gauge),
                "RowCacheMiss" => {
                    labels.push(("miss_type", "miss".into()));
                    ("row_cache_misses", "Row cache misses.", Gauge)
                }
                "PercentRepaired" => (
                    "repaired_ratio",
                    "Share of the SSTables' data marked repaired.",
                    PercentAsRatio,
                ),
                "SnapshotsSize" => (
                    "snapshots_size_bytes_total",
                    "Disk space of the table's snapshots.",
                    Gauge,
                ),
                _ => return None,
            };
            mapped(f("table", suffix), help, labels, conv)
        }
        // Sibyl's automatic repair (no exporter family: named after
        // Cassandra 5.1's AutoRepairMetrics in the exporter's style)
        "AutoRepair" => {
            let (suffix, help, conv) = match n.name.as_str() {
                "RepairsInProgress" => (
                    "repairs_in_progress",
                    "Whether an automatic repair is running.",
                    Gauge,
                ),
                "Paused" => (
                    "paused",
                    "Whether automatic repair waits for a node that is down.",
                    Gauge,
                ),
                "Enabled" => ("enabled", "Whether automatic repair is on.", Gauge),
                "LongestUnrepairedSec" => (
                    "longest_unrepaired_seconds",
                    "Seconds since the table repaired longest ago was repaired.",
                    Gauge,
                ),
                "SucceededTokenRangesCount" => (
                    "succeeded_token_ranges_total",
                    "Token ranges automatic repair repaired.",
                    Counter,
                ),
                "FailedRepairsCount" => (
                    "failed_repairs_total",
                    "Automatic repairs that failed.",
                    Counter,
                ),
                "SkippedRoundsCount" => (
                    "skipped_rounds_total",
                    "Rounds automatic repair skipped because a node was down.",
                    Counter,
                ),
                _ => return None,
            };
            mapped(f("autorepair", suffix), help, vec![], conv)
        }
        _ => None,
    }
}

/// A sample value as the text format writes it.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label_text(labels: &[(&str, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

enum Sample {
    Number(f64),
    /// A summary and the divisor to its unit (1e6: microseconds to seconds).
    Summary(Snapshot, f64),
}

struct Out {
    help: &'static str,
    kind: &'static str,
    samples: Vec<(Labels, Sample)>,
}

/// The text format of `c`, every sample with `global` labels first.
pub fn render(c: &Collection, global: &[(&'static str, String)]) -> String {
    let mut families: BTreeMap<String, Out> = BTreeMap::new();
    let with_global = |labels: Labels| -> Labels { global.iter().cloned().chain(labels).collect() };
    for (name, value) in &c.metrics {
        let Some(m) = map(name) else { continue };
        let (kind, sample) = match (m.conv, value) {
            (Conv::Counter, Value::Counter(v)) => ("counter", Sample::Number(*v as f64)),
            (Conv::Counter, Value::Gauge(v)) => ("counter", Sample::Number(*v)),
            (Conv::Gauge, Value::Gauge(v)) => ("gauge", Sample::Number(*v)),
            (Conv::Gauge, Value::Counter(v)) => ("gauge", Sample::Number(*v as f64)),
            (Conv::PercentAsRatio, Value::Gauge(v)) => ("gauge", Sample::Number(v / 100.0)),
            (Conv::Seconds, Value::Timer(s)) => ("summary", Sample::Summary(s.clone(), 1e6)),
            (Conv::Plain, Value::Histogram(s)) => ("summary", Sample::Summary(s.clone(), 1.0)),
            _ => continue,
        };
        families
            .entry(m.family)
            .or_insert_with(|| Out {
                help: m.help,
                kind,
                samples: Vec::new(),
            })
            .samples
            .push((with_global(m.labels), sample));
    }
    for fam in &c.families {
        let out = families.entry(fam.name.to_string()).or_insert_with(|| Out {
            help: fam.help,
            kind: if fam.counter { "counter" } else { "gauge" },
            samples: Vec::new(),
        });
        for (labels, v) in &fam.samples {
            out.samples
                .push((with_global(labels.clone()), Sample::Number(*v)));
        }
    }
    let mut s = String::new();
    for (name, out) in &families {
        let _ = writeln!(s, "# HELP {name} {}", out.help);
        let _ = writeln!(s, "# TYPE {name} {}", out.kind);
        for (labels, sample) in &out.samples {
            match sample {
                Sample::Number(v) => {
                    let _ = writeln!(s, "{name}{} {}", label_text(labels), number(*v));
                }
                Sample::Summary(snap, scale) => {
                    for (q, v) in QUANTILES.iter().zip(snap.quantiles) {
                        let mut l = labels.clone();
                        l.push(("quantile", q.to_string()));
                        let _ = writeln!(s, "{name}{} {}", label_text(&l), number(v / scale));
                    }
                    let l = label_text(labels);
                    let _ = writeln!(s, "{name}_count{l} {}", snap.count);
                    let _ = writeln!(s, "{name}_sum{l} {}", number(snap.sum / scale));
                }
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Family, Timer};

    #[test]
    fn cassandra_names_become_the_exporters_families() {
        let mut c = Collection::default();
        let t = Timer::default();
        t.record(2_000);
        c.timer(
            MetricName::new("ClientRequest", "Latency").scope("Read-LOCAL_QUORUM"),
            &t,
        );
        // totals over every level are left out, as the exporter does
        c.timer(
            MetricName::new("ClientRequest", "Latency").scope("Read"),
            &t,
        );
        c.counter(
            MetricName::new("ClientRequest", "Timeouts").scope("CASWrite"),
            3,
        );
        c.gauge(MetricName::table("ks", "t\"x", "LiveSSTableCount"), 4.0);
        c.gauge(MetricName::table("ks", "t", "PercentRepaired"), 50.0);
        c.families.push(Family {
            name: "cassandra_endpoint_active",
            help: "Endpoint activeness (0 = down, 1 = up).",
            counter: false,
            samples: vec![(vec![("endpoint", "127.0.0.2".into())], 1.0)],
        });
        let text = render(&c, &[("cassandra_node", "127.0.0.1".into())]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"# TYPE cassandra_client_request_latency_seconds summary"));
        assert!(lines.contains(&"cassandra_client_request_latency_seconds{cassandra_node=\"127.0.0.1\",operation=\"read\",consistency=\"LOCAL_QUORUM\",quantile=\"0.99\"} 0.002"), "{text}");
        assert!(lines.contains(&"cassandra_client_request_latency_seconds_count{cassandra_node=\"127.0.0.1\",operation=\"read\",consistency=\"LOCAL_QUORUM\"} 1"));
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("operation=\"read\""))
                .count(),
            8
        );
        assert!(lines.contains(&"cassandra_client_request_timeouts_total{cassandra_node=\"127.0.0.1\",operation=\"caswrite\"} 3"));
        assert!(lines.contains(&"cassandra_table_live_sstables{cassandra_node=\"127.0.0.1\",keyspace=\"ks\",table=\"t\\\"x\",table_type=\"table\"} 4"));
        assert!(lines.contains(&"cassandra_table_repaired_ratio{cassandra_node=\"127.0.0.1\",keyspace=\"ks\",table=\"t\",table_type=\"table\"} 0.5"));
        assert!(lines.contains(
            &"cassandra_endpoint_active{cassandra_node=\"127.0.0.1\",endpoint=\"127.0.0.2\"} 1"
        ));
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
    }
}
