//! A Sibyl node: configuration, schema, the query processor, the coordinator
//! (StorageProxy) and the CQL server, wired together by [`start`].

pub mod admin;
pub mod cassandra_keys;
pub mod cluster;
pub mod config;
pub mod metrics;
pub mod native;
pub mod pauses;
pub mod views;

/// The internode messaging versions this build speaks (`-Dsibyl.messaging_version`).
pub use sibyl_cluster::net::codec::{MESSAGING_VERSION_CURRENT, MESSAGING_VERSION_MIN};

/// The running log levels (`nodetool getlogginglevels`, `setlogginglevel`),
/// set by whoever set up logging (the `sibyl` binary).
pub trait LogLevels: Send + Sync {
    /// Each logger with a level, ROOT first.
    fn levels(&self) -> Vec<(String, String)>;
    /// Sets `logger`'s level; with no logger, back to the initial levels.
    fn set(&self, logger: Option<&str>, level: Option<&str>) -> Result<(), String>;
}

/// Installed once at start.
pub static LOG_LEVELS: std::sync::OnceLock<Box<dyn LogLevels>> = std::sync::OnceLock::new();
mod peers;

use crate::config::{CommitLogSync, Config};
use bytes::Bytes;
use sibyl_cluster::{Clock, SystemClock};
use sibyl_cql3::query::QueryProcessor;
use sibyl_db::cells;
use sibyl_db::cells::WriteParams;
use sibyl_schema::schema::*;
use sibyl_schema::schema_tables;
use sibyl_schema::schema_tables::{boolean, inet, int, row_mutation, text};
use sibyl_service::proxy::{StorageProxy, Timeouts};
use sibyl_service::replica::{Replica, SharedSchema};
use sibyl_service::stores::{open_store, open_system_keyspaces, LocalSchema};
use sibyl_storage::commitlog::SyncMode;
use sibyl_storage::store::StorageConfig;
use sibyl_storage::{StorageEngine, StorageError};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

/// The version we report as `release_version`: drivers choose their schema
/// queries from it, so it names the Cassandra release whose behaviour we follow.
pub const RELEASE_VERSION: &str = "5.0.4";
pub const CQL_VERSION: &str = "3.4.7";
pub const DATA_CENTER: &str = sibyl_cluster::snitch::DEFAULT_DATACENTER;
pub const RACK: &str = sibyl_cluster::snitch::DEFAULT_RACK;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot load the schema: {0}")]
    Schema(String),
    #[error("invalid address {0}")]
    Address(String),
    #[error(transparent)]
    Cluster(#[from] cluster::ClusterError),
    #[error("cannot use hints_directory {dir}: {source}")]
    Hints { dir: String, source: std::io::Error },
    /// The node's identity (host id, tokens) cannot be read from a data
    /// directory that holds data: a new one would make it another node.
    #[error("{0}")]
    Identity(String),
    /// The data directory's layout cannot be brought to this build's.
    #[error("{0}")]
    Layout(String),
}

/// A running node.
pub struct Node {
    pub config: Config,
    pub storage: Arc<StorageEngine>,
    pub qp: Arc<QueryProcessor>,
    pub host_id: uuid::Uuid,
    pub tokens: Vec<i64>,
    pub native_addr: std::net::SocketAddr,
    shutdown_tx: tokio::sync::watch::Sender<bool>,
    pub native: Arc<native::NativeTransport>,
    /// Becomes true when `nodetool drain` has flushed everything.
    pub drained: tokio::sync::watch::Receiver<bool>,
    pub cluster: Arc<cluster::ClusterServices>,
}

fn sync_mode(c: &Config) -> SyncMode {
    match c.commitlog_sync {
        CommitLogSync::Periodic => SyncMode::Periodic(c.commitlog_sync_period),
        CommitLogSync::Batch => SyncMode::Batch,
        CommitLogSync::Group => SyncMode::Group(c.commitlog_sync_group_window),
    }
}

fn system_table(schema: &Schema, ks: &str, t: &str) -> Arc<TableMetadata> {
    schema.table(ks, t).cloned().unwrap_or_else(|| {
        Arc::new(TableMetadata::new(
            ks,
            t,
            system_table_id(ks, t),
            Vec::new(),
            TableParams::default(),
        ))
    })
}

