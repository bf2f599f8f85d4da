//! The crate's one error type, and the transport's.

use crate::types::{Epoch, NodeAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Why a [`MetadataTransport`](crate::MetadataTransport) call failed. The
/// distinction matters for retries: a request that was certainly not
/// delivered can be sent again, one whose fate is unknown cannot (a commit
/// might then be applied twice).
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransportError {
    /// The request was not delivered: no connection, the peer refused it, the
    /// link is down.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// The request may or may not have been delivered and acted on (the
    /// connection broke after sending, the answer did not come in time).
    #[error("{0}")]
    Failed(String),
}

/// Everything that can go wrong in the cluster metadata service.
#[derive(Debug, thiserror::Error)]
pub enum TcmError {
    /// Reading or writing a file of the metadata directory failed.
    #[error("cluster metadata I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file of the metadata directory holds a damaged record. Nothing is
    /// skipped: the node must not run with a log it cannot fully read.
    #[error("corrupt cluster metadata file {path} at offset {offset}: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Where its damaged record starts.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The directory was written by a different node id.
    #[error(
        "cluster metadata directory {dir} belongs to node {stored}, not to node {given}; \
         a node keeps its id for the life of its data directory"
    )]
    NodeIdMismatch {
        /// The metadata directory.
        dir: PathBuf,
        /// The node id stored there.
        stored: u64,
        /// The node id given to `open`.
        given: u64,
    },
    /// A node asked to join under an id that belongs to a member with another
    /// metadata directory, typically the same node restarted with its data
    /// wiped. A Raft voter that lost its log must not vote as if it had it.
    #[error(
        "node id {node_id} is already a cluster metadata member (at {member_addr}) with another \
         data directory; if that node lost its data, remove it first (remove_node({node_id})) \
         and then let it join again, or give the new node another id"
    )]
    NodeIdInUse {
        /// The id asked for.
        node_id: u64,
        /// The address recorded for the existing member.
        member_addr: NodeAddr,
    },
    /// Another member already has this address.
    #[error("address {addr} already belongs to cluster metadata member {member}")]
    AddressInUse {
        /// The address asked for.
        addr: NodeAddr,
        /// The member that has it.
        member: u64,
    },
    /// The node at an address answered with another id than expected.
    #[error("the node at {addr} is node {actual}, not node {expected}")]
    WrongNode {
        /// The address called.
        addr: NodeAddr,
        /// The id the caller expected.
        expected: u64,
        /// The id that answered.
        actual: u64,
    },
    /// The operation did not finish in time and too few voters answer for it
    /// to: a commit cannot be acknowledged without a majority of the voters.
    #[error(
        "{operation} did not complete within {timeout:?}: a majority of the cluster metadata \
         voters is unreachable ({answered} of {voters} voters answered recently, {needed} needed)"
    )]
    NoQuorum {
        /// What was attempted.
        operation: String,
        /// How long it was given.
        timeout: Duration,
        /// The voters heard from recently, this node included when it votes.
        answered: usize,
        /// The number of voters.
        voters: usize,
        /// A majority of `voters`.
        needed: usize,
    },
    /// The operation did not finish in time although a majority of the voters
    /// answers; it may still take effect.
    #[error(
        "{operation} did not complete within {timeout:?} ({answered} of {voters} cluster \
         metadata voters answered recently); it may still take effect"
    )]
    Timeout {
        /// What was attempted.
        operation: String,
        /// How long it was given.
        timeout: Duration,
        /// The voters heard from recently.
        answered: usize,
        /// The number of voters.
        voters: usize,
    },
    /// A node added as a learner did not catch up with the log in time; it
    /// stays a learner (not a voter) until it is added again.
    #[error(
        "node {node_id} did not catch up with the cluster metadata log within {timeout:?}; \
         it stays a learner (join again to retry)"
    )]
    CatchUpTimeout {
        /// The node being added.
        node_id: u64,
        /// How long it was given.
        timeout: Duration,
    },
    /// The transformation was committed, but the state machine rejected it
    /// (on every node alike). It still used up its epoch.
    #[error("transformation at {epoch} was rejected by the state machine: {message}")]
    Rejected {
        /// The epoch the transformation got.
        epoch: Epoch,
        /// The state machine's reason.
        message: String,
    },
    /// The transformation was committed but this node had not applied it yet
    /// when the time ran out.
    #[error("transformation committed at {epoch} but not applied on this node within {timeout:?}")]
    NotAppliedLocally {
        /// The epoch of the committed transformation.
        epoch: Epoch,
        /// How long the caller waited in all.
        timeout: Duration,
    },
    /// `wait_for_epoch` ran out of time.
    #[error(
        "cluster metadata did not reach {wanted} within {timeout:?} (this node is at {current})"
    )]
    EpochTimeout {
        /// The epoch waited for.
        wanted: Epoch,
        /// This node's epoch when the time ran out.
        current: Epoch,
        /// How long it waited.
        timeout: Duration,
    },
    /// The node's state machine refused a snapshot.
    #[error(
        "the state machine could not restore the cluster metadata snapshot at {epoch}: {message}"
    )]
    Restore {
        /// The snapshot's epoch.
        epoch: Epoch,
        /// The state machine's reason.
        message: String,
    },
    /// The node is not part of an initialized metadata cluster yet.
    #[error(
        "this node is not a member of a cluster metadata log yet: call initialize_single or join"
    )]
    NotInitialized,
    /// A request for another node could not be carried.
    #[error("cluster metadata request to {addr} failed: {source}")]
    Transport {
        /// The address called.
        addr: NodeAddr,
        /// The transport's error.
        source: TransportError,
    },
    /// A message between nodes could not be decoded.
    #[error("malformed cluster metadata message: {0}")]
    Malformed(String),
    /// The configuration is not usable.
    #[error("invalid cluster metadata configuration: {0}")]
    Config(String),
    /// Raft refused a membership change or stopped.
    #[error("cluster metadata consensus error: {0}")]
    Raft(String),
    /// The service was shut down, or its Raft task stopped after a storage error.
    #[error("the cluster metadata service is stopped: {0}")]
    Stopped(String),
}

impl TcmError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TcmError::Io {
            path: path.into(),
            source,
        }
    }
}
