//! StorageProxy: the coordinator. Picks replicas from the ring and the
//! keyspace's replication strategy, checks the consistency level can be met,
//! and applies mutations and reads. With a ring of one the only replica is
//! this node; the same path serves the cluster.

use crate::error::{Error, Result};
use crate::ring::TokenMetadata;
use crate::schema::{KeyspaceMetadata, Schema};
use sibyl_protocol::Consistency;
use sibyl_storage::{Mutation, StorageEngine};
use std::sync::Arc;

pub struct StorageProxy {
    storage: Arc<StorageEngine>,
    local_dc: String,
    /// The ring; this node is endpoint `local`.
    pub ring: parking_lot::RwLock<TokenMetadata>,
    pub local: usize,
}

/// Replicas that must answer for `cl` given the keyspace's replication.
pub fn block_for(ks: &KeyspaceMetadata, cl: Consistency, local_dc: &str) -> usize {
    let rf = ks.replication_factor();
    let local_rf = if ks.replication.get("class").map(|c| c.ends_with("NetworkTopologyStrategy")).unwrap_or(false) {
        ks.replication.get(local_dc).and_then(|v| v.parse().ok()).unwrap_or(0)
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
        StorageProxy { storage, local_dc, ring: parking_lot::RwLock::new(TokenMetadata::new()), local: 0 }
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

    fn check_token(&self, schema: &Schema, keyspace: &str, cl: Consistency, write: bool, token: i64) -> Result<()> {
        let Some(ks) = schema.keyspace(keyspace) else { return Ok(()) };
        if ks.is_system && ks.replication.get("class").map(|c| c.ends_with("LocalStrategy")).unwrap_or(false) {
            return Ok(());
        }
        if write && cl.is_serial() {
            return Err(Error::Invalid(format!("You must use conditional updates for serializable writes")));
        }
        if !write && cl == Consistency::Any {
            return Err(Error::Invalid("ANY ConsistencyLevel is only supported for writes".into()));
        }
        if write && cl == Consistency::Any {
            return Ok(());
        }
        let need = block_for(ks, cl, &self.local_dc);
        let (alive, _) = self.live_replicas(ks, token);
        if need > alive || (need == 0 && alive == 0) {
            return Err(Error::Unavailable { consistency: cl, required: need.max(1) as i32, alive: alive as i32 });
        }
        Ok(())
    }

    pub fn check_read(&self, schema: &Schema, keyspace: &str, cl: Consistency) -> Result<()> {
        self.check(schema, keyspace, cl, false)
    }

    /// Applies mutations at `cl`.
    pub async fn mutate(&self, schema: &Schema, keyspace: &str, mutations: Vec<Mutation>, cl: Consistency) -> Result<()> {
        for m in &mutations {
            self.check_token(schema, keyspace, cl, true, m.key.token)?;
        }
        if mutations.is_empty() {
            return Ok(());
        }
        self.storage.apply(mutations).await.map_err(Error::from)
    }
}