/// Gives the directories of system tables written by builds before
/// 2026-11-24 (whose ids came from Rust's `DefaultHasher`) their current
/// names (Cassandra's ids). A table with both is refused: which one holds
/// the data is not for start-up to guess.
fn migrate_system_table_directories(data: &std::path::Path) -> Result<(), StartError> {
    for (ks, table, old, new) in sibyl_schema::schema::legacy_system_table_ids() {
        let from = table_directory(data, &ks, &table, old);
        let to = table_directory(data, &ks, &table, new);
        if !from.exists() {
            continue;
        }
        if to.exists() {
            return Err(StartError::Layout(format!(
                "both {} and {} exist: the first is {ks}.{table} as an earlier Sibyl named it, \
                 the second as this one does; move the one that does not hold the data away",
                from.display(),
                to.display()
            )));
        }
        std::fs::rename(&from, &to).map_err(|e| {
            StartError::Layout(format!(
                "cannot rename {} to {}: {e}",
                from.display(),
                to.display()
            ))
        })?;
        tracing::info!(
            "{ks}.{table}: directory renamed to Cassandra's table id ({} -> {})",
            from.display(),
            to.display()
        );
    }
    Ok(())
}

/// Starts a node: replays the commit log, loads the schema, serves CQL.
pub async fn start(config: Config) -> Result<Node, StartError> {
    let started = Instant::now();
    // before any request is timed
    sibyl_metrics::calibrate();
    if !config.not_acted_on.is_empty() {
        tracing::warn!(
            "cassandra.yaml: Sibyl takes these settings as Cassandra does but does not act on them: {}",
            config.not_acted_on.join(", ")
        );
    }
    let storage = StorageEngine::new(StorageConfig {
        data_directories: config.data_file_directories.clone(),
        commitlog_directory: config.commitlog_directory.clone(),
        sync: sync_mode(&config),
        segment_size_bytes: config.commitlog_segment_size_bytes,
        memtable_space_bytes: config.memtable_heap_space_bytes.max(1 << 20) as usize,
        // memtable_cleanup_threshold: 1 / (1 + memtable_flush_writers), 2 writers
        memtable_flush_threshold_bytes: (config.memtable_heap_space_bytes / 3).max(1 << 20)
            as usize,
        commitlog_total_space_bytes: config.commitlog_total_space_bytes,
        chunk_cache_bytes: config.file_cache_size_bytes as usize,
        key_cache_bytes: config.key_cache_size_bytes,
        row_cache_bytes: config.row_cache_size_bytes,
        disk_failure_policy: config.disk_failure_policy,
        commit_failure_policy: config.commit_failure_policy,
        auto_snapshot: config.auto_snapshot,
        ignore_replay_errors: config.commitlog_ignore_replay_errors,
        compaction_backlog_limit: config.compaction_backlog_limit,
        concurrent_compactors: config.concurrent_compactors,
        compaction_throughput_bytes: config.compaction_throughput_bytes,
    })?;
    // 0. what earlier builds named otherwise: system table ids
    sibyl_db::table_ids::set_aliases(
        sibyl_schema::schema::legacy_system_table_ids()
            .into_iter()
            .map(|(_, _, old, new)| (old, new))
            .collect(),
    );
    migrate_system_table_directories(storage.data_directory())?;
    // 1. system tables, and their part of the commit log
    let mut schema = open_system_keyspaces(&storage)?;
    let system_ids: std::collections::HashSet<uuid::Uuid> = schema
        .keyspaces
        .values()
        .flat_map(|ks| ks.tables.values().map(|t| t.id))
        .collect();
    let (stats, mut dirty) = storage.replay_commitlog(&|id| system_ids.contains(&id))?;
    // 2. user schema from system_schema, then user data
    let now = sibyl_storage::now_in_seconds();
    // the replicated system keyspaces' replication, as an operator altered it
    schema_tables::apply_system_keyspace_params(&mut schema, &LocalSchema(&storage), now)
        .map_err(|e| StartError::Schema(e.to_string()))?;
    let keyspaces = schema_tables::read_user_keyspaces(&LocalSchema(&storage), now)
        .map_err(|e| StartError::Schema(e.to_string()))?;
    for ks in keyspaces {
        for t in ks.tables.values() {
            open_store(&storage, t)?;
        }
        schema.keyspaces.insert(ks.name.clone(), Arc::new(ks));
    }
    let (user_stats, user_dirty) = storage.replay_commitlog(&|id| !system_ids.contains(&id))?;
    dirty.extend(user_dirty);
    tracing::info!(
        "replayed {} commit log entries from {} segments{}",
        user_stats.entries,
        stats.segments,
        if user_stats.torn_tail {
            " (ignored a torn write at the end of a segment)"
        } else {
            ""
        }
    );
    storage.start_commitlog(&dirty)?;
    schema.compute_version();

    // 3. local node identity: the host id survives restarts; the tokens are
    // the cluster metadata log's (the stored ones are reused when a node
    // registers again)
    let local_t = system_table(&schema, "system", "local");
    let mut config = config;
    let (host_id, stored_tokens) = match read_local_identity(
        &storage,
        &local_t,
        now,
        &config.cluster_name,
        config.override_decommission,
    )? {
        Some(LocalIdentity {
            host_id,
            tokens,
            bootstrapped,
        }) => {
            if bootstrapped.as_deref() == Some("DECOMMISSIONED") {
                // it left the cluster metadata log too: it joins it afresh
                let _ = std::fs::remove_dir_all(&config.metadata_directory);
            }
            let bootstrapped = bootstrapped.as_deref() == Some("COMPLETED");
            // a node that has bootstrapped replaces nobody (Cassandra's
            // StorageService: its words)
            if config.replace_address.is_some() && bootstrapped {
                if !config.replace_address_first_boot {
                    return Err(StartError::Identity(
                        "Cannot replace address with a node that is already bootstrapped".into(),
                    ));
                }
                tracing::info!(
                    "Replace address on the first boot requested; this node is already bootstrapped"
                );
                config.replace_address = None;
            }
            (host_id, tokens)
        }
        None => {
            // a new identity only for a truly new node: nothing on disk
            let sstables: usize = storage.tables().iter().map(|t| t.sstables().len()).sum();
            let entries = stats.entries + user_stats.entries;
            if sstables > 0 || entries > 0 || schema.keyspaces.values().any(|k| !k.is_system) {
                return Err(StartError::Identity(format!(
                    "system.local has no row for this node, but the data directories hold data \
                     ({sstables} SSTables, {entries} commit log entries): refusing to start under a \
                     new host id and tokens. Restore system.local (under {}), or start on an empty \
                     data directory to join as a new node",
                    storage
                        .table(local_t.id)
                        .map(|c| c.dir.display().to_string())
                        .unwrap_or_default()
                )));
            }
            // kept at once, as Cassandra's getOrInitializeLocalHostId: a
            // node stopped before it joined starts again as itself
            let host_id = uuid::Uuid::new_v4();
            persist_host_id(&storage, &local_t, host_id, &config.cluster_name).await?;
            (host_id, None)
        }
    };
    // an address, or a name to resolve (cassandra.yaml's `localhost`), IPv4 first
    let addr_of = |s: &str| -> Result<IpAddr, StartError> {
        if let Ok(a) = s.parse() {
            return Ok(a);
        }
        use std::net::ToSocketAddrs;
        let all: Vec<IpAddr> = (s, 0)
            .to_socket_addrs()
            .map_err(|_| StartError::Address(s.to_string()))?
            .map(|a| a.ip())
            .collect();
        all.iter()
            .find(|a| a.is_ipv4())
            .or(all.first())
            .copied()
            .ok_or_else(|| StartError::Address(s.to_string()))
    };
    let listen = addr_of(&config.listen_address)?;
    let rpc = addr_of(&config.rpc_address)?;
    let broadcast = addr_of(&config.broadcast_address)?;
    let broadcast_rpc = addr_of(&config.broadcast_rpc_address)?;

    let shared_schema: SharedSchema = sibyl_service::replica::shared_schema(schema.clone());
    let messaging =
        cluster::bind_messaging(&config, listen, broadcast, shared_schema.clone()).await?;
    pauses::spawn_monitor();
    let tracer = Arc::new(sibyl_tracing::Tracer::new(broadcast, config.storage_port));
    messaging.set_tracer(tracer.clone());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let replica = Arc::new(Replica::new(
        storage.clone(),
        shared_schema.clone(),
        clock.clone(),
        // held-back writes are refused (Overloaded, with the reason) before
        // the coordinator gives up on them (a WriteTimeout says nothing)
        config.write_request_timeout * 4 / 5,
    ));
    let (dc, _) = cluster::location(&config);
    let proxy = Arc::new(StorageProxy::new(
        replica.clone(),
        messaging.clone(),
        clock,
        shared_schema,
        dc.clone(),
        Timeouts {
            read: config.read_request_timeout,
            range: config.range_request_timeout,
            write: config.write_request_timeout,
            counter_write: config.counter_write_request_timeout,
            cas_contention: config.cas_contention_timeout,
            truncate: config.truncate_request_timeout,
        },
    ));
    let hints = Arc::new(
        sibyl_service::hints::HintsService::new(sibyl_service::hints::HintsConfig {
            directory: config.hints_directory.clone(),
            enabled: config.hinted_handoff_enabled,
            disabled_datacenters: config.hinted_handoff_disabled_datacenters.clone(),
            max_hint_window: config.max_hint_window,
            throttle_bytes_per_second: config.hinted_handoff_throttle_bytes,
            delivery_threads: config.max_hints_delivery_threads as usize,
            log_port: config.storage_port,
        })
        .map_err(|source| StartError::Hints {
            dir: config.hints_directory.display().to_string(),
            source,
        })?,
    );
    proxy.set_hints(hints);
    tracer.set_sink(sibyl_service::trace_keyspace::TraceWriter::start(
        Arc::downgrade(&proxy),
        sibyl_tracing::TraceTtls {
            query_seconds: config.trace_type_query_ttl.as_secs().min(i32::MAX as u64) as i32,
            repair_seconds: config.trace_type_repair_ttl.as_secs().min(i32::MAX as u64) as i32,
        },
    ));
    proxy
        .streams()
        .outbound
        .set_rate(config.stream_throughput_outbound_bytes);
    proxy
        .repair_sessions
        .set_timeout(config.repair_fail_timeout);
    proxy
        .streams()
        .inter_dc
        .set_rate(config.inter_dc_stream_throughput_outbound_bytes);
    let mut qp = QueryProcessor::new(
        proxy.clone(),
        config.batch_size_warn_threshold_bytes,
        config.batch_size_fail_threshold_bytes,
    );
    qp.unlogged_batch_across_partitions_warn_threshold =
        config.unlogged_batch_across_partitions_warn_threshold as usize;
    replica.tombstone_warn_threshold.store(
        u64::from(config.tombstone_warn_threshold),
        std::sync::atomic::Ordering::Relaxed,
    );
    qp.cluster_name = config.cluster_name.clone();
    let qp = Arc::new(qp);
    write_system_schema_rows(&storage, &schema).await?;
    let native_advertised = std::net::SocketAddr::new(broadcast_rpc, config.native_transport_port);
    let (events, _) = tokio::sync::broadcast::channel(1024);
    let cluster = cluster::join(
        &config,
        messaging,
        replica,
        proxy.clone(),
        events.clone(),
        host_id,
        stored_tokens,
        native_advertised,
    )
    .await?;
    let cluster = Arc::new(cluster);
    {
        // gossip's LOAD: the bytes of live SSTables, now and every minute
        // (Cassandra's LoadBroadcaster), for the others' `nodetool status`
        let storage = storage.clone();
        let gossip = cluster.gossip.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
            loop {
                every.tick().await;
                let load: u64 = storage.tables().iter().map(|t| t.live_disk_bytes()).sum();
                gossip.set_states(vec![(
                    sibyl_cluster::endpoint_state::ApplicationState::Load,
                    format!("{load}.0"),
                )]);
            }
        });
    }
    {
        // hints to hosts that are up, and batches their coordinators did
        // not finish, every ten seconds (Cassandra's hints dispatch and
        // batchlog replay intervals)
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(10));
            loop {
                every.tick().await;
                proxy.deliver_hints().await;
                proxy.replay_batchlog().await;
                proxy.fail_timed_out_repair_sessions();
            }
        });
    }
    let tokens = cluster.tokens.clone();
    let local = LocalInfo {
        host_id,
        tokens: tokens.clone(),
        listen: broadcast,
        rpc: broadcast_rpc,
        datacenter: cluster.datacenter.clone(),
        rack: cluster.rack.clone(),
        config: config.clone(),
    };
    write_local_row(&storage, &local_t, &local, proxy.schema().version).await?;
    let peer_tables = peers::Peers {
        storage: storage.clone(),
        peers: system_table(&schema, "system", "peers"),
        peers_v2: system_table(&schema, "system", "peers_v2"),
    };
    let directory = cluster.state.directory.read().clone();
    peers::write_all(&peer_tables, &directory, host_id, &cluster.gossip).await?;
    {
        // every schema change, from any node: system.local's schema version,
        // gossip's SCHEMA state, and no prepared statement of the old schema
        let storage2 = storage.clone();
        let local_t2 = local_t.clone();
        let local2 = local.clone();
        let gossip = cluster.gossip.clone();
        let qp2 = Arc::downgrade(&qp);
        *cluster.state.on_schema.write() = Some(Box::new(move |s: &Schema| {
            let storage3 = storage2.clone();
            let t = local_t2.clone();
            let l = local2.clone();
            let v = s.version;
            if let Some(qp) = qp2.upgrade() {
                qp.clear_prepared();
            }
            gossip.set_states(vec![(
                sibyl_cluster::endpoint_state::ApplicationState::Schema,
                v.to_string(),
            )]);
            gossip.push_local_state();
            tokio::spawn(async move {
                let _ = write_local_row(&storage3, &t, &l, v).await;
            });
        }));
        let tables = peer_tables.clone();
        let gossip = cluster.gossip.clone();
        *cluster.state.on_topology.write() = Some(Box::new(move |d: &cluster::Directory| {
            let tables = tables.clone();
            let d = d.clone();
            let gossip = gossip.clone();
            tokio::spawn(async move {
                let _ = peers::write_all(&tables, &d, host_id, &gossip).await;
            });
        }));
        let tables = peer_tables.clone();
        let state = cluster.state.clone();
        cluster
            .gossip
            .set_on_change(Box::new(move |endpoint, gossip| {
                let rec = state.directory.read().by_address(endpoint).cloned();
                if let Some(rec) = rec {
                    let tables = tables.clone();
                    let schema_version = gossip.schema_version_of(endpoint);
                    tokio::spawn(async move {
                        let _ = peers::write_peer(&tables, &rec, schema_version).await;
                    });
                }
            }));
    }

    // 4. CQL server
    let addr = std::net::SocketAddr::new(rpc, config.native_transport_port);
    let (shutdown_tx, _) = tokio::sync::watch::channel(false);
    let server = Arc::new(sibyl_transport::Server::new(
        qp.clone(),
        events,
        config.native_transport_max_frame_size_bytes,
        RELEASE_VERSION.to_string(),
        tracer.clone(),
        sibyl_transport::Limits {
            request_bytes: config.native_transport_max_request_data_in_flight,
            request_bytes_per_ip: config.native_transport_max_request_data_in_flight_per_ip,
            ..Default::default()
        },
    ));
    let registry = Arc::new(sibyl_metrics::Registry::default());
    metrics::register(
        &registry,
        qp.clone(),
        storage.clone(),
        server.clone(),
        cluster.clone(),
    );
    // automatic repair: its state beside the data, its figures in metrics
    let auto_repair = sibyl_service::auto_repair::AutoRepair::new(
        sibyl_service::auto_repair::AutoRepairConfig {
            enabled: config.auto_repair_enabled,
            interval: config.auto_repair_interval,
            incremental: config.auto_repair_incremental,
            check_every: (config.auto_repair_interval / 10).clamp(
                std::time::Duration::from_secs(1),
                std::time::Duration::from_secs(60),
            ),
            storage_port: config.storage_port,
        },
        storage.data_directory().to_path_buf(),
    );
    auto_repair.spawn(qp.proxy.clone());
    metrics::register_auto_repair(&registry, auto_repair.clone(), qp.proxy.clone());
    *qp.virtual_tables.write() = Some(Arc::new(views::SystemViews {
        qp: Arc::downgrade(&qp),
        server: Arc::downgrade(&server),
        storage: storage.clone(),
        cluster: cluster.clone(),
        config: config.clone(),
    }));
    let native = Arc::new(native::NativeTransport::new(server, addr));
    // the transport stops at shutdown, or when a failure policy says so
    {
        let mut failed = storage.stopped.clone();
        let native = native.clone();
        tokio::spawn(async move {
            if failed.wait_for(|v| *v).await.is_ok() {
                tracing::error!("stopping the native transport: a failure policy says stop");
                native.stop().await;
            }
        });
    }
    if config.start_native_transport {
        native.start().await.map_err(|e| StartError::Listen {
            addr: addr.to_string(),
            source: e,
        })?;
    }
    let native_addr = native.address();
    let (drained_tx, drained) = tokio::sync::watch::channel(false);
    let admin_addr = format!("{}:{}", config.admin_address, config.admin_port);
    let admin_listener = tokio::net::TcpListener::bind(&admin_addr)
        .await
        .map_err(|e| StartError::Listen {
            addr: admin_addr.clone(),
            source: e,
        })?;
    let admin = Arc::new(admin::Admin {
        native: native.clone(),
        metrics: registry,
        tracer: tracer.clone(),
        admin_port: config.admin_port,
        cluster_name: config.cluster_name.clone(),
        auto_repair,
        qp: qp.clone(),
        storage: storage.clone(),
        host_id,
        tokens: tokens.clone(),
        address: listen.to_string(),
        started,
        drained: drained_tx,
        cluster: cluster.clone(),
        snitch: if config.endpoint_snitch.contains('.') {
            config.endpoint_snitch.clone()
        } else {
            format!("org.apache.cassandra.locator.{}", config.endpoint_snitch)
        },
    });
    tokio::spawn(admin.serve(admin_listener, shutdown_tx.subscribe()));
    tracing::info!(
        "Sibyl {} (Cassandra {} compatible) started in {} ms; CQL on {}; host id {}",
        env!("CARGO_PKG_VERSION"),
        RELEASE_VERSION,
        started.elapsed().as_millis(),
        native_addr,
        host_id
    );
    Ok(Node {
        config,
        storage,
        qp,
        host_id,
        tokens,
        native_addr,
        shutdown_tx,
        native,
        drained,
        cluster,
    })
}

