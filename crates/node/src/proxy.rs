//! StorageProxy: the coordinator. Picks replicas from the ring and the
//! keyspace's replication strategy, checks the consistency level can be met,
//! and applies mutations and reads. With a ring of one the only replica is
//! this node; the same path serves the cluster.

use crate::error::{Error, Result};
use crate::ring::TokenMetadata;
use crate::schema::{KeyspaceMetadata, Schema};
use sibyl_protocol::Consistency;
use sibyl_storage::{counter, ColumnData, ColumnFamilyStore, Mutation, Row, StorageEngine};
use std::sync::Arc;

/// Stripes of the counter leader's read-modify-write locks.
const COUNTER_LOCK_STRIPES: usize = 1024;

pub struct StorageProxy {
    storage: Arc<StorageEngine>,
    /// Serialises the leader's read-then-write of one counter partition.
    counter_locks: Vec<tokio::sync::Mutex<()>>,
    local_dc: String,
    /// The ring; this node is endpoint `local`.
    pub ring: parking_lot::RwLock<TokenMetadata>,
    pub local: usize,
}

/// Replicas that must answer for `cl` given the keyspace's replication.
pub fn block_for(ks: &KeyspaceMetadata, cl: Consistency, local_dc: &str) -> usize {
    let rf = ks.replication_factor();
    let local_rf = if ks
        .replication
        .get("class")
        .map(|c| c.ends_with("NetworkTopologyStrategy"))
        .unwrap_or(false)
    {
        ks.replication
            .get(local_dc)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    } else {
        rf
    };
    match cl {
        Consistency::Any => 1,
        Consistency::One | Consistency::LocalOne => 1,
        Consistency::Two => 2,
        Consistency::Three => 3,
        Consistency::Quorum | Consistency::Serial => rf / 2 + 1,
        Consistency::All => rf,
        Consistency::LocalQuorum | Consistency::LocalSerial => local_rf / 2 + 1,
        Consistency::EachQuorum => rf / 2 + 1,
    }
}

impl StorageProxy {
    pub fn new(storage: Arc<StorageEngine>, local_dc: String) -> Self {
        let counter_locks = (0..COUNTER_LOCK_STRIPES)
            .map(|_| tokio::sync::Mutex::new(()))
            .collect();
        StorageProxy {
            storage,
            counter_locks,
            local_dc,
            ring: parking_lot::RwLock::new(TokenMetadata::new()),
            local: 0,
        }
    }

    /// Live natural replicas of `token`: the replicas the ring and the
    /// strategy give, that the failure detector believes up (with one node:
    /// this node, when it is a replica).
    fn live_replicas(&self, ks: &KeyspaceMetadata, token: i64) -> (usize, bool) {
        let replicas = self.ring.read().replicas(token, ks);
        (replicas.len(), replicas.contains(&self.local))
    }

    fn check(&self, schema: &Schema, keyspace: &str, cl: Consistency, write: bool) -> Result<()> {
        self.check_token(schema, keyspace, cl, write, i64::MIN)
    }

    fn check_token(
        &self,
        schema: &Schema,
        keyspace: &str,
        cl: Consistency,
        write: bool,
        token: i64,
    ) -> Result<()> {
        let Some(ks) = schema.keyspace(keyspace) else {
            return Ok(());
        };
        if ks.is_system
            && ks
                .replication
                .get("class")
                .map(|c| c.ends_with("LocalStrategy"))
                .unwrap_or(false)
        {
            return Ok(());
        }
        if write && cl.is_serial() {
            return Err(Error::Invalid(format!(
                "You must use conditional updates for serializable writes"
            )));
        }
        if !write && cl == Consistency::Any {
            return Err(Error::Invalid(
                "ANY ConsistencyLevel is only supported for writes".into(),
            ));
        }
        if write && cl == Consistency::Any {
            return Ok(());
        }
        let need = block_for(ks, cl, &self.local_dc);
        let (alive, _) = self.live_replicas(ks, token);
        if need > alive || (need == 0 && alive == 0) {
            return Err(Error::Unavailable {
                consistency: cl,
                required: need.max(1) as i32,
                alive: alive as i32,
            });
        }
        Ok(())
    }

    pub fn check_read(&self, schema: &Schema, keyspace: &str, cl: Consistency) -> Result<()> {
        self.check(schema, keyspace, cl, false)
    }

