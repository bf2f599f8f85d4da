//! Logged batches across nodes (Cassandra's `StorageProxy.mutateAtomically`
//! and `BatchlogManager`): before a batch's mutations are sent, the batch is
//! stored on one or two other live nodes of the coordinator's data center
//! (in other racks where there are any); it is removed from them once the
//! mutations are applied. A batch whose coordinator died before removing it
//! is replayed by the nodes that hold it once it is older than twice the
//! write timeout, so that it is applied entirely or not at all.

use crate::error::{Result, ServiceError, WriteType};
use crate::proxy::StorageProxy;
use sibyl_cluster::messaging::{Request, Response};
use sibyl_db::Mutation;
use sibyl_protocol::Consistency;
use std::collections::BTreeSet;
use std::net::IpAddr;

impl StorageProxy {
    /// The nodes that keep a batch: up to two live others of this data
    /// center, from different racks first; this node alone when it has no
    /// live peer there.
    fn batchlog_endpoints(&self) -> Vec<IpAddr> {
        let local = self.local_address();
        let ring = self.ring.load();
        let my_rack = ring
            .endpoint_of(local)
            .map(|i| ring.endpoints[i].rack.clone());
        let mut candidates: Vec<(String, IpAddr)> = ring
            .endpoints
            .iter()
            .filter(|e| e.address != local && e.datacenter == self.local_dc())
            .filter(|e| self.is_alive(e.address))
            .map(|e| (e.rack.clone(), e.address))
            .collect();
        // spread over racks: other racks first, one node per rack, then any
        candidates.sort_by_key(|(rack, a)| (Some(rack) == my_rack.as_ref(), rack.clone(), *a));
        let mut chosen = Vec::new();
        let mut racks = BTreeSet::new();
        for (rack, a) in &candidates {
            if chosen.len() < 2 && racks.insert(rack.clone()) {
                chosen.push(*a);
            }
        }
        for (_, a) in &candidates {
            if chosen.len() < 2 && !chosen.contains(a) {
                chosen.push(*a);
            }
        }
        if chosen.is_empty() {
            chosen.push(local);
        }
        chosen
    }

    /// Applies a logged batch at `cl` through the batchlog.
    pub(crate) async fn mutate_atomically(
        &self,
        mutations: Vec<Mutation>,
        cl: Consistency,
    ) -> Result<()> {
        let schema = self.schema();
        let local = self.local_address();
        sibyl_tracing::trace(|| "Determining replicas for atomic batch");
        // availability first: a batch that cannot be applied is not logged
        let mut all_local = true;
        for m in &mutations {
            let Some(ks) = self.keyspace_of(&schema, m.table_id) else {
                return Err(ServiceError::Invalid(format!(
                    "unknown table {}",
                    m.table_id
                )));
            };
            let plan = self.write_plan(&ks.replication.strategy, m.key.token, cl);
            if cl != Consistency::Any {
                self.check_available(&plan, cl)?;
            }
            all_local &= plan.replicas.as_slice() == [local];
        }
        if all_local {
            // one local commit-log batch is atomic already
            return self.write(&schema, mutations, cl, WriteType::Batch).await;
        }
        let endpoints = self.batchlog_endpoints();
        let id = sibyl_types::timeuuid::now_timeuuid();
        let timeout = self.timeouts.write;
        let mut tasks = tokio::task::JoinSet::new();
        for to in &endpoints {
            let (sender, to) = (self.sender(), *to);
            let request = Request::BatchStore {
                id,
                mutations: mutations.clone(),
            };
            tasks.spawn(sibyl_tracing::traced(async move {
                sender.send(to, request, timeout).await
            }));
        }
        let mut stored = 0;
        while let Some(r) = tasks.join_next().await {
            if matches!(r, Ok(Some(Response::Done))) {
                stored += 1;
            }
        }
        if stored < endpoints.len() {
            return Err(ServiceError::WriteTimeout {
                consistency: if endpoints.len() == 1 {
                    Consistency::One
                } else {
                    Consistency::Two
                },
                received: stored,
                block_for: endpoints.len(),
                write_type: WriteType::BatchLog,
            });
        }
        self.write(&schema, mutations, cl, WriteType::Batch).await?;
        // applied: the batch is removed, one way (as Cassandra's)
        let sender = self.sender();
        for to in endpoints {
            sender.send_one_way(to, Request::BatchRemove(id));
        }
        Ok(())
    }

    /// Replays the batches this node keeps whose coordinators did not
    /// remove them in time (twice the write timeout), then removes them.
    /// Returns how many were replayed.
    pub async fn replay_batchlog(&self) -> usize {
        let Ok(batches) = self.replica.batchlog_batches() else {
            return 0;
        };
        let cutoff_ms = self.clock.now_micros() / 1000 - 2 * self.timeouts.write.as_millis() as i64;
        let mut replayed = 0;
        for b in batches {
            if sibyl_types::timeuuid::timeuuid_timestamp_millis(b.id.as_bytes()) > cutoff_ms {
                break;
            }
            if !b.mutations.is_empty() {
                let schema = self.schema();
                // every replica gets it, or a hint
                if let Err(e) = self
                    .write(&schema, b.mutations, Consistency::One, WriteType::Batch)
                    .await
                {
                    tracing::warn!("batch {} not replayed yet: {e}", b.id);
                    continue;
                }
            }
            tracing::info!("replayed batch {}", b.id);
            self.metrics.batchlog_replays.inc();
            let _ = self.replica.batchlog_remove(b.id).await;
            replayed += 1;
        }
        replayed
    }
}