impl Node {
    /// Stops serving, makes the commit log durable and closes it.
    pub async fn shutdown(self) {
        // the others mark this node down at once instead of waiting for
        // their failure detectors (Cassandra's announced shutdown)
        self.cluster.gossip.announce_shutdown();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let _ = self.shutdown_tx.send(true);
        self.native.stop().await;
        let _ = self.cluster.metadata.shutdown().await;
        self.storage.shutdown().await;
        tracing::info!("Sibyl stopped");
    }
}

#[derive(Clone)]
struct LocalInfo {
    host_id: uuid::Uuid,
    tokens: Vec<i64>,
    listen: IpAddr,
    rpc: IpAddr,
    datacenter: String,
    rack: String,
    config: Config,
}

/// Who this node is, from `system.local`.
struct LocalIdentity {
    host_id: uuid::Uuid,
    tokens: Option<Vec<i64>>,
    /// `bootstrapped`: COMPLETED, DECOMMISSIONED, or none yet.
    bootstrapped: Option<String>,
}

/// This node's host id, stored tokens and bootstrap state, from
/// `system.local`: `None` when there is no row; an error when the row cannot
/// be read or makes no sense.
fn read_local_identity(
    storage: &StorageEngine,
    t: &TableMetadata,
    now: i32,
    cluster_name: &str,
    override_decommission: bool,
) -> Result<Option<LocalIdentity>, StartError> {
    let cfs = storage
        .table(t.id)
        .ok_or_else(|| StartError::Identity("system.local is not open".into()))?;
    let cannot = |what: String| {
        StartError::Identity(format!(
            "cannot read this node's identity from system.local ({}): {what}",
            cfs.dir.display()
        ))
    };
    let Some(mut p) = cfs
        .read(&sibyl_storage::DecoratedKey::new(text("local")), None)
        .map_err(|e| cannot(e.to_string()))?
    else {
        return Ok(None);
    };
    p.resolve(now);
    let Some(row) = p.rows.values().next() else {
        return Ok(None);
    };
    // a node never changes clusters by a edit of its configuration
    if let Some(saved) = cells::column_value(row, "cluster_name", &sibyl_types::CqlType::Text, now)
    {
        let saved = String::from_utf8_lossy(&saved);
        if saved != cluster_name {
            return Err(StartError::Identity(format!(
                "Saved cluster name {saved} != configured name {cluster_name}"
            )));
        }
    }
    // a decommissioned node does not come back by being started again
    // (Cassandra's StorageService, its words)
    let bootstrapped = cells::column_value(row, "bootstrapped", &sibyl_types::CqlType::Text, now);
    if bootstrapped.as_deref() == Some(&b"DECOMMISSIONED"[..]) {
        if !override_decommission {
            return Err(StartError::Identity(
                "This node was decommissioned and will not rejoin the ring unless \
                 -Dcassandra.override_decommission=true has been set, or all existing data is \
                 removed and the node is bootstrapped again"
                    .into(),
            ));
        }
        tracing::warn!("This node was decommissioned, but overriding by operator request.");
    }
    let host_id = cells::column_value(row, "host_id", &sibyl_types::CqlType::Uuid, now)
        .and_then(|hid| uuid::Uuid::from_slice(&hid).ok())
        .ok_or_else(|| cannot("the row has no valid host_id".into()))?;
    let tokens = t
        .column("tokens")
        .and_then(|c| cells::column_value(row, "tokens", &c.typ, now))
        .map(|toks| {
            sibyl_types::value::deserialize_collection(&toks)
                .map_err(|e| cannot(format!("bad tokens: {e}")))?
                .into_iter()
                .map(|b| {
                    std::str::from_utf8(&b)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok())
                        .ok_or_else(|| cannot("a token is not a number".into()))
                })
                .collect::<Result<Vec<i64>, StartError>>()
        })
        .transpose()?
        .filter(|t| !t.is_empty());
    Ok(Some(LocalIdentity {
        host_id,
        tokens,
        bootstrapped: bootstrapped.map(|b| String::from_utf8_lossy(&b).into_owned()),
    }))
}

