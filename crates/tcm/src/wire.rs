//! The messages between the metadata services of two nodes: one version
//! byte, then JSON. openraft's own messages (AppendEntries, Vote,
//! InstallSnapshot and their answers) travel in openraft's serde form, which
//! openraft keeps stable within a release line; the exact-byte test below
//! catches a change of it when openraft is upgraded.

use crate::error::TcmError;
use crate::types::{ApplyOutcome, Epoch, MemberNode, NodeAddr, Transformation, TypeConfig};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

type NodeId = u64;

/// The version of the messages this build sends and reads.
pub(crate) const WIRE_VERSION: u8 = 1;

/// The node a Raft message is meant for: its id and the incarnation of its
/// metadata directory, so that a node whose directory was recreated does not
/// answer for the member that had the old one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Target {
    pub node_id: NodeId,
    pub incarnation: String,
}

impl Target {
    pub(crate) fn of(node_id: NodeId, node: &MemberNode) -> Self {
        Target {
            node_id,
            incarnation: node.incarnation.clone(),
        }
    }
}

/// A request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Request {
    /// The sender's node id.
    pub from: NodeId,
    /// The member the sender means, for Raft messages.
    pub to: Option<Target>,
    pub body: RequestBody,
}

/// What is asked.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum RequestBody {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// Who are you (node id and incarnation)?
    Identify,
    /// Commit this transformation (answered by the leader only).
    Commit {
        transformation: Transformation,
        timeout_ms: u64,
    },
    /// Add this node to the metadata cluster (forwarded to the leader).
    AddNode {
        node_id: NodeId,
        addr: NodeAddr,
        timeout_ms: u64,
    },
    /// Remove this node from the metadata cluster (forwarded to the leader).
    RemoveNode {
        node_id: NodeId,
        timeout_ms: u64,
    },
}

/// An answer.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Response {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Identity {
        node_id: NodeId,
        incarnation: String,
    },
    Committed(ApplyOutcome),
    Done,
    /// This node is not the leader; the leader it knows of, if any.
    NotLeader {
        leader: Option<NodeId>,
        leader_addr: Option<NodeAddr>,
    },
    Failed(Failure),
}

/// An error carried back to the requester.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Failure {
    /// The message was for another member (another id or incarnation).
    WrongTarget(String),
    Malformed(String),
    NoQuorum {
        operation: String,
        timeout_ms: u64,
        answered: usize,
        voters: usize,
        needed: usize,
    },
    Timeout {
        operation: String,
        timeout_ms: u64,
        answered: usize,
        voters: usize,
    },
    Rejected {
        epoch: Epoch,
        message: String,
    },
    CatchUpTimeout {
        node_id: NodeId,
        timeout_ms: u64,
    },
    NodeIdInUse {
        node_id: NodeId,
        member_addr: NodeAddr,
    },
    AddressInUse {
        addr: NodeAddr,
        member: NodeId,
    },
    WrongNode {
        addr: NodeAddr,
        expected: NodeId,
        actual: NodeId,
    },
    Other(String),
}

impl Failure {
    pub(crate) fn from_error(e: &TcmError) -> Failure {
        match e {
            TcmError::NoQuorum {
                operation,
                timeout,
                answered,
                voters,
                needed,
            } => Failure::NoQuorum {
                operation: operation.clone(),
                timeout_ms: timeout.as_millis() as u64,
                answered: *answered,
                voters: *voters,
                needed: *needed,
            },
            TcmError::Timeout {
                operation,
                timeout,
                answered,
                voters,
            } => Failure::Timeout {
                operation: operation.clone(),
                timeout_ms: timeout.as_millis() as u64,
                answered: *answered,
                voters: *voters,
            },
            TcmError::Rejected { epoch, message } => Failure::Rejected {
                epoch: *epoch,
                message: message.clone(),
            },
            TcmError::CatchUpTimeout { node_id, timeout } => Failure::CatchUpTimeout {
                node_id: *node_id,
                timeout_ms: timeout.as_millis() as u64,
            },
            TcmError::NodeIdInUse {
                node_id,
                member_addr,
            } => Failure::NodeIdInUse {
                node_id: *node_id,
                member_addr: member_addr.clone(),
            },
            TcmError::AddressInUse { addr, member } => Failure::AddressInUse {
                addr: addr.clone(),
                member: *member,
            },
            TcmError::WrongNode {
                addr,
                expected,
                actual,
            } => Failure::WrongNode {
                addr: addr.clone(),
                expected: *expected,
                actual: *actual,
            },
            TcmError::Malformed(m) => Failure::Malformed(m.clone()),
            other => Failure::Other(other.to_string()),
        }
    }

