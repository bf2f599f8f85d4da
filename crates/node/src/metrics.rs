//! The node's metrics registry: a collector for each part (coordinator,
//! storage, hints, CQL server, messaging, thread pools), the cluster as
//! this node's gossip sees it, and the process and machine (what the JVM's
//! beans give Cassandra's exporters: load, CPU, memory, file descriptors).
//! `GET /metrics` on the admin port renders it for Prometheus.

use crate::cluster::ClusterServices;
use sibyl_cql3::query::QueryProcessor;
use sibyl_metrics::{Collection, Family, Registry};
use sibyl_storage::StorageEngine;
use std::sync::Arc;

/// Registers every collector of a node.
pub fn register(
    registry: &Registry,
    qp: Arc<QueryProcessor>,
    storage: Arc<StorageEngine>,
    server: Arc<sibyl_transport::Server>,
    cluster: Arc<ClusterServices>,
) {
    {
        let qp = qp.clone();
        registry.register(move |c| {
            let schema = qp.schema();
            qp.proxy.metrics.collect(c, &|id| table_name(&schema, id));
            if let Some(h) = qp.proxy.hints() {
                h.collect(c);
            }
            c.gauge(
                sibyl_metrics::MetricName::new("CQL", "PreparedStatementsCount"),
                qp.prepared_count() as f64,
            );
            c.counter(
                sibyl_metrics::MetricName::new("CQL", "PreparedStatementsEvicted"),
                qp.prepared_evicted(),
            );
            crate::views::collect_batches(c, &qp);
        });
    }
    let dirs = storage.config.data_directories.clone();
    registry.register(move |c| filesystems(c, &dirs));
    {
        let qp = qp.clone();
        registry.register(move |c| {
            let schema = qp.schema();
            storage.collect_metrics(c, &|id| table_name(&schema, id));
        });
    }
    registry.register(move |c| server.metrics.collect(c));
    registry.register(Collection::stages);
    {
        let cluster = cluster.clone();
        registry.register(move |c| {
            cluster.messaging.collect(c);
            endpoints(c, &cluster, &qp);
        });
    }
    let cpu = parking_lot::Mutex::new(CpuSample::now());
    registry.register(move |c| process(c, &mut cpu.lock()));
}

/// The automatic repair scheduler's figures (Cassandra 5.1's
/// `AutoRepairMetrics` names).
pub fn register_auto_repair(
    registry: &Registry,
    a: Arc<sibyl_service::auto_repair::AutoRepair>,
    proxy: Arc<sibyl_service::proxy::StorageProxy>,
) {
    use std::sync::atomic::Ordering;
    let started = sibyl_types::timeuuid::timestamp_micros_now() / 1000;
    registry.register(move |c| {
        let n = |name: &str| sibyl_metrics::MetricName::new("AutoRepair", name);
        c.gauge(
            n("RepairsInProgress"),
            f64::from(u8::from(a.running.lock().is_some())),
        );
        c.gauge(n("Paused"), f64::from(u8::from(a.paused.lock().is_some())));
        c.gauge(n("Enabled"), f64::from(u8::from(a.enabled())));
        c.gauge(
            n("LongestUnrepairedSec"),
            a.longest_unrepaired_secs(&proxy, started),
        );
        c.counter(
            n("SucceededTokenRangesCount"),
            a.succeeded.load(Ordering::Relaxed),
        );
        c.counter(n("FailedRepairsCount"), a.failed.load(Ordering::Relaxed));
        c.counter(n("SkippedRoundsCount"), a.skipped.load(Ordering::Relaxed));
    });
}

pub(crate) fn table_name(
    schema: &sibyl_schema::schema::Schema,
    id: uuid::Uuid,
) -> Option<(String, String)> {
    schema
        .table_by_id(id)
        .map(|t| (t.keyspace.clone(), t.name.clone()))
}

fn family(
    name: &'static str,
    help: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
) -> Family {
    Family {
        name,
        help,
        counter: false,
        samples,
    }
}