/// A new node's host id in `system.local`, before it joins anything.
async fn persist_host_id(
    storage: &Arc<StorageEngine>,
    t: &TableMetadata,
    host_id: uuid::Uuid,
    cluster_name: &str,
) -> Result<(), StorageError> {
    let wp = WriteParams {
        timestamp: sibyl_types::timeuuid::timestamp_micros_now(),
        ttl: 0,
        now: sibyl_storage::now_in_seconds(),
    };
    let m = row_mutation(
        t,
        &[text("local")],
        &[],
        &[
            ("cluster_name", Some(text(cluster_name))),
            ("host_id", Some(Bytes::copy_from_slice(host_id.as_bytes()))),
        ],
        &wp,
    );
    storage.apply(vec![m]).await
}

/// Records in `system.local` how this node stands in the ring
/// (`bootstrapped`: COMPLETED, DECOMMISSIONED), durably: a decommissioned
/// node must know it when it is started again.
pub async fn set_bootstrap_state(
    storage: &Arc<StorageEngine>,
    schema: &Schema,
    state: &str,
) -> Result<(), StorageError> {
    let t = system_table(schema, "system", "local");
    let wp = WriteParams {
        timestamp: sibyl_types::timeuuid::timestamp_micros_now(),
        ttl: 0,
        now: sibyl_storage::now_in_seconds(),
    };
    let m = row_mutation(
        &t,
        &[text("local")],
        &[],
        &[("bootstrapped", Some(text(state)))],
        &wp,
    );
    storage.apply(vec![m]).await?;
    if let Some(cfs) = storage.table(t.id) {
        storage
            .flush(&cfs, sibyl_storage::store::FlushReason::InternallyForced)
            .await?;
    }
    Ok(())
}

