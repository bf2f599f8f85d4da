//! Paxos' values (Cassandra's `service.paxos.Ballot` and `Commit`): ballots
//! ordered by time, and proposals, each a ballot with the partition update
//! it carries.

use crate::serde::{encode_mutation, Reader};
use crate::{DecodeError, Mutation};
use std::cmp::Ordering;

/// A Paxos ballot: a time-based UUID, ordered by its time, then by its other
/// bytes (two coordinators never make the same one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ballot(pub uuid::Uuid);

impl Ballot {
    /// The ballot before every other.
    pub const NONE: Ballot = Ballot(uuid::Uuid::nil());

    /// This process's ballot at `micros`.
    pub fn at(micros: i64) -> Ballot {
        Ballot(sibyl_types::timeuuid::timeuuid_at_micros(micros))
    }

    /// Its time in Unix microseconds: the timestamp of what it commits.
    pub fn micros(&self) -> i64 {
        if self.is_none() {
            return i64::MIN;
        }
        sibyl_types::timeuuid::timeuuid_timestamp_micros(self.0.as_bytes())
    }

    pub fn is_none(&self) -> bool {
        self.0.is_nil()
    }
}

impl Ord for Ballot {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.is_none(), other.is_none()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => sibyl_types::timeuuid::timeuuid_ticks(self.0.as_bytes())
                .cmp(&sibyl_types::timeuuid::timeuuid_ticks(other.0.as_bytes()))
                .then_with(|| self.0.as_bytes()[8..].cmp(&other.0.as_bytes()[8..])),
        }
    }
}

impl PartialOrd for Ballot {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A proposal: a ballot and the update of one partition it carries (empty
/// for a round that only reads).
#[derive(Debug, Clone)]
pub struct Commit {
    pub ballot: Ballot,
    pub update: Mutation,
}

impl Commit {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.ballot.0.as_bytes());
        encode_mutation(&self.update, out);
    }
}

/// A replica's answer to a prepare (Cassandra's `PrepareResponse`).
#[derive(Debug, Clone)]
pub struct Promise {
    /// Whether the replica promised the ballot.
    pub promised: bool,
    /// The highest ballot the replica had promised before (on a refusal,
    /// the one to beat).
    pub most_recent_promise: Ballot,
    /// The proposal it accepted last and has not seen committed.
    pub accepted: Option<Commit>,
    /// The last proposal it committed.
    pub committed: Option<Commit>,
}

/// Reads a ballot written by [`Commit::encode`] or as 16 raw bytes.
pub fn read_ballot(r: &mut Reader) -> Result<Ballot, DecodeError> {
    let b = r.take(16)?;
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ok(Ballot(uuid::Uuid::from_bytes(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ballots_order_by_time_and_none_comes_first() {
        let a = Ballot::at(1_000_000);
        let b = Ballot::at(1_000_001);
        assert!(a < b && Ballot::NONE < a);
        assert_eq!(a.micros(), 1_000_000);
        assert_eq!(Ballot::NONE.micros(), i64::MIN);
        assert_eq!(a.cmp(&a), Ordering::Equal);
    }
}