/// Every node as this one sees it (the exporter's failure detector, gossiper
/// and storage service families), and Sibyl's additions an operator needs
/// for node state: each node's operation mode, release and schema version.
fn endpoints(c: &mut Collection, cluster: &ClusterServices, qp: &QueryProcessor) {
    let schema = qp.schema();
    let local = cluster.messaging.config().broadcast_address;
    let directory = cluster.state.directory.read().clone();
    let all = directory.ring_of_all();
    let ring = sibyl_cluster::TokenMetadata::clone(&qp.proxy.ring.load());
    let total_tokens = ring.tokens().count().max(1) as f64;
    let now = cluster.gossip.now();
    let g = cluster.gossip.gossiper.lock();
    let phi: std::collections::HashMap<_, _> =
        g.failure_detector().phi_values().into_iter().collect();
    let (mut active, mut generation, mut downtime, mut phis, mut owns, mut info) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for e in &all.endpoints {
        let labels = vec![
            ("endpoint", e.address.to_string()),
            ("endpoint_datacenter", e.datacenter.clone()),
            ("endpoint_rack", e.rack.clone()),
        ];
        let me = e.address == local;
        let alive = me || g.is_alive(e.address);
        active.push((labels.clone(), if alive { 1.0 } else { 0.0 }));
        let generation_of = if me {
            Some(g.generation())
        } else {
            g.endpoint_state(e.address).map(|s| s.heartbeat.generation)
        };
        if let Some(gen) = generation_of {
            generation.push((labels.clone(), gen as f64));
        }
        if !me {
            downtime.push((
                labels.clone(),
                g.endpoint_downtime_nanos(e.address, now) as f64 / 1e9,
            ));
        }
        if let Some(p) = phi.get(&e.address) {
            phis.push((labels.clone(), *p));
        }
        let tokens = ring
            .endpoint_of(e.address)
            .map(|i| ring.tokens_of(i).len())
            .unwrap_or(0);
        owns.push((labels.clone(), tokens as f64 / total_tokens));
        let record = directory.nodes.get(&e.host_id);
        let schema_version = if me {
            schema.version.to_string()
        } else {
            g.application_state(
                e.address,
                sibyl_cluster::endpoint_state::ApplicationState::Schema,
            )
            .unwrap_or_default()
            .to_string()
        };
        let mut l = labels;
        l.push(("host_id", e.host_id.to_string()));
        l.push((
            "state",
            record
                .map(|r| r.state.name())
                .unwrap_or_default()
                .to_string(),
        ));
        l.push((
            "release_version",
            record
                .map(|r| r.release_version.clone())
                .unwrap_or_default(),
        ));
        l.push(("schema_version", schema_version));
        info.push((l, 1.0));
    }
    drop(g);
    c.families.push(family(
        "cassandra_endpoint_active",
        "Endpoint activeness (0 = down, 1 = up).",
        active,
    ));
    c.families.push(family(
        "cassandra_endpoint_generation",
        "Current endpoint generation number.",
        generation,
    ));
    c.families.push(Family {
        counter: true,
        ..family(
            "cassandra_endpoint_downtime_seconds_total",
            "Endpoint downtime (since server start).",
            downtime,
        )
    });
    c.families.push(family(
        "cassandra_endpoint_phi",
        "level of suspicion that an endpoint might be down.",
        phis,
    ));
    c.families.push(family(
        "cassandra_token_ownership_ratio",
        "Share of the ring's tokens each endpoint holds.",
        owns,
    ));
    c.families.push(family(
        "cassandra_endpoint_info",
        "Each node of the cluster with its state (JOINING, NORMAL, LEAVING), release version and schema version as this node knows them; count(count by (schema_version) (cassandra_endpoint_info)) > 1 is a schema disagreement.",
        info,
    ));
}

/// The file systems of the data directories (the exporter's
/// `cassandra_storage_filesystem_*`; `spec` names the data directory).
fn filesystems(c: &mut Collection, dirs: &[std::path::PathBuf]) {
    let (mut total, mut usable, mut free) = (vec![], vec![], vec![]);
    for d in dirs {
        let Ok(v) = rustix::fs::statvfs(d) else {
            continue;
        };
        let labels = vec![("spec", d.display().to_string())];
        total.push((labels.clone(), (v.f_blocks * v.f_frsize) as f64));
        usable.push((labels.clone(), (v.f_bavail * v.f_frsize) as f64));
        free.push((labels, (v.f_bfree * v.f_frsize) as f64));
    }
    c.families.push(family(
        "cassandra_storage_filesystem_bytes_total",
        "Size of the file system of a data directory.",
        total,
    ));
    c.families.push(family(
        "cassandra_storage_filesystem_usable_bytes",
        "Space of a data directory's file system that Sibyl may use.",
        usable,
    ));
    c.families.push(family(
        "cassandra_storage_filesystem_unallocated_bytes",
        "Unallocated space of a data directory's file system.",
        free,
    ));
}