async fn write_local_row(
    storage: &Arc<StorageEngine>,
    t: &TableMetadata,
    l: &LocalInfo,
    schema_version: uuid::Uuid,
) -> Result<(), StorageError> {
    let wp = WriteParams {
        timestamp: sibyl_types::timeuuid::timestamp_micros_now(),
        ttl: 0,
        now: sibyl_storage::now_in_seconds(),
    };
    let mut toks: Vec<Bytes> = l.tokens.iter().map(|t| text(&t.to_string())).collect();
    toks.sort();
    let m = row_mutation(
        t,
        &[text("local")],
        &[],
        &[
            ("bootstrapped", Some(text("COMPLETED"))),
            ("broadcast_address", Some(inet(l.listen))),
            ("broadcast_port", Some(int(l.config.storage_port as i32))),
            ("cluster_name", Some(text(&l.config.cluster_name))),
            ("cql_version", Some(text(CQL_VERSION))),
            ("data_center", Some(text(&l.datacenter))),
            (
                "gossip_generation",
                Some(int(sibyl_storage::now_in_seconds())),
            ),
            (
                "host_id",
                Some(Bytes::copy_from_slice(l.host_id.as_bytes())),
            ),
            ("listen_address", Some(inet(l.listen))),
            ("listen_port", Some(int(l.config.storage_port as i32))),
            ("native_protocol_version", Some(text("5"))),
            (
                "partitioner",
                Some(text("org.apache.cassandra.dht.Murmur3Partitioner")),
            ),
            ("rack", Some(text(&l.rack))),
            ("release_version", Some(text(RELEASE_VERSION))),
            ("rpc_address", Some(inet(l.rpc))),
            ("rpc_port", Some(int(l.config.native_transport_port as i32))),
            (
                "schema_version",
                Some(Bytes::copy_from_slice(schema_version.as_bytes())),
            ),
            (
                "tokens",
                Some(sibyl_types::value::serialize_collection(&toks)),
            ),
        ],
        &wp,
    );
    storage.apply(vec![m]).await
}