    /// The error as the requester reports it; `from` is the node that failed.
    pub(crate) fn into_error(self, from: &NodeAddr) -> TcmError {
        match self {
            Failure::WrongTarget(m) => TcmError::Raft(format!("{from} refused the message: {m}")),
            Failure::Malformed(m) => {
                TcmError::Malformed(format!("{from} could not read our message: {m}"))
            }
            Failure::NoQuorum {
                operation,
                timeout_ms,
                answered,
                voters,
                needed,
            } => TcmError::NoQuorum {
                operation,
                timeout: Duration::from_millis(timeout_ms),
                answered,
                voters,
                needed,
            },
            Failure::Timeout {
                operation,
                timeout_ms,
                answered,
                voters,
            } => TcmError::Timeout {
                operation,
                timeout: Duration::from_millis(timeout_ms),
                answered,
                voters,
            },
            Failure::Rejected { epoch, message } => TcmError::Rejected { epoch, message },
            Failure::CatchUpTimeout {
                node_id,
                timeout_ms,
            } => TcmError::CatchUpTimeout {
                node_id,
                timeout: Duration::from_millis(timeout_ms),
            },
            Failure::NodeIdInUse {
                node_id,
                member_addr,
            } => TcmError::NodeIdInUse {
                node_id,
                member_addr,
            },
            Failure::AddressInUse { addr, member } => TcmError::AddressInUse { addr, member },
            Failure::WrongNode {
                addr,
                expected,
                actual,
            } => TcmError::WrongNode {
                addr,
                expected,
                actual,
            },
            Failure::Other(m) => TcmError::Raft(format!("{from}: {m}")),
        }
    }
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = vec![WIRE_VERSION];
    serde_json::to_writer(&mut out, v)?;
    Ok(out)
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    match bytes {
        [WIRE_VERSION, json @ ..] => serde_json::from_slice(json).map_err(|e| e.to_string()),
        [v, ..] => Err(format!(
            "message format version {v} (this build speaks version {WIRE_VERSION})"
        )),
        [] => Err("empty message".to_string()),
    }
}

pub(crate) fn encode_request(r: &Request) -> Result<Vec<u8>, TcmError> {
    encode(r).map_err(|e| TcmError::Malformed(format!("cannot encode a request: {e}")))
}

pub(crate) fn decode_request(bytes: &[u8]) -> Result<Request, String> {
    decode(bytes)
}

/// Encodes an answer; an answer that cannot be encoded becomes a failure
/// that says so.
pub(crate) fn encode_response(r: &Response) -> Vec<u8> {
    match encode(r) {
        Ok(b) => b,
        Err(e) => {
            let f = Response::Failed(Failure::Other(format!("cannot encode the answer: {e}")));
            encode(&f).unwrap_or_else(|_| vec![WIRE_VERSION])
        }
    }
}

pub(crate) fn decode_response(bytes: &[u8]) -> Result<Response, String> {
    decode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, LogId, Vote};

    #[test]
    fn vote_request_bytes_are_fixed() {
        // Exact bytes of one Raft message: a change means openraft changed its
        // serde form and WIRE_VERSION must move.
        let r = Request {
            from: 1,
            to: Some(Target {
                node_id: 2,
                incarnation: "i".to_string(),
            }),
            body: RequestBody::Vote(VoteRequest {
                vote: Vote::new(3, 1),
                last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 7)),
            }),
        };
        let b = encode_request(&r).unwrap();
        assert_eq!(b[0], 1);
        assert_eq!(
            std::str::from_utf8(&b[1..]).unwrap(),
            r#"{"from":1,"to":{"node_id":2,"incarnation":"i"},"body":{"Vote":{"vote":{"leader_id":{"term":3,"node_id":1},"committed":false},"last_log_id":{"leader_id":{"term":2,"node_id":1},"index":7}}}}"#
        );
        assert!(decode_request(&b).is_ok());
    }

    #[test]
    fn other_versions_and_garbage_are_refused() {
        assert!(decode_request(&[]).unwrap_err().contains("empty"));
        assert!(decode_request(&[2, b'{', b'}'])
            .unwrap_err()
            .contains("version 2"));
        assert!(decode_request(&[1, b'x']).is_err());
        assert!(decode_response(&[9]).unwrap_err().contains("version 9"));
    }

    #[test]
    fn failures_round_trip() {
        let e = TcmError::NoQuorum {
            operation: "commit".into(),
            timeout: Duration::from_millis(1500),
            answered: 1,
            voters: 3,
            needed: 2,
        };
        let msg = e.to_string();
        let back = Failure::from_error(&e).into_error(&NodeAddr::from("n1"));
        assert_eq!(back.to_string(), msg);
    }
}
