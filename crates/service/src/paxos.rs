//! Paxos on the replica (Cassandra's `PaxosState`): each partition's promise,
//! accepted proposal and last commit, kept in `system.paxos` (one row per
//! partition key and table) so that they survive a restart, and changed
//! under a per-partition lock so that a prepare or a proposal is one atomic
//! step. The rows are written at their ballot's timestamp, with a TTL of
//! the table's `gc_grace_seconds` (at least three hours), as Cassandra does.

use crate::replica::Replica;
use bytes::Bytes;
use sibyl_cluster::messaging::ReplicaFailure;
use sibyl_db::cells::WriteParams;
use sibyl_db::paxos::{Ballot, Commit, Promise};
use sibyl_db::serde::{decode_mutation, encode_mutation};
use sibyl_db::{ColumnData, DecoratedKey, Mutation, ReadCommand, ReadResponse};
use sibyl_schema::schema::TableMetadata;
use sibyl_schema::schema_tables::row_mutation;
use std::sync::Arc;

/// Stripes of the replica's Paxos locks.
pub const LOCK_STRIPES: usize = 256;

/// The least time Paxos state is kept (Cassandra's floor for its TTL).
const MIN_TTL_SECONDS: i32 = 3 * 3600;

/// One partition's Paxos state.
#[derive(Debug, Default)]
struct State {
    promised: Ballot,
    accepted: Option<Commit>,
    committed: Option<Commit>,
}

fn uuid_bytes(b: &Ballot) -> Bytes {
    Bytes::copy_from_slice(b.0.as_bytes())
}

fn encoded(m: &Mutation) -> Bytes {
    let mut out = Vec::new();
    encode_mutation(m, &mut out);
    Bytes::from(out)
}

impl Replica {
    fn paxos_table(&self) -> Result<Arc<TableMetadata>, ReplicaFailure> {
        self.schema()
            .table("system", "paxos")
            .cloned()
            .ok_or_else(|| ReplicaFailure::Error("system.paxos is missing".into()))
    }

    fn paxos_lock(&self, table_id: uuid::Uuid, key: &Bytes) -> &tokio::sync::Mutex<()> {
        let k = DecoratedKey::new(key.clone());
        let t = u64::from_le_bytes(table_id.as_bytes()[..8].try_into().unwrap_or([0; 8]));
        &self.paxos_locks[((k.token as u64) ^ t) as usize % LOCK_STRIPES]
    }

    /// The state of `key` in `table_id`, as stored.
    fn paxos_state(&self, table_id: uuid::Uuid, key: &Bytes) -> Result<State, ReplicaFailure> {
        let paxos = self.paxos_table()?;
        let now = self.clock.now_seconds();
        let cmd = ReadCommand::single(paxos.id, DecoratedKey::new(key.clone()), now);
        let rows = match self.read(&cmd)? {
            ReadResponse::Data(mut d) => d.pop().map(|(_, mut p)| {
                p.resolve(now);
                p
            }),
            ReadResponse::Digest(_) => None,
        };
        let Some(p) = rows else {
            return Ok(State::default());
        };
        let Some(row) = p
            .rows
            .iter()
            .find(|(ck, _)| ck.values.first().map(|v| v.as_ref()) == Some(table_id.as_bytes()))
            .map(|(_, r)| r)
        else {
            return Ok(State::default());
        };
        let value = |name: &str| -> Option<Bytes> {
            match row.cells.get(name) {
                Some(ColumnData::Simple(c)) if c.is_live(now) => c.value.clone(),
                _ => None,
            }
        };
        let ballot = |name: &str| -> Ballot {
            value(name)
                .and_then(|b| <[u8; 16]>::try_from(b.as_ref()).ok())
                .map(|b| Ballot(uuid::Uuid::from_bytes(b)))
                .unwrap_or(Ballot::NONE)
        };
        let schema = self.schema();
        let comparator = |id| schema.table_by_id(id).map(|t| t.comparator.clone());
        let commit = |ballot_col: &str, update_col: &str| -> Option<Commit> {
            let b = ballot(ballot_col);
            let update = value(update_col)?;
            let update = decode_mutation(&update, &comparator).ok()??;
            (!b.is_none()).then_some(Commit { ballot: b, update })
        };
        Ok(State {
            promised: ballot("in_progress_ballot"),
            accepted: commit("proposal_ballot", "proposal"),
            committed: commit("most_recent_commit_at", "most_recent_commit"),
        })
    }