/// The schema of the system keyspaces as rows of system_schema (and the
/// virtual keyspaces' in system_virtual_schema); regenerated at every start.
async fn write_system_schema_rows(
    storage: &StorageEngine,
    schema: &Schema,
) -> Result<(), StorageError> {
    let ts = 1; // older than any user write: never shadows anything
    let now = sibyl_storage::now_in_seconds();
    let mut muts = Vec::new();
    for ks in schema
        .keyspaces
        .values()
        .filter(|k| k.is_system && !k.is_virtual)
    {
        muts.extend(
            schema_tables::keyspace_mutations(ks, ts + 1, now)
                .into_iter()
                .filter(|m| !m.update.rows.is_empty()),
        );
    }
    let wp = WriteParams {
        timestamp: ts,
        ttl: 0,
        now,
    };
    let vks = system_table(schema, "system_virtual_schema", "keyspaces");
    let vtables = system_table(schema, "system_virtual_schema", "tables");
    let vcols = system_table(schema, "system_virtual_schema", "columns");
    for ks in schema.keyspaces.values().filter(|k| k.is_virtual) {
        muts.push(row_mutation(&vks, &[text(&ks.name)], &[], &[], &wp));
        for t in ks.tables.values() {
            muts.push(row_mutation(
                &vtables,
                &[text(&ks.name)],
                &[text(&t.name)],
                &[("comment", Some(text(&t.params.comment)))],
                &wp,
            ));
            for c in &t.columns {
                muts.push(row_mutation(
                    &vcols,
                    &[text(&ks.name)],
                    &[text(&t.name), text(&c.name)],
                    &schema_tables::column_row(c),
                    &wp,
                ));
            }
        }
    }
    let _ = boolean(true);
    storage.apply_unlogged(muts);
    Ok(())
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn system_table_directories_of_earlier_builds_get_cassandras_names() {
        let data = tempfile::tempdir().unwrap();
        let (ks, table, old, new) = sibyl_schema::schema::legacy_system_table_ids()
            .into_iter()
            .find(|(k, t, _, _)| k == "system" && t == "local")
            .unwrap();
        let from = data
            .path()
            .join(&ks)
            .join(format!("{table}-{}", old.simple()));
        std::fs::create_dir_all(&from).unwrap();
        std::fs::write(from.join("nb-1-big-Data.db"), b"rows").unwrap();
        migrate_system_table_directories(data.path()).unwrap();
        let to = data
            .path()
            .join("system")
            .join("local-7ad54392bcdd35a684174e047860b377");
        assert_eq!(new.simple().to_string(), "7ad54392bcdd35a684174e047860b377");
        assert_eq!(std::fs::read(to.join("nb-1-big-Data.db")).unwrap(), b"rows");
        assert!(!from.exists());
        // again: nothing to do
        migrate_system_table_directories(data.path()).unwrap();
        // both names present: refused, naming both
        std::fs::create_dir_all(&from).unwrap();
        let e = migrate_system_table_directories(data.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("both") && e.contains(&old.simple().to_string()),
            "{e}"
        );
        assert!(e.contains("7ad54392bcdd35a684174e047860b377"), "{e}");
    }
}
