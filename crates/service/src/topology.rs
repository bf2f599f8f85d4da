//! Range movements: which token ranges each node gains when the ring changes
//! from one set of owners to another (a node joins, leaves or is removed),
//! and the stream plans that move them (Cassandra's `RangeStreamer` and
//! `StorageService.getChangedRangesForLeaving`).
//!
//! Ranges are cut at the tokens of both rings, so that every piece has one
//! set of replicas in each; a node that is a replica of a piece in the new
//! ring and not in the old one gains it.

use crate::streaming::inclusive_ranges;
use sibyl_cluster::messaging::StreamPlan;
use sibyl_cluster::TokenMetadata;
use sibyl_schema::ReplicationStrategy;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// A piece of the ring `(start, end]` that `target` gains, with the nodes
/// that replicate it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Movement {
    pub target: IpAddr,
    pub range: (i64, i64),
    pub current: Vec<IpAddr>,
}

/// The ring's pieces `(previous token, token]` over the tokens of both
/// rings, in token order; the first wraps around from the last token.
pub fn pieces(a: &TokenMetadata, b: &TokenMetadata) -> Vec<(i64, i64)> {
    let mut tokens: Vec<i64> = a.tokens().chain(b.tokens()).map(|(t, _)| t).collect();
    tokens.sort_unstable();
    tokens.dedup();
    let Some(last) = tokens.last().copied() else {
        return Vec::new();
    };
    let mut prev = last;
    tokens
        .into_iter()
        .map(|t| {
            let r = (prev, t);
            prev = t;
            r
        })
        .collect()
}

fn addresses(ring: &TokenMetadata, token: i64, strategy: &ReplicationStrategy) -> Vec<IpAddr> {
    ring.replicas(token, strategy)
        .into_iter()
        .map(|i| ring.endpoints[i].address)
        .collect()
}

/// Every piece some node gains from `current` to `future` under `strategy`.
pub fn movements(
    current: &TokenMetadata,
    future: &TokenMetadata,
    strategy: &ReplicationStrategy,
) -> Vec<Movement> {
    if *strategy == ReplicationStrategy::Local {
        return Vec::new();
    }
    let mut out = Vec::new();
    for range in pieces(current, future) {
        let now = addresses(current, range.1, strategy);
        for target in addresses(future, range.1, strategy) {
            if !now.contains(&target) {
                out.push(Movement {
                    target,
                    range,
                    current: now.clone(),
                });
            }
        }
    }
    out
}

/// The ranges each node replicates under `strategy`: `(start, end]` pieces
/// with their replicas.
pub fn replicated_ranges(
    ring: &TokenMetadata,
    strategy: &ReplicationStrategy,
) -> Vec<((i64, i64), Vec<IpAddr>)> {
    pieces(ring, ring)
        .into_iter()
        .map(|r| (r, addresses(ring, r.1, strategy)))
        .collect()
}

/// The primary ranges of `node`: the pieces ending at its own tokens
/// (`nodetool repair -pr`).
pub fn primary_ranges(ring: &TokenMetadata, node: IpAddr) -> Vec<(i64, i64)> {
    let Some(i) = ring.endpoint_of(node) else {
        return Vec::new();
    };
    pieces(ring, ring)
        .into_iter()
        .filter(|(_, end)| ring.tokens().any(|(t, e)| t == *end && e == i))
        .collect()
}

