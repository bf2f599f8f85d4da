//! Tokens for a node that joins the ring (Cassandra's `dht.tokenallocator`).
//!
//! - `initial_token` given: those tokens.
//! - Fewer nodes in the data center than its replication factor (or no
//!   replication factor given): evenly spaced tokens, the k-th such node
//!   offset by k/RF of the spacing, so the first RF nodes interleave exactly
//!   (as Cassandra's allocator generates "splits" for the first RF units).
//! - Later nodes: each token splits the currently largest range of the data
//!   center's ring in two, which keeps the ranges' sizes within 2x of each
//!   other. (Cassandra's replication-aware allocator optimises replicated
//!   ownership; this greedy split balances primary ranges, which is the same
//!   when all nodes have as many tokens; the note on the issue says so.)

use crate::token_metadata::TokenMetadata;

/// Evenly spaced tokens with a start offset given as a fraction of the
/// spacing.
fn evenly_spaced(n: usize, offset_fraction: f64) -> Vec<i64> {
    let n = n.max(1);
    let spacing = (u64::MAX as f64 + 1.0) / n as f64;
    (0..n)
        .map(|i| {
            let pos = (i as f64 + offset_fraction) * spacing;
            // from [0, 2^64) onto [i64::MIN, i64::MAX]
            (pos as u64 as i64).wrapping_add(i64::MIN)
        })
        .collect()
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Tokens for a new node of `datacenter` with `num_tokens` tokens, given the
/// ring as it is and the data center's replication factor.
pub fn allocate_tokens(
    ring: &TokenMetadata,
    datacenter: &str,
    num_tokens: usize,
    replication_factor: Option<usize>,
) -> Vec<i64> {
    let mut taken: Vec<i64> = ring
        .tokens()
        .filter(|(_, e)| ring.endpoints[*e].datacenter == datacenter)
        .map(|(t, _)| t)
        .collect();
    let nodes_in_dc = ring
        .endpoints
        .iter()
        .filter(|e| e.datacenter == datacenter)
        .count();
    let rf = replication_factor.unwrap_or(1).max(1);
    if taken.is_empty() || nodes_in_dc < rf {
        // each data center's grid is shifted by a fraction of a step taken
        // from its name, so that two data centers never pick the same tokens
        let shift = (fnv1a(datacenter.as_bytes()) % 1_000_003) as f64 / 1_000_003.0 / rf as f64;
        let mut out = evenly_spaced(num_tokens, nodes_in_dc as f64 / rf as f64 + shift);
        out.retain(|t| !ring.tokens().any(|(r, _)| r == *t));
        return out;
    }
    taken.sort_unstable();
    taken.dedup();
    let mut out = Vec::with_capacity(num_tokens);
    for _ in 0..num_tokens {
        // the largest range (previous token, token], wrapping around
        let n = taken.len();
        let mut best = (0u64, 0usize);
        for i in 0..n {
            let prev = taken[(i + n - 1) % n];
            let size = if n == 1 {
                u64::MAX
            } else {
                taken[i].wrapping_sub(prev) as u64
            };
            if size > best.0 {
                best = (size, i);
            }
        }
        let prev = taken[(best.1 + n - 1) % n];
        let mid = prev.wrapping_add((best.0 / 2) as i64);
        if taken.binary_search(&mid).is_ok() {
            break; // the ring is saturated
        }
        let at = taken.partition_point(|t| *t < mid);
        taken.insert(at, mid);
        out.push(mid);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_metadata::Endpoint;
    use std::net::IpAddr;

    fn node(i: u8, dc: &str) -> Endpoint {
        Endpoint {
            host_id: uuid::Uuid::from_u128(i as u128),
            address: IpAddr::from([127, 0, 0, i]),
            datacenter: dc.into(),
            rack: "rack1".into(),
        }
    }

    /// The largest share of the ring any node owns (primary ranges).
    fn max_share(ring: &TokenMetadata) -> f64 {
        let mut own = vec![0f64; ring.endpoints.len()];
        let toks: Vec<(i64, usize)> = ring.tokens().collect();
        for (i, (t, e)) in toks.iter().enumerate() {
            let prev = toks[(i + toks.len() - 1) % toks.len()].0;
            own[*e] += t.wrapping_sub(prev) as u64 as f64;
        }
        own.iter().cloned().fold(0.0, f64::max) / (u64::MAX as f64)
    }

    #[test]
    fn the_first_nodes_interleave_and_later_ones_split_the_largest_ranges() {
        let mut ring = TokenMetadata::new();
        for i in 1..=3u8 {
            let t = allocate_tokens(&ring, "dc1", 16, Some(3));
            assert_eq!(t.len(), 16);
            ring.add(node(i, "dc1"), &t);
        }
        // three nodes of 16 evenly interleaved tokens: a third each
        assert!(
            (max_share(&ring) - 1.0 / 3.0).abs() < 1e-6,
            "{}",
            max_share(&ring)
        );
        let t = allocate_tokens(&ring, "dc1", 16, Some(3));
        ring.add(node(4, "dc1"), &t);
        assert!(max_share(&ring) < 0.34, "{}", max_share(&ring));
        for i in 5..=8u8 {
            let t = allocate_tokens(&ring, "dc1", 16, Some(3));
            assert_eq!(t.len(), 16);
            ring.add(node(i, "dc1"), &t);
        }
        assert!(max_share(&ring) < 2.0 / 8.0, "{}", max_share(&ring));
        // tokens are all distinct
        let mut all: Vec<i64> = ring.tokens().map(|(t, _)| t).collect();
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n);
    }

    #[test]
    fn a_new_data_center_starts_evenly_spaced() {
        let mut ring = TokenMetadata::new();
        ring.add(node(1, "dc1"), &allocate_tokens(&ring, "dc1", 4, Some(1)));
        let t = allocate_tokens(&ring, "dc2", 4, Some(1));
        assert_eq!(t.len(), 4);
        assert!(t.iter().all(|x| !ring.tokens().any(|(r, _)| r == *x)));
        // evenly spaced: equal steps
        let steps: Vec<i64> = t.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
        assert!(
            steps.iter().all(|s| (s - steps[0]).abs() < 1 << 20),
            "{steps:?}"
        );
        assert_eq!(evenly_spaced(2, 0.0), vec![i64::MIN, 0]);
    }
}
