//! Automatic repair (beyond Cassandra 5.0; Cassandra 5.1's CEP-37 did the
//! same inside the node): every node repairs the primary ranges of each
//! replicated table once per `auto_repair_interval`, the table repaired
//! longest ago first, one table and one range at a time, so that together
//! the nodes repair every range within the interval without an operator's
//! cron job. It pauses while any node of the ring is down (a repair would
//! fail, and hints are catching up), and says so.
//!
//! When each table was last repaired is kept in `auto_repair_state` beside
//! the data (a version line, then `table-id last-success-ms` lines), so a
//! restart does not start the round again.

use crate::proxy::StorageProxy;
use crate::repair::RepairOptions;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const STATE_FILE: &str = "auto_repair_state";
const STATE_VERSION: &str = "sibyl-auto-repair 1";

/// The scheduler's settings (`auto_repair_enabled`, `auto_repair_interval`,
/// `auto_repair_incremental`).
#[derive(Debug, Clone)]
pub struct AutoRepairConfig {
    pub enabled: bool,
    /// Each table's primary ranges are repaired at least this often.
    pub interval: Duration,
    pub incremental: bool,
    /// How often the scheduler looks for a table that is due.
    pub check_every: Duration,
    pub storage_port: u16,
}

/// One table as the scheduler sees it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TableStatus {
    pub keyspace: String,
    pub table: String,
    /// The last repair of this node's primary ranges that succeeded (ms).
    pub last_repaired_ms: Option<i64>,
    pub last_error: Option<String>,
}

/// The scheduler: its state, for `nodetool autorepairstatus` and metrics.
pub struct AutoRepair {
    pub config: AutoRepairConfig,
    enabled: AtomicBool,
    dir: PathBuf,
    last: Mutex<BTreeMap<uuid::Uuid, i64>>,
    errors: Mutex<BTreeMap<uuid::Uuid, String>>,
    /// The table being repaired now.
    pub running: Mutex<Option<(String, String)>>,
    /// Why the scheduler waits (a node down), if it does.
    pub paused: Mutex<Option<String>>,
    pub succeeded: AtomicU64,
    pub failed: AtomicU64,
    pub skipped: AtomicU64,
}

fn now_ms() -> i64 {
    sibyl_types::timeuuid::timestamp_micros_now() / 1000
}