    /// Applies mutations at `cl`.
    pub async fn mutate(
        &self,
        schema: &Schema,
        keyspace: &str,
        mutations: Vec<Mutation>,
        cl: Consistency,
    ) -> Result<()> {
        for m in &mutations {
            self.check_token(schema, keyspace, cl, true, m.key.token)?;
        }
        if mutations.is_empty() {
            return Ok(());
        }
        let counter_table = mutations
            .iter()
            .find_map(|m| schema.table_by_id(m.table_id).filter(|t| t.is_counter));
        if let Some(t) = counter_table {
            if cl == Consistency::Any {
                return Err(Error::Invalid(format!(
                    "Consistency level ANY is not yet supported for counter table {}",
                    t.name
                )));
            }
            return self.mutate_counters(mutations).await;
        }
        // index entries go in the same commit-log batch as the base write
        let mut mutations = mutations;
        let entries =
            crate::index::index_mutations(schema, &mutations, sibyl_storage::now_in_seconds());
        mutations.extend(entries);
        self.storage.apply(mutations).await.map_err(Error::from)
    }

    /// Counter updates, led by this node (Cassandra's `CounterMutation`): under
    /// the partition's lock, read this node's shard of each updated counter and
    /// write it back one clock tick later with the delta added. Deletions of
    /// counters go through unchanged.
    async fn mutate_counters(&self, mutations: Vec<Mutation>) -> Result<()> {
        let id = {
            let ring = self.ring.read();
            *ring
                .endpoints
                .get(self.local)
                .map(|e| e.host_id.as_bytes())
                .unwrap_or(&[0; 16])
        };
        for mut m in mutations {
            let Some(cfs) = self.storage.table(m.table_id) else {
                continue;
            };
            let stripe = (m.key.token as u64
                ^ u64::from_le_bytes(m.table_id.as_bytes()[..8].try_into().unwrap_or([0; 8])))
                as usize
                % COUNTER_LOCK_STRIPES;
            let _guard = self.counter_locks[stripe].lock().await;
            if has_deltas(&m) {
                lead_counter_update(&cfs, &mut m, &id)?;
            }
            self.storage.apply(vec![m]).await?;
        }
        Ok(())
    }
}

fn has_deltas(m: &Mutation) -> bool {
    let row_has = |r: &Row| {
        r.cells.values().any(|d| matches!(d, ColumnData::Counter(c) if c.value.as_deref().is_some_and(|v| !counter::is_context(v))))
    };
    m.update.static_row.as_ref().is_some_and(row_has) || m.update.rows.values().any(row_has)
}

/// Turns each delta in `m` into this node's new shard. The clock continues from
/// the highest clock ever written for the shard (deleted versions included, so
/// the new shard supersedes them when merged), the count from the live value.
fn lead_counter_update(cfs: &ColumnFamilyStore, m: &mut Mutation, id: &[u8; 16]) -> Result<()> {
    let now = sibyl_storage::now_in_seconds();
    let raw = cfs.read(&m.key, None)?;
    let live = raw.clone().map(|mut p| {
        p.resolve(now);
        p
    });
    let shard = |p: &Option<sibyl_storage::Partition>,
                 ck: Option<&sibyl_storage::ClusteringKey>,
                 name: &str| {
        let p = p.as_ref()?;
        let row = match ck {
            None => p.static_row.as_ref(),
            Some(ck) => p.rows.get(ck),
        }?;
        match row.cells.get(name)? {
            ColumnData::Counter(c) => counter::shard_of(c.value.as_deref()?, id),
            _ => None,
        }
    };
    let lead = |row: &mut Row, ck: Option<&sibyl_storage::ClusteringKey>| {
        let names: Vec<sibyl_storage::data::ColumnName> =
            row.cells.iter().map(|(n, _)| *n).collect();
        for name in names {
            let Some(ColumnData::Counter(c)) = row.cells.get_mut(&name) else {
                continue;
            };
            let Some(delta) = c
                .value
                .as_deref()
                .filter(|v| !counter::is_context(v))
                .and_then(counter::as_delta)
            else {
                continue;
            };
            let clock = shard(&raw, ck, &name).map_or(0, |s| s.clock);
            let count = shard(&live, ck, &name).map_or(0, |s| s.count);
            c.value = Some(counter::encode(&[counter::Shard {
                id: *id,
                clock: clock + 1,
                count: count.wrapping_add(delta),
            }]));
        }
    };
    if let Some(sr) = &mut m.update.static_row {
        lead(sr, None);
    }
    m.update.rows.retain(|ck, row| {
        lead(row, Some(ck));
        true
    });
    Ok(())
}
