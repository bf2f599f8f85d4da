//! Counter contexts: the value of a counter cell, as Cassandra's
//! `CounterContext` global shards.
//!
//! A counter's value is the sum of shards, one per counter id (the host id of
//! the replica that led the increments). Each shard carries a logical clock;
//! two versions of the same shard reconcile to the higher clock, so merging
//! contexts is commutative, associative and idempotent, and replicas converge
//! whatever order they see updates in. The leader of an increment reads its
//! own shard, and writes `(clock + 1, count + delta)`.
//!
//! Layout (Sibyl's, carried in a counter column, tag 2 of the row format):
//! shards of 32 bytes each, sorted by counter id: 16-byte id, big-endian
//! i64 clock, big-endian i64 count.
//!
//! Before the leader step, a counter *update* carries its delta instead: an
//! 8-byte big-endian i64 ([`delta`]). It never reaches a memtable.

use bytes::{BufMut, Bytes, BytesMut};

pub const SHARD_SIZE: usize = 32;

/// One shard of a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub id: [u8; 16],
    pub clock: i64,
    pub count: i64,
}

/// An update's delta, before the leader turns it into a shard.
pub fn delta(v: i64) -> Bytes {
    Bytes::copy_from_slice(&v.to_be_bytes())
}

/// The delta of an update cell, if that is what `v` holds.
pub fn as_delta(v: &[u8]) -> Option<i64> {
    (v.len() == 8).then(|| i64::from_be_bytes(v.try_into().unwrap_or([0; 8])))
}

pub fn is_context(v: &[u8]) -> bool {
    v.len().is_multiple_of(SHARD_SIZE)
}

pub fn shards(ctx: &[u8]) -> impl Iterator<Item = Shard> + '_ {
    ctx.chunks_exact(SHARD_SIZE).map(|c| {
        let mut id = [0u8; 16];
        id.copy_from_slice(&c[..16]);
        Shard {
            id,
            clock: i64::from_be_bytes(c[16..24].try_into().unwrap_or([0; 8])),
            count: i64::from_be_bytes(c[24..32].try_into().unwrap_or([0; 8])),
        }
    })
}

pub fn encode(shards: &[Shard]) -> Bytes {
    let mut b = BytesMut::with_capacity(shards.len() * SHARD_SIZE);
    for s in shards {
        b.put_slice(&s.id);
        b.put_i64(s.clock);
        b.put_i64(s.count);
    }
    b.freeze()
}

/// The counter's value: the sum of its shards (wrapping, as Java's long).
pub fn total(ctx: &[u8]) -> i64 {
    if let Some(d) = (!is_context(ctx)).then(|| as_delta(ctx)).flatten() {
        return d;
    }
    shards(ctx).fold(0i64, |a, s| a.wrapping_add(s.count))
}

/// The shard of counter id `id`, if present.
pub fn shard_of(ctx: &[u8], id: &[u8; 16]) -> Option<Shard> {
    shards(ctx).find(|s| &s.id == id)
}

/// Merges two contexts: the union of shards, the higher clock winning for a
/// shared id (on equal clocks, the greater count, as Cassandra resolves that
/// inconsistency).
pub fn merge(a: &[u8], b: &[u8]) -> Bytes {
    let (xa, xb): (Vec<Shard>, Vec<Shard>) = (shards(a).collect(), shards(b).collect());
    let mut out = Vec::with_capacity(xa.len().max(xb.len()));
    let (mut i, mut j) = (0, 0);
    while i < xa.len() || j < xb.len() {
        match (xa.get(i), xb.get(j)) {
            (Some(x), Some(y)) if x.id == y.id => {
                out.push(if (y.clock, y.count) > (x.clock, x.count) {
                    *y
                } else {
                    *x
                });
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.id < y.id => {
                out.push(*x);
                i += 1;
            }
            (Some(_), Some(y)) => {
                out.push(*y);
                j += 1;
            }
            (Some(x), None) => {
                out.push(*x);
                i += 1;
            }
            (None, Some(y)) => {
                out.push(*y);
                j += 1;
            }
            (None, None) => break,
        }
    }
    encode(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_is_commutative_idempotent_and_sums_ids() {
        let a = [1u8; 16];
        let b = [2u8; 16];
        let c1 = encode(&[Shard {
            id: a,
            clock: 1,
            count: 5,
        }]);
        let c2 = encode(&[Shard {
            id: a,
            clock: 2,
            count: 8,
        }]);
        assert_eq!(total(&c2), 8);
        let d1 = encode(&[Shard {
            id: b,
            clock: 1,
            count: -2,
        }]);
        let m1 = merge(&c1, &d1);
        let m2 = merge(&d1, &merge(&c2, &c1));
        assert_eq!(total(&m1), 3);
        assert_eq!(total(&m2), 6);
        assert_eq!(merge(&m2, &m2), m2);
        assert_eq!(merge(&c2, &d1), merge(&d1, &c2));
        assert_eq!(shard_of(&m2, &a).map(|s| s.clock), Some(2));
    }

    #[test]
    fn delta_is_not_a_context() {
        let d = delta(-7);
        assert!(!is_context(&d));
        assert_eq!(as_delta(&d), Some(-7));
        assert_eq!(total(&d), -7);
    }
}