impl AutoRepair {
    /// The scheduler of a node whose state file lives in `dir`.
    pub fn new(config: AutoRepairConfig, dir: PathBuf) -> Arc<AutoRepair> {
        let mut last = BTreeMap::new();
        if let Ok(text) = std::fs::read_to_string(dir.join(STATE_FILE)) {
            let mut lines = text.lines();
            if lines.next() == Some(STATE_VERSION) {
                for l in lines {
                    if let Some((id, ms)) = l.split_once(' ') {
                        if let (Ok(id), Ok(ms)) = (uuid::Uuid::parse_str(id), ms.parse()) {
                            last.insert(id, ms);
                        }
                    }
                }
            } else {
                tracing::warn!(
                    "{}: unknown format; every table counts as never auto-repaired",
                    dir.join(STATE_FILE).display()
                );
            }
        }
        Arc::new(AutoRepair {
            enabled: AtomicBool::new(config.enabled),
            config,
            dir,
            last: Mutex::new(last),
            errors: Mutex::new(BTreeMap::new()),
            running: Mutex::new(None),
            paused: Mutex::new(None),
            succeeded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        })
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    fn save(&self) {
        let mut text = format!("{STATE_VERSION}\n");
        for (id, ms) in self.last.lock().iter() {
            text.push_str(&format!("{id} {ms}\n"));
        }
        let tmp = self.dir.join(format!("{STATE_FILE}.tmp"));
        let written = std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, self.dir.join(STATE_FILE)));
        if let Err(e) = written {
            tracing::warn!("could not save the auto repair state: {e}");
        }
    }

    /// The replicated tables (keyspaces of more than one replica, not the
    /// node's own), each with when it was last repaired here.
    pub fn tables(&self, proxy: &StorageProxy) -> Vec<(uuid::Uuid, TableStatus)> {
        let schema = proxy.schema();
        let last = self.last.lock().clone();
        let errors = self.errors.lock().clone();
        let mut out = Vec::new();
        for ks in schema.keyspaces.values() {
            if ks.is_virtual
                || ks.replication.strategy == sibyl_schema::ReplicationStrategy::Local
                || ks.replication_factor() < 2
            {
                continue;
            }
            for t in ks.tables.values() {
                out.push((
                    t.id,
                    TableStatus {
                        keyspace: ks.name.clone(),
                        table: t.name.clone(),
                        last_repaired_ms: last.get(&t.id).copied(),
                        last_error: errors.get(&t.id).cloned(),
                    },
                ));
            }
        }
        out
    }

    /// The table due for repair, repaired longest ago (never first).
    fn due(&self, proxy: &StorageProxy) -> Option<(uuid::Uuid, TableStatus)> {
        let interval = self.config.interval.as_millis() as i64;
        let now = now_ms();
        self.tables(proxy)
            .into_iter()
            .filter(|(_, t)| t.last_repaired_ms.is_none_or(|at| now - at >= interval))
            .min_by_key(|(_, t)| t.last_repaired_ms.unwrap_or(i64::MIN))
    }

    /// Seconds since the table repaired longest ago (or the node started
    /// watching it) was repaired: what must stay under the interval.
    pub fn longest_unrepaired_secs(&self, proxy: &StorageProxy, started_ms: i64) -> f64 {
        let now = now_ms();
        self.tables(proxy)
            .iter()
            .map(|(_, t)| now - t.last_repaired_ms.unwrap_or(started_ms))
            .max()
            .unwrap_or(0) as f64
            / 1000.0
    }

    /// One step: repairs the table most due, unless a node is down.
    pub async fn step(&self, proxy: &StorageProxy) {
        if !self.enabled() {
            return;
        }
        let ring = sibyl_cluster::TokenMetadata::clone(&proxy.ring.load());
        let down: Vec<String> = ring
            .endpoints
            .iter()
            .filter(|e| !proxy.is_alive(e.address))
            .map(|e| format!("/{}", e.address))
            .collect();
        if !down.is_empty() {
            let why = format!("{} down", down.join(", "));
            if self.paused.lock().as_deref() != Some(why.as_str()) {
                tracing::info!("Auto repair paused: {why}");
            }
            *self.paused.lock() = Some(why);
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.paused.lock().take().is_some() {
            tracing::info!("Auto repair resumed: every node is up");
        }
        let Some((id, t)) = self.due(proxy) else {
            return;
        };
        *self.running.lock() = Some((t.keyspace.clone(), t.table.clone()));
        let options = RepairOptions {
            keyspace: t.keyspace.clone(),
            tables: vec![t.table.clone()],
            primary_range: true,
            sub_range: None,
            local_dc_only: false,
            command: 0,
            storage_port: self.config.storage_port,
            incremental: self.config.incremental,
            job_threads: 1,
        };
        let started = now_ms();
        tracing::info!("Auto repair of {}.{} starting", t.keyspace, t.table);
        let outcome = proxy
            .repair(&options, &|line| tracing::debug!("auto repair: {line}"))
            .await;
        *self.running.lock() = None;
        match outcome {
            Ok(s) => {
                tracing::info!(
                    "Auto repair of {}.{} finished: {} ranges, {} leaves out of sync, {} partitions streamed",
                    t.keyspace,
                    t.table,
                    s.ranges,
                    s.leaves_out_of_sync,
                    s.partitions_streamed
                );
                self.succeeded.fetch_add(s.ranges as u64, Ordering::Relaxed);
                self.last.lock().insert(id, started);
                self.errors.lock().remove(&id);
                self.save();
            }
            Err(e) => {
                tracing::warn!("Auto repair of {}.{} failed: {e}", t.keyspace, t.table);
                self.failed.fetch_add(1, Ordering::Relaxed);
                self.errors.lock().insert(id, e);
            }
        }
    }

    /// Runs the scheduler until the process ends.
    pub fn spawn(self: &Arc<Self>, proxy: Arc<StorageProxy>) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(me.config.check_every);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                me.step(&proxy).await;
            }
        });
    }
}