/// Groups movements into one stream plan per (target, source): `source_of`
/// picks the node a movement streams from (None: no source, skipped and
/// returned). Each table of the keyspace gets the same ranges.
pub fn stream_plans(
    operation: &str,
    moves: &[(Vec<uuid::Uuid>, Movement)],
    source_of: impl Fn(&Movement) -> Option<IpAddr>,
) -> (Vec<(IpAddr, StreamPlan)>, Vec<Movement>) {
    let mut by_pair: BTreeMap<(IpAddr, IpAddr), BTreeMap<uuid::Uuid, Vec<(i64, i64)>>> =
        BTreeMap::new();
    let mut unsourced = Vec::new();
    for (tables, m) in moves {
        let Some(source) = source_of(m) else {
            unsourced.push(m.clone());
            continue;
        };
        let entry = by_pair.entry((m.target, source)).or_default();
        for t in tables {
            entry
                .entry(*t)
                .or_default()
                .extend(inclusive_ranges(m.range.0, m.range.1));
        }
    }
    let plans = by_pair
        .into_iter()
        .map(|((target, source), tables)| {
            (
                target,
                StreamPlan {
                    // time-based, as Cassandra's stream plan ids
                    id: sibyl_types::timeuuid::now_timeuuid(),
                    operation: operation.to_string(),
                    source,
                    pending: None,
                    tables: tables
                        .into_iter()
                        .map(|(t, mut r)| {
                            r.sort_unstable();
                            (t, merge_adjacent(r))
                        })
                        .collect(),
                },
            )
        })
        .collect();
    (plans, unsourced)
}

/// Joins inclusive ranges that touch (sorted input).
pub(crate) fn merge_adjacent(ranges: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some((_, h)) if *h != i64::MAX && *h + 1 >= lo => *h = (*h).max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sibyl_cluster::Endpoint;

    fn ring(nodes: &[(u8, &[i64])]) -> TokenMetadata {
        let mut r = TokenMetadata::new();
        for (n, tokens) in nodes {
            r.add(
                Endpoint {
                    host_id: uuid::Uuid::from_u128(*n as u128),
                    address: IpAddr::from([127, 0, 0, *n]),
                    datacenter: "dc1".into(),
                    rack: "rack1".into(),
                },
                tokens,
            );
        }
        r
    }

    fn a(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[test]
    fn a_joining_node_gains_the_ranges_it_will_replicate() {
        let simple = |rf| ReplicationStrategy::Simple {
            replication_factor: rf,
        };
        let before = ring(&[(1, &[0]), (2, &[100]), (3, &[200])]);
        let after = ring(&[(1, &[0]), (2, &[100]), (3, &[200]), (4, &[50])]);
        // RF 1: node4 takes (0, 50] from node2
        let m = movements(&before, &after, &simple(1));
        assert_eq!(
            m,
            vec![Movement {
                target: a(4),
                range: (0, 50),
                current: vec![a(2)],
            }]
        );
        // RF 2: (0, 50] (was node2, node3) and (200, 0] (was node1, node2)
        let m = movements(&before, &after, &simple(2));
        let got: Vec<_> = m.iter().map(|m| (m.target, m.range)).collect();
        assert_eq!(got, vec![(a(4), (200, 0)), (a(4), (0, 50))]);
        // the node that loses (50, 100] to node4 as a replica under RF 2 is
        // node3; it gains nothing
        assert!(m.iter().all(|m| m.target == a(4)));
        // leaving: node4 goes away again, others gain its ranges back
        let back = movements(&after, &before, &simple(2));
        let got: Vec<_> = back.iter().map(|m| (m.target, m.range)).collect();
        assert_eq!(got, vec![(a(2), (200, 0)), (a(3), (0, 50))]);
    }

    #[test]
    fn plans_group_ranges_by_target_and_source() {
        let t = uuid::Uuid::from_u128(7);
        let moves = vec![
            (
                vec![t],
                Movement {
                    target: a(4),
                    range: (0, 50),
                    current: vec![a(2), a(3)],
                },
            ),
            (
                vec![t],
                Movement {
                    target: a(4),
                    range: (200, 0),
                    current: vec![a(1), a(2)],
                },
            ),
        ];
        let (plans, unsourced) = stream_plans("Bootstrap", &moves, |m| m.current.first().copied());
        assert!(unsourced.is_empty());
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[0].0, a(4));
        assert_eq!(plans[0].1.source, a(1));
        assert_eq!(
            plans[0].1.tables,
            vec![(t, vec![(i64::MIN, 0), (201, i64::MAX)])]
        );
        assert_eq!(plans[1].1.source, a(2));
        assert_eq!(plans[1].1.tables, vec![(t, vec![(1, 50)])]);
        let r = ring(&[(1, &[0, 300]), (2, &[100])]);
        assert_eq!(primary_ranges(&r, a(1)), vec![(300, 0), (100, 300)]);
    }
}
