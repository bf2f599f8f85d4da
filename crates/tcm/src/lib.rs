//! Transactional cluster metadata (after Cassandra 5.1's
//! `org.apache.cassandra.tcm`): schema and topology changes are entries of a
//! replicated log, committed by Raft ([openraft] 0.9) and applied in the same
//! order on every node, each giving the metadata a new [`Epoch`].
//!
//! The crate does not know what the entries mean. The node supplies:
//!
//! - a [`MetadataStateMachine`]: applies each committed [`Transformation`],
//!   and turns its state into a snapshot and back;
//! - a [`MetadataTransport`]: carries this crate's messages to another node
//!   over the node's own messaging, where they are given to
//!   [`ClusterMetadataService::handle`].
//!
//! # Wiring it into a node
//!
//! 1. At start, [`ClusterMetadataService::open`] the directory
//!    `DATA/metadata/` with the node's id (stable for the life of the
//!    directory) and its messaging address. Register a verb whose handler
//!    passes the bytes to [`handle`](ClusterMetadataService::handle) and sends
//!    back what it returns.
//! 2. The first node of a new cluster calls
//!    [`initialize_single`](ClusterMetadataService::initialize_single) (a
//!    no-op once it is a member). Every other new node calls
//!    [`join`](ClusterMetadataService::join) with a seed's address; a member
//!    may instead call [`add_node`](ClusterMetadataService::add_node) for it.
//!    A restarted node does neither: `open` brings back its state and Raft
//!    catches it up.
//! 3. Schema and topology changes go through
//!    [`commit`](ClusterMetadataService::commit) on any node; it returns once
//!    the change is committed and applied on that node.
//! 4. [`shutdown`](ClusterMetadataService::shutdown) before exit.
//!
//! # Voters
//!
//! An odd number of voters, as many as there are members up to
//! [`TcmConfig::max_voters`] (7): the second node is a learner, the third
//! makes three voters, and so on (see `policy.rs` for why). A node is added as
//! a learner, promoted once it has caught up, and removed with
//! [`remove_node`](ClusterMetadataService::remove_node) (demoted first, then
//! dropped; the voter count is kept odd).
//!
//! # On disk (`DATA/metadata/`)
//!
//! | file | holds | written by |
//! |---|---|---|
//! | `identity` | node id and the directory's random incarnation | created once |
//! | `vote` | the Raft vote | atomic replace (temp, fsync, rename, fsync dir) |
//! | `log` | log entries, the purge point, the committed log id | appends fsynced before acknowledged; truncation and purge rewrite it atomically |
//! | `snapshot` | the latest snapshot: log position, membership, epoch, the state machine's bytes | atomic replace |
//!
//! Every file is a sequence of records: length, checksum of the length,
//! format version, kind, payload (JSON), checksum (see `record.rs`). On open
//! a torn last record of `log` is cut off with a warning; any other damage is
//! [`TcmError::Corrupt`] naming the file and offset.
//!
//! # Restart and exactly-once application
//!
//! The node's state machine is treated as memory. `open` calls
//! [`MetadataStateMachine::restore`] with the latest snapshot (or with
//! [`Epoch::EMPTY`] and no bytes when there is none) and then applies the
//! committed entries after the snapshot, in order; later entries arrive from
//! the leader. Each entry is thus applied exactly once on top of the restored
//! state. A snapshot is taken every [`TcmConfig::snapshot_every_entries`]
//! entries, so a restart replays at most that many.
//!
//! # A wiped directory
//!
//! A node that comes back under the same id with an empty directory gets a
//! new incarnation. The members keep addressing the old incarnation and the
//! node refuses those messages (a Raft voter that lost its log must not vote
//! as if it had it); its `join` fails with [`TcmError::NodeIdInUse`] until
//! the old member is removed with `remove_node`, after which it joins as a
//! new member.

#![warn(missing_docs)]
mod error;
mod log_store;
mod network;
mod policy;
mod record;
mod service;
mod state_machine;
mod types;
mod wire;

pub use error::{TcmError, TransportError};
pub use service::{ClusterMetadataService, TcmConfig};
pub use types::{Epoch, Members, NodeAddr, Transformation, TransformationKind};

use futures::future::BoxFuture;
use std::time::Duration;

/// The node's cluster metadata: what committed transformations do.
///
/// Called from the Raft state machine task, one call at a time, in log order.
pub trait MetadataStateMachine: Send + Sync + 'static {
    /// Applies `transformation`, which the log gave `epoch`, and returns an
    /// answer for the committer. An `Err` rejects it (the committer gets
    /// [`TcmError::Rejected`]); it must then leave the state unchanged, and
    /// must be deterministic: every node rejects the same transformations.
    /// The epoch is used up either way.
    fn apply(&self, epoch: Epoch, transformation: &Transformation) -> Result<Vec<u8>, String>;

    /// The whole state, as bytes [`restore`](Self::restore) takes back.
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the whole state with a snapshot taken at `epoch`. Called by
    /// `open` before anything is applied (with [`Epoch::EMPTY`] and an empty
    /// slice when there is no snapshot: reset to the initial state), and when
    /// the leader sends a snapshot to a node too far behind.
    fn restore(&self, epoch: Epoch, snapshot: &[u8]) -> Result<(), String>;
}

/// Carries a message of this crate to the node at `to` and brings back the
/// answer its [`ClusterMetadataService::handle`] returned.
pub trait MetadataTransport: Send + Sync + 'static {
    /// Sends `request`, waiting at most `timeout` for the answer. Return
    /// [`TransportError::Unreachable`] only when the message was certainly
    /// not delivered (it may then be sent again), [`TransportError::Failed`]
    /// otherwise.
    fn call(
        &self,
        to: &NodeAddr,
        request: Vec<u8>,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>>;
}
