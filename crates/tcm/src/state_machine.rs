//! openraft's [`RaftStateMachine`] around the node's [`MetadataStateMachine`],
//! and the durable snapshot file.
//!
//! The node's state machine is treated as memory: what survives a restart is
//! the latest snapshot (`snapshot`: the log id and membership it covers, its
//! epoch, and the node's bytes) plus the log. `open` calls
//! [`MetadataStateMachine::restore`] with that snapshot (or with the empty
//! state), then openraft re-applies the committed entries after it, so each
//! entry is applied exactly once on top of the restored state.

// openraft's traits fix the error type (`StorageError`, large); the helpers
// here return it as is rather than box it only to convert back.
#![allow(clippy::result_large_err)]
use crate::error::TcmError;
use crate::record::{self, kind};
use crate::types::{hex_bytes, ApplyOutcome, Epoch, MemberNode, TypeConfig};
use crate::MetadataStateMachine;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

type NodeId = u64;

/// The snapshot file's name in the metadata directory.
pub(crate) const SNAPSHOT_FILE: &str = "snapshot";

/// The version byte of the snapshot bytes sent between nodes.
const SNAPSHOT_PAYLOAD_VERSION: u8 = 1;

/// A snapshot as stored in the `snapshot` file (JSON inside a record).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredSnapshot {
    pub meta: SnapshotMeta<NodeId, MemberNode>,
    pub epoch: Epoch,
    #[serde(with = "hex_bytes")]
    pub data: Vec<u8>,
}

impl StoredSnapshot {
    /// The bytes a leader sends: version, epoch, the node's data.
    fn payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.data.len());
        out.push(SNAPSHOT_PAYLOAD_VERSION);
        out.extend_from_slice(&self.epoch.0.to_be_bytes());
        out.extend_from_slice(&self.data);
        out
    }

    fn from_payload(meta: SnapshotMeta<NodeId, MemberNode>, bytes: &[u8]) -> Result<Self, String> {
        match bytes {
            [SNAPSHOT_PAYLOAD_VERSION, rest @ ..] if rest.len() >= 8 => {
                let mut e = [0u8; 8];
                e.copy_from_slice(&rest[..8]);
                Ok(StoredSnapshot {
                    meta,
                    epoch: Epoch(u64::from_be_bytes(e)),
                    data: rest[8..].to_vec(),
                })
            }
            [v, ..] if *v != SNAPSHOT_PAYLOAD_VERSION => Err(format!(
                "snapshot format version {v} (this build reads version {SNAPSHOT_PAYLOAD_VERSION})"
            )),
            _ => Err(format!("snapshot of {} bytes is too short", bytes.len())),
        }
    }

    fn to_openraft(&self) -> Snapshot<TypeConfig> {
        Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(Cursor::new(self.payload())),
        }
    }
}

/// The latest snapshot, in memory and on disk. Shared by the state machine
/// and the snapshot builders, which openraft runs in tasks of their own.
pub(crate) struct SnapshotFile {
    path: PathBuf,
    current: Mutex<Option<StoredSnapshot>>,
    seq: AtomicU64,
}

impl SnapshotFile {
    pub(crate) fn open(dir: &Path) -> Result<Self, TcmError> {
        let path = dir.join(SNAPSHOT_FILE);
        let current = match record::read_single(&path, kind::SNAPSHOT)? {
            None => None,
            Some(r) => Some(
                serde_json::from_slice::<StoredSnapshot>(&r.payload).map_err(|e| {
                    TcmError::Corrupt {
                        path: path.clone(),
                        offset: r.offset,
                        reason: format!("undecodable snapshot: {e}"),
                    }
                })?,
            ),
        };
        Ok(SnapshotFile {
            path,
            current: Mutex::new(current),
            seq: AtomicU64::new(0),
        })
    }

    pub(crate) fn current(&self) -> Option<StoredSnapshot> {
        self.current.lock().clone()
    }

    /// Makes `snap` the current snapshot, durably. A snapshot older than the
    /// current one is dropped unless `force` (one installed from the leader
    /// replaces whatever this node had): a snapshot built in the background
    /// may finish after a newer one was installed.
    fn store(&self, snap: StoredSnapshot, force: bool) -> Result<(), StorageError<NodeId>> {
        let err = |e: &dyn std::fmt::Display| {
            StorageError::from(StorageIOError::write_snapshot(
                Some(snap.meta.signature()),
                AnyError::error(e.to_string()),
            ))
        };
        let mut current = self.current.lock();
        if !force {
            if let Some(c) = current.as_ref() {
                if c.meta.last_log_id >= snap.meta.last_log_id {
                    return Ok(());
                }
            }
        }
        let json = serde_json::to_vec(&snap).map_err(|e| err(&e))?;
        record::write_atomic(&self.path, &record::encode(kind::SNAPSHOT, &json))
            .map_err(|e| err(&e))?;
        *current = Some(snap);
        Ok(())
    }

