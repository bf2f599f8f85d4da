//! The values this crate hands to and takes from the node: epochs, node
//! addresses, transformations, and the Raft type configuration that ties them
//! to openraft.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Cursor;

/// The version of the cluster metadata: the number of transformations applied
/// so far. Every committed [`Transformation`] gets the next epoch, on every node
/// alike; Raft's own entries (membership changes, the blank entry a new leader
/// writes) do not bump it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The epoch of the empty metadata, before the first transformation.
    pub const EMPTY: Epoch = Epoch(0);

    /// The epoch after this one.
    pub fn next(self) -> Epoch {
        Epoch(self.0 + 1)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "epoch {}", self.0)
    }
}

/// Where a node's [`MetadataTransport`](crate::MetadataTransport) reaches it,
/// in whatever form the node's messaging understands (`"10.0.0.1:7000"`).
/// This crate only stores and compares it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeAddr(pub String);

impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for NodeAddr {
    fn from(s: &str) -> Self {
        NodeAddr(s.to_string())
    }
}

impl From<String> for NodeAddr {
    fn from(s: String) -> Self {
        NodeAddr(s)
    }
}

impl From<std::net::SocketAddr> for NodeAddr {
    fn from(s: std::net::SocketAddr) -> Self {
        NodeAddr(s.to_string())
    }
}

/// What a transformation changes. The crate does not interpret it; the node's
/// state machine dispatches on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TransformationKind {
    /// A schema change (keyspaces, tables, types, indexes).
    Schema,
    /// A topology change (a node joins, moves, leaves).
    Topology,
}

/// One entry of the cluster metadata log: opaque bytes the node's state
/// machine understands.
///
/// A commit whose outcome is unknown (a timeout, a lost answer) may have been
/// applied, and a retry appends it a second time: a transformation that must
/// not take effect twice should carry an id its state machine checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transformation {
    /// What the payload describes.
    pub kind: TransformationKind,
    /// The change, encoded by the node.
    #[serde(with = "hex_bytes")]
    pub payload: Vec<u8>,
}

impl Transformation {
    /// A schema change.
    pub fn schema(payload: Vec<u8>) -> Self {
        Transformation {
            kind: TransformationKind::Schema,
            payload,
        }
    }

    /// A topology change.
    pub fn topology(payload: Vec<u8>) -> Self {
        Transformation {
            kind: TransformationKind::Topology,
            payload,
        }
    }
}

/// The cluster voters and learners of the metadata log with their addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Nodes that vote: a change commits once a majority of them stored it.
    pub voters: std::collections::BTreeMap<u64, NodeAddr>,
    /// Nodes that receive and apply the log without voting.
    pub learners: std::collections::BTreeMap<u64, NodeAddr>,
}

/// A member as the Raft membership records it: its address and the
/// incarnation of its metadata directory (a random id made when the
/// directory was created). The incarnation lets a node whose directory was
/// wiped be told apart from the member it replaces: a Raft voter that lost its
/// log must not take part as if it still had it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct MemberNode {
    pub addr: NodeAddr,
    pub incarnation: String,
}

/// What applying one log entry produced; the response type of the Raft log.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct ApplyOutcome {
    /// The epoch after the entry (unchanged by Raft's own entries).
    pub epoch: Epoch,
    /// The state machine's answer.
    #[serde(with = "hex_bytes")]
    pub output: Vec<u8>,
    /// The state machine's reason when it rejected the transformation.
    pub rejected: Option<String>,
}

openraft::declare_raft_types!(
    /// The openraft types of the cluster metadata log.
    pub(crate) TypeConfig:
        D = Transformation,
        R = ApplyOutcome,
        NodeId = u64,
        Node = MemberNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// Byte strings as lowercase hex in JSON: half the size of serde's default
/// array of numbers, and readable in a dump.
pub(crate) mod hex_bytes {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn encode(bytes: &[u8]) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            s.push(DIGITS[(b >> 4) as usize] as char);
            s.push(DIGITS[(b & 0xf) as usize] as char);
        }
        s
    }

    pub fn decode(s: &str) -> Result<Vec<u8>, String> {
        fn digit(c: u8) -> Result<u8, String> {
            match c {
                b'0'..=b'9' => Ok(c - b'0'),
                b'a'..=b'f' => Ok(c - b'a' + 10),
                b'A'..=b'F' => Ok(c - b'A' + 10),
                _ => Err(format!("invalid hex digit {:?}", c as char)),
            }
        }
        let b = s.as_bytes();
        if !b.len().is_multiple_of(2) {
            return Err("odd number of hex digits".to_string());
        }
        b.chunks(2)
            .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
            .collect()
    }

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        decode(&s).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        let s = hex_bytes::encode(&all);
        assert_eq!(&s[..8], "00010203");
        assert_eq!(hex_bytes::decode(&s).unwrap(), all);
        assert!(hex_bytes::decode("abc").is_err());
        assert!(hex_bytes::decode("zz").is_err());
    }

    #[test]
    fn transformation_json_is_stable() {
        // Exact bytes: the log on disk and the messages between nodes hold this form.
        let t = Transformation::schema(vec![0xde, 0xad]);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"kind":"Schema","payload":"dead"}"#
        );
        let back: Transformation =
            serde_json::from_str(r#"{"kind":"Topology","payload":"00ff"}"#).unwrap();
        assert_eq!(back, Transformation::topology(vec![0, 255]));
    }
}