/// CPU time of the process and of the machine at one moment, for the
/// "recent" CPU load ratios (the share since the last scrape).
struct CpuSample {
    at: std::time::Instant,
    process_ticks: u64,
    machine_busy: u64,
    machine_total: u64,
}

fn clock_ticks() -> f64 {
    100.0 // USER_HZ on Linux
}

impl CpuSample {
    fn now() -> CpuSample {
        let process_ticks = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| {
                // fields after the command's closing parenthesis: utime is 14th, stime 15th
                let rest = s.rsplit_once(')')?.1.to_string();
                let f: Vec<&str> = rest.split_whitespace().collect();
                Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
            })
            .unwrap_or(0);
        let (machine_busy, machine_total) = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| {
                let line = s.lines().next()?.to_string();
                let v: Vec<u64> = line
                    .split_whitespace()
                    .skip(1)
                    .filter_map(|x| x.parse().ok())
                    .collect();
                let total: u64 = v.iter().sum();
                let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
                Some((total - idle, total))
            })
            .unwrap_or((0, 0));
        CpuSample {
            at: std::time::Instant::now(),
            process_ticks,
            machine_busy,
            machine_total,
        }
    }
}

/// A `Key:   N kB` line of a /proc file, in bytes.
fn kib(text: &str, key: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// The process and the machine (Tables 4.1 and 4.2 of what operators
/// watch): the exporter's `cassandra_os_*` and `cassandra_process_*`
/// families, and the process's memory where Cassandra shows the JVM's heap.
fn process(c: &mut Collection, last: &mut CpuSample) {
    let now = CpuSample::now();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1) as f64;
    let seconds = now.at.duration_since(last.at).as_secs_f64();
    let one = |name, help, v: f64| family(name, help, vec![(vec![], v)]);
    if seconds > 0.0 {
        let used = now.process_ticks.saturating_sub(last.process_ticks) as f64 / clock_ticks();
        c.families.push(one(
            "cassandra_process_recent_cpu_load_ratio",
            "CPU usage of the Sibyl process since the last scrape (1 = every core).",
            (used / seconds / cpus).min(1.0),
        ));
    }
    let total = now.machine_total.saturating_sub(last.machine_total);
    if total > 0 {
        let busy = now.machine_busy.saturating_sub(last.machine_busy);
        c.families.push(one(
            "cassandra_os_recent_cpu_load_ratio",
            "CPU usage of the machine since the last scrape.",
            busy as f64 / total as f64,
        ));
    }
    c.families.push(Family {
        counter: true,
        ..one(
            "cassandra_process_cpu_seconds_total",
            "Cumulative CPU time used by the Sibyl process.",
            now.process_ticks as f64 / clock_ticks(),
        )
    });
    *last = now;
    if let Some(load) = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
    {
        c.families.push(one(
            "cassandra_os_1m_load_average",
            "1 minute system load average.",
            load,
        ));
    }
    let fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0);
    c.families.push(one(
        "cassandra_process_open_file_descriptors",
        "Current number of open file descriptors in the Sibyl process.",
        fds as f64,
    ));
    if let Some(max) = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            let l = s
                .lines()
                .find(|l| l.starts_with("Max open files"))?
                .to_string();
            l.split_whitespace().nth(3)?.parse::<f64>().ok()
        })
    {
        c.families.push(one(
            "cassandra_process_maximum_file_descriptors",
            "Maximum number of file descriptors that can be opened by the Sibyl process.",
            max,
        ));
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    for (name, help, v) in [
        (
            "cassandra_process_resident_memory_bytes",
            "Memory of the Sibyl process in RAM (where Cassandra shows the JVM heap).",
            kib(&status, "VmRSS:"),
        ),
        (
            "cassandra_process_virtual_memory_bytes",
            "Virtual memory of the Sibyl process.",
            kib(&status, "VmSize:"),
        ),
        (
            "cassandra_os_memory_bytes_total",
            "Total physical memory of the machine.",
            kib(&meminfo, "MemTotal:"),
        ),
        (
            "cassandra_os_free_memory_bytes",
            "Free physical memory of the machine.",
            kib(&meminfo, "MemFree:"),
        ),
        (
            "cassandra_os_swap_bytes_total",
            "Total swap space of the machine.",
            kib(&meminfo, "SwapTotal:"),
        ),
        (
            "cassandra_os_free_swap_bytes",
            "Free swap space of the machine.",
            kib(&meminfo, "SwapFree:"),
        ),
    ] {
        if let Some(v) = v {
            c.families.push(one(name, help, v));
        }
    }
}