    fn next_id(&self, last: Option<LogId<NodeId>>, epoch: Epoch) -> String {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        match last {
            Some(l) => format!("{}-{}-{}-{n}", l.leader_id, l.index, epoch.0),
            None => format!("--{}-{n}", epoch.0),
        }
    }
}

async fn store_blocking(
    file: Arc<SnapshotFile>,
    snap: StoredSnapshot,
    force: bool,
) -> Result<(), StorageError<NodeId>> {
    tokio::task::spawn_blocking(move || file.store(snap, force))
        .await
        .map_err(|e| {
            StorageError::from(StorageIOError::write_snapshot(
                None,
                AnyError::error(e.to_string()),
            ))
        })?
}

/// The state machine openraft drives.
pub(crate) struct StateMachineStore {
    app: Arc<dyn MetadataStateMachine>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, MemberNode>,
    epoch: Epoch,
    epoch_tx: watch::Sender<Epoch>,
    snapshots: Arc<SnapshotFile>,
}

impl StateMachineStore {
    /// A state machine the node's `app` backs, restored to the last snapshot
    /// (or to the empty state).
    pub(crate) fn restore(
        app: Arc<dyn MetadataStateMachine>,
        snapshots: Arc<SnapshotFile>,
        epoch_tx: watch::Sender<Epoch>,
    ) -> Result<Self, TcmError> {
        let (last_applied, membership, epoch) = match snapshots.current() {
            Some(s) => {
                app.restore(s.epoch, &s.data)
                    .map_err(|message| TcmError::Restore {
                        epoch: s.epoch,
                        message,
                    })?;
                (s.meta.last_log_id, s.meta.last_membership.clone(), s.epoch)
            }
            None => {
                app.restore(Epoch::EMPTY, &[])
                    .map_err(|message| TcmError::Restore {
                        epoch: Epoch::EMPTY,
                        message,
                    })?;
                (None, StoredMembership::default(), Epoch::EMPTY)
            }
        };
        epoch_tx.send_replace(epoch);
        Ok(StateMachineStore {
            app,
            last_applied,
            membership,
            epoch,
            epoch_tx,
            snapshots,
        })
    }
}

/// A snapshot taken at one point of the log; persisting it happens in
/// openraft's builder task, while the state machine goes on applying.
pub(crate) struct SnapshotBuilder {
    snapshots: Arc<SnapshotFile>,
    snap: StoredSnapshot,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        store_blocking(self.snapshots.clone(), self.snap.clone(), false).await?;
        Ok(self.snap.to_openraft())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, MemberNode>), StorageError<NodeId>>
    {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyOutcome>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => out.push(ApplyOutcome {
                    epoch: self.epoch,
                    ..Default::default()
                }),
                EntryPayload::Normal(t) => {
                    // The epoch counts rejected transformations too: every
                    // node rejects the same ones, so epochs stay equal.
                    self.epoch = self.epoch.next();
                    let outcome = match self.app.apply(self.epoch, &t) {
                        Ok(output) => ApplyOutcome {
                            epoch: self.epoch,
                            output,
                            rejected: None,
                        },
                        Err(reason) => ApplyOutcome {
                            epoch: self.epoch,
                            output: Vec::new(),
                            rejected: Some(reason),
                        },
                    };
                    out.push(outcome);
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                    out.push(ApplyOutcome {
                        epoch: self.epoch,
                        ..Default::default()
                    });
                }
            }
        }
        self.epoch_tx.send_replace(self.epoch);
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Taken here, between two applies, so the bytes match `last_applied`.
        let data = self.app.snapshot();
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id: self.snapshots.next_id(self.last_applied, self.epoch),
        };
        SnapshotBuilder {
            snapshots: self.snapshots.clone(),
            snap: StoredSnapshot {
                meta,
                epoch: self.epoch,
                data,
            },
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, MemberNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let bytes = snapshot.into_inner();
        let snap = StoredSnapshot::from_payload(meta.clone(), &bytes).map_err(|e| {
            StorageError::from(StorageIOError::read_snapshot(
                Some(meta.signature()),
                AnyError::error(e),
            ))
        })?;
        // Durable first: a crash between the two restores the same snapshot.
        store_blocking(self.snapshots.clone(), snap.clone(), true).await?;
        self.app.restore(snap.epoch, &snap.data).map_err(|e| {
            tracing::error!(
                "cluster metadata: the state machine refused snapshot {}: {e}",
                meta
            );
            StorageError::from(StorageIOError::write_state_machine(AnyError::error(e)))
        })?;
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.epoch = snap.epoch;
        self.epoch_tx.send_replace(self.epoch);
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(self.snapshots.current().map(|s| s.to_openraft()))
    }
}