    /// Writes columns of the state row of `key` in `table_id` at `ballot`'s
    /// timestamp.
    async fn write_paxos(
        &self,
        table_id: uuid::Uuid,
        key: &Bytes,
        ballot: &Ballot,
        cols: &[(&str, Option<Bytes>)],
    ) -> Result<(), ReplicaFailure> {
        let paxos = self.paxos_table()?;
        let gc_grace = self
            .schema()
            .table_by_id(table_id)
            .map_or(0, |t| t.params.gc_grace_seconds);
        let wp = WriteParams {
            timestamp: ballot.micros(),
            ttl: gc_grace.max(MIN_TTL_SECONDS),
            now: self.clock.now_seconds(),
        };
        let mut m = row_mutation(
            &paxos,
            std::slice::from_ref(key),
            &[Bytes::copy_from_slice(table_id.as_bytes())],
            cols,
            &wp,
        );
        // state columns only: no row marker to outlive them
        m.update.rows.retain(|_, r| {
            r.liveness = None;
            true
        });
        self.apply(vec![m]).await
    }

    /// Promises `ballot` unless a higher one was promised (`PAXOS_PREPARE_REQ`).
    pub async fn paxos_prepare(
        &self,
        ballot: Ballot,
        table_id: uuid::Uuid,
        key: Bytes,
    ) -> Result<Promise, ReplicaFailure> {
        let _guard = self.paxos_lock(table_id, &key).lock().await;
        let state = self.paxos_state(table_id, &key)?;
        let promised = ballot > state.promised;
        if promised {
            sibyl_tracing::trace(|| format!("Promising ballot {}", ballot.0));
            self.write_paxos(
                table_id,
                &key,
                &ballot,
                &[("in_progress_ballot", Some(uuid_bytes(&ballot)))],
            )
            .await?;
        }
        Ok(Promise {
            promised,
            most_recent_promise: state.promised,
            accepted: state.accepted,
            committed: state.committed,
        })
    }

    /// Accepts a proposal unless a higher ballot was promised
    /// (`PAXOS_PROPOSE_REQ`).
    pub async fn paxos_propose(&self, proposal: Commit) -> Result<bool, ReplicaFailure> {
        let key = proposal.update.key.key.clone();
        let table_id = proposal.update.table_id;
        let _guard = self.paxos_lock(table_id, &key).lock().await;
        let state = self.paxos_state(table_id, &key)?;
        if proposal.ballot < state.promised {
            sibyl_tracing::trace(|| {
                format!(
                    "Rejecting proposal for {} because in_progress is now {}",
                    proposal.ballot.0, state.promised.0
                )
            });
            return Ok(false);
        }
        sibyl_tracing::trace(|| {
            format!(
                "Accepting proposal Accepted({}, key={})",
                proposal.ballot.0,
                hex(&key)
            )
        });
        self.write_paxos(
            table_id,
            &key,
            &proposal.ballot,
            &[
                ("in_progress_ballot", Some(uuid_bytes(&proposal.ballot))),
                ("proposal_ballot", Some(uuid_bytes(&proposal.ballot))),
                ("proposal", Some(encoded(&proposal.update))),
            ],
        )
        .await?;
        Ok(true)
    }

    /// Applies a committed proposal to the data and records it as the last
    /// commit (`PAXOS_COMMIT_REQ`).
    pub async fn paxos_commit(&self, commit: Commit) -> Result<(), ReplicaFailure> {
        let key = commit.update.key.key.clone();
        let table_id = commit.update.table_id;
        sibyl_tracing::trace(|| {
            format!(
                "Committing proposal Committed({}, key={})",
                commit.ballot.0,
                hex(&key)
            )
        });
        if !commit.update.update.is_empty() {
            self.apply(vec![commit.update.clone()]).await?;
        }
        let _guard = self.paxos_lock(table_id, &key).lock().await;
        let state = self.paxos_state(table_id, &key)?;
        if state
            .committed
            .as_ref()
            .is_some_and(|c| c.ballot >= commit.ballot)
        {
            return Ok(());
        }
        let mut cols: Vec<(&str, Option<Bytes>)> = vec![
            ("most_recent_commit_at", Some(uuid_bytes(&commit.ballot))),
            ("most_recent_commit", Some(encoded(&commit.update))),
        ];
        // the accepted proposal is done with once a later or equal one is
        // committed
        if state
            .accepted
            .as_ref()
            .is_some_and(|a| a.ballot <= commit.ballot)
        {
            cols.push(("proposal_ballot", None));
            cols.push(("proposal", None));
        }
        self.write_paxos(table_id, &key, &commit.ballot, &cols)
            .await
    }
}

/// A partition key as traces show it.
fn hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}
