//! TokenMetadata: the token ring (each endpoint's vnode tokens) and the
//! replication strategies that turn a token into its natural replicas
//! (Cassandra's `locator`). The single node is a ring of one.

use sibyl_schema::ReplicationStrategy;
use std::net::IpAddr;

/// A node of the ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host_id: uuid::Uuid,
    pub address: IpAddr,
    pub datacenter: String,
    pub rack: String,
}

/// Tokens and the endpoints that own them.
#[derive(Debug, Clone, Default)]
pub struct TokenMetadata {
    pub endpoints: Vec<Endpoint>,
    /// Sorted by token.
    ring: Vec<(i64, usize)>,
}

/// The replicas of a token, as indexes into [`TokenMetadata::endpoints`]:
/// on the stack up to four (every write and read asks for them).
pub type Replicas = smallvec::SmallVec<[usize; 4]>;

impl TokenMetadata {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an endpoint with its tokens.
    pub fn add(&mut self, e: Endpoint, tokens: &[i64]) -> usize {
        let idx = self.endpoints.len();
        self.endpoints.push(e);
        self.ring.extend(tokens.iter().map(|t| (*t, idx)));
        self.ring.sort();
        idx
    }

    /// Endpoints of the ring walked clockwise from the first token >= `token`.
    fn walk(&self, token: i64) -> impl Iterator<Item = usize> + '_ {
        let start = self.ring.partition_point(|(t, _)| *t < token);
        let n = self.ring.len();
        (0..n).map(move |i| self.ring[(start + i) % n].1)
    }

    /// The natural replicas of `token` under `strategy`, in the order
    /// Cassandra lists them. `LocalStrategy` has no ring placement: its only
    /// replica is whichever node holds the data, so it gives none here and
    /// the coordinator serves it locally.
    pub fn replicas(&self, token: i64, strategy: &ReplicationStrategy) -> Replicas {
        match strategy {
            ReplicationStrategy::Local => Replicas::new(),
            ReplicationStrategy::Everywhere => (0..self.endpoints.len()).collect(),
            ReplicationStrategy::NetworkTopology { datacenters } => {
                let mut out = Replicas::with_capacity(
                    datacenters
                        .values()
                        .sum::<usize>()
                        .min(self.endpoints.len()),
                );
                for (dc, rf) in datacenters {
                    let rf = *rf;
                    let mut picked: Vec<usize> = Vec::new();
                    let mut racks = std::collections::HashSet::new();
                    let in_dc = || {
                        self.walk(token)
                            .filter(|e| &self.endpoints[*e].datacenter == dc)
                    };
                    // first distinct racks, then any endpoint, as NetworkTopologyStrategy does
                    for e in in_dc() {
                        if picked.len() >= rf {
                            break;
                        }
                        if !picked.contains(&e) && racks.insert(&self.endpoints[e].rack) {
                            picked.push(e);
                        }
                    }
                    for e in in_dc() {
                        if picked.len() >= rf {
                            break;
                        }
                        if !picked.contains(&e) {
                            picked.push(e);
                        }
                    }
                    out.extend(picked);
                }
                out
            }
            ReplicationStrategy::Simple { replication_factor } => {
                let mut out =
                    Replicas::with_capacity((*replication_factor).min(self.endpoints.len()));
                for e in self.walk(token) {
                    if out.len() >= *replication_factor {
                        break;
                    }
                    if !out.contains(&e) {
                        out.push(e);
                    }
                }
                out
            }
        }
    }

    /// Cuts the token range `[start, end]` at the ring's tokens: pieces in
    /// token order, each inside one vnode range `(previous token, token]`,
    /// so that all of a piece has the same replicas (those of its last token).
    pub fn split(&self, start: i64, end: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        let mut lo = start;
        for (t, _) in &self.ring {
            if *t < lo || *t >= end {
                continue;
            }
            out.push((lo, *t));
            lo = *t + 1;
        }
        if lo <= end {
            out.push((lo, end));
        }
        out
    }

    /// Every token with the index of its endpoint, in token order.
    pub fn tokens(&self) -> impl Iterator<Item = (i64, usize)> + '_ {
        self.ring.iter().copied()
    }

    /// The tokens of one endpoint, in order.
    pub fn tokens_of(&self, endpoint: usize) -> Vec<i64> {
        self.ring
            .iter()
            .filter(|(_, e)| *e == endpoint)
            .map(|(t, _)| *t)
            .collect()
    }

    /// The endpoint with this address.
    pub fn endpoint_of(&self, address: IpAddr) -> Option<usize> {
        self.endpoints.iter().position(|e| e.address == address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ks(pairs: &[(&str, &str)]) -> ReplicationStrategy {
        ReplicationStrategy::parse(
            &pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    fn ep(i: u8, dc: &str, rack: &str) -> Endpoint {
        Endpoint {
            host_id: uuid::Uuid::from_u128(i as u128),
            address: IpAddr::from([127, 0, 0, i]),
            datacenter: dc.into(),
            rack: rack.into(),
        }
    }

    #[test]
    fn simple_strategy_walks_the_ring_clockwise() {
        let mut tm = TokenMetadata::new();
        tm.add(ep(1, "dc1", "r1"), &[-100, 100]);
        tm.add(ep(2, "dc1", "r1"), &[0]);
        tm.add(ep(3, "dc1", "r1"), &[50]);
        let rf2 = ks(&[
            ("class", "org.apache.cassandra.locator.SimpleStrategy"),
            ("replication_factor", "2"),
        ]);
        assert_eq!(tm.replicas(-5, &rf2).as_slice(), [1, 2]);
        assert_eq!(tm.replicas(60, &rf2).as_slice(), [0, 1]);
        assert_eq!(tm.replicas(101, &rf2).as_slice(), [0, 1], "wraps around");
    }

    #[test]
    fn network_topology_strategy_counts_per_datacenter_and_prefers_racks() {
        let mut tm = TokenMetadata::new();
        tm.add(ep(1, "dc1", "r1"), &[0]);
        tm.add(ep(2, "dc1", "r1"), &[10]);
        tm.add(ep(3, "dc1", "r2"), &[20]);
        tm.add(ep(4, "dc2", "r1"), &[30]);
        let k = ks(&[
            (
                "class",
                "org.apache.cassandra.locator.NetworkTopologyStrategy",
            ),
            ("dc1", "2"),
            ("dc2", "1"),
        ]);
        let r = tm.replicas(-1, &k);
        assert_eq!(
            r.as_slice(),
            [0, 2, 3],
            "dc1 takes racks r1 and r2 before a second r1 node"
        );
    }

    #[test]
    fn a_token_range_is_cut_at_the_ring_tokens() {
        let mut tm = TokenMetadata::new();
        tm.add(ep(1, "dc1", "r1"), &[-100, 100]);
        tm.add(ep(2, "dc1", "r1"), &[0]);
        assert_eq!(
            tm.split(i64::MIN, i64::MAX),
            vec![(i64::MIN, -100), (-99, 0), (1, 100), (101, i64::MAX)]
        );
        assert_eq!(tm.split(-50, 50), vec![(-50, 0), (1, 50)]);
        assert_eq!(tm.split(0, 0), vec![(0, 0)]);
    }

    #[test]
    fn a_ring_of_one_replicates_to_itself() {
        let mut tm = TokenMetadata::new();
        tm.add(ep(1, "datacenter1", "rack1"), &[5, 500]);
        let k = ks(&[
            ("class", "org.apache.cassandra.locator.SimpleStrategy"),
            ("replication_factor", "3"),
        ]);
        assert_eq!(tm.replicas(i64::MIN, &k).as_slice(), [0]);
        let other_dc = ks(&[
            (
                "class",
                "org.apache.cassandra.locator.NetworkTopologyStrategy",
            ),
            ("dc9", "3"),
        ]);
        assert!(tm.replicas(0, &other_dc).is_empty());
    }
}
