//! Clustering keys and slice bounds, ordered by the table's comparator
//! (Cassandra's `ClusteringComparator` and `ClusteringPrefix`).

use bytes::Bytes;
use sibyl_types::CqlType;
use std::cmp::Ordering;
use std::sync::Arc;

/// The clustering column types of a table and whether each is reversed (DESC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusteringComparator {
    pub types: Vec<(CqlType, bool)>,
}

impl ClusteringComparator {
    pub fn new(types: Vec<(CqlType, bool)>) -> Arc<Self> {
        Arc::new(ClusteringComparator { types })
    }

    /// Compares two (possibly partial) prefixes component by component;
    /// a shorter prefix that matches is `Equal` here; bounds decide the rest.
    pub fn compare_prefix(&self, a: &[Bytes], b: &[Bytes]) -> Ordering {
        for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
            let ord = match self.types.get(i) {
                Some((t, reversed)) => {
                    let o = t.compare(x, y);
                    if *reversed {
                        o.reverse()
                    } else {
                        o
                    }
                }
                None => x.cmp(y),
            };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }
}

/// What a clustering prefix stands for: a row, or one side of a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoundKind {
    /// A full clustering of a row.
    Row,
    /// Sorts before every clustering it prefixes.
    StartInclusive,
    /// Sorts after every clustering it prefixes.
    StartExclusive,
    /// Sorts after every clustering it prefixes.
    EndInclusive,
    /// Sorts before every clustering it prefixes.
    EndExclusive,
}

impl BoundKind {
    /// Where this prefix sorts relative to longer clusterings it prefixes: -1 before, 1 after.
    fn prefix_side(self) -> i8 {
        match self {
            BoundKind::Row => 0,
            BoundKind::StartInclusive | BoundKind::EndExclusive => -1,
            BoundKind::StartExclusive | BoundKind::EndInclusive => 1,
        }
    }

    pub fn is_start(self) -> bool {
        matches!(self, BoundKind::StartInclusive | BoundKind::StartExclusive)
    }

    pub fn is_inclusive(self) -> bool {
        matches!(
            self,
            BoundKind::StartInclusive | BoundKind::EndInclusive | BoundKind::Row
        )
    }
}

/// A clustering prefix with its comparator, so it can key a `BTreeMap`.
#[derive(Debug, Clone)]
pub struct ClusteringKey {
    pub values: Vec<Bytes>,
    pub kind: BoundKind,
    pub comparator: Arc<ClusteringComparator>,
}

/// A slice bound; an empty prefix is the start or end of the partition.
pub type Bound = ClusteringKey;

impl ClusteringKey {
    pub fn row(values: Vec<Bytes>, comparator: Arc<ClusteringComparator>) -> Self {
        ClusteringKey {
            values,
            kind: BoundKind::Row,
            comparator,
        }
    }

    pub fn bound(
        values: Vec<Bytes>,
        kind: BoundKind,
        comparator: Arc<ClusteringComparator>,
    ) -> Self {
        ClusteringKey {
            values,
            kind,
            comparator,
        }
    }

    /// The bound before every row.
    pub fn bottom(comparator: Arc<ClusteringComparator>) -> Self {
        ClusteringKey {
            values: Vec::new(),
            kind: BoundKind::StartInclusive,
            comparator,
        }
    }

    /// The bound after every row.
    pub fn top(comparator: Arc<ClusteringComparator>) -> Self {
        ClusteringKey {
            values: Vec::new(),
            kind: BoundKind::EndInclusive,
            comparator,
        }
    }
}

impl PartialEq for ClusteringKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ClusteringKey {}

impl PartialOrd for ClusteringKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ClusteringKey {
    fn cmp(&self, other: &Self) -> Ordering {
        let ord = self.comparator.compare_prefix(&self.values, &other.values);
        if ord != Ordering::Equal {
            return ord;
        }
        let (la, lb) = (self.values.len(), other.values.len());
        let side_a = self.kind.prefix_side();
        let side_b = other.kind.prefix_side();
        match la.cmp(&lb) {
            Ordering::Less => {
                // self is a prefix of other
                if side_a < 0 {
                    Ordering::Less
                } else if side_a > 0 {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            Ordering::Greater => {
                if side_b < 0 {
                    Ordering::Greater
                } else if side_b > 0 {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            Ordering::Equal => side_a.cmp(&side_b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(v: i32) -> Bytes {
        Bytes::copy_from_slice(&v.to_be_bytes())
    }

    #[test]
    fn bounds_order_around_the_rows_they_prefix() {
        let c = ClusteringComparator::new(vec![(CqlType::Int, false), (CqlType::Int, true)]);
        let row = |a, b| ClusteringKey::row(vec![int(a), int(b)], c.clone());
        let b = |a, k| ClusteringKey::bound(vec![int(a)], k, c.clone());
        assert!(row(1, 5) < row(1, 2), "second column is DESC");
        assert!(row(-1, 0) < row(1, 0), "ints compare signed");
        assert!(b(1, BoundKind::StartInclusive) < row(1, 9));
        assert!(b(1, BoundKind::EndInclusive) > row(1, 0));
        assert!(b(1, BoundKind::StartExclusive) > row(1, 0));
        assert!(b(1, BoundKind::StartExclusive) < row(2, 9));
        assert!(ClusteringKey::bottom(c.clone()) < row(i32::MIN, 0));
        assert!(ClusteringKey::top(c.clone()) > row(i32::MAX, 0));
    }
}
