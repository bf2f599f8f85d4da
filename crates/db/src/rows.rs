//! The rows of a partition by clustering: a sorted vector while small (most
//! partitions hold one or a few rows, and a `BTreeMap` node costs about a
//! kilobyte even for one entry), a `BTreeMap` once wide. The vector holds
//! one row in place: a partition of one row (a key-value table's) is copied,
//! read out of a memtable, and freed without an allocation for its rows.

use crate::clustering::ClusteringKey;
use crate::data::Row;
use std::collections::BTreeMap;

/// Rows beyond this count move into a `BTreeMap`.
const SMALL_MAX: usize = 32;

/// The small form: sorted by clustering, one row without an allocation.
pub type SmallRows = smallvec::SmallVec<[(ClusteringKey, Row); 1]>;

#[derive(Debug, Clone)]
pub enum Rows {
    Small(SmallRows),
    Large(BTreeMap<ClusteringKey, Row>),
}

impl Default for Rows {
    fn default() -> Self {
        Rows::Small(SmallRows::new())
    }
}

/// Borrowing iterator over either representation.
pub enum Iter<'a> {
    Small(std::slice::Iter<'a, (ClusteringKey, Row)>),
    Large(std::collections::btree_map::Iter<'a, ClusteringKey, Row>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a ClusteringKey, &'a Row);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next().map(|(k, r)| (k, r)),
            Iter::Large(i) => i.next(),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next_back().map(|(k, r)| (k, r)),
            Iter::Large(i) => i.next_back(),
        }
    }
}

/// Owning iterator over either representation.
pub enum IntoIter {
    Small(<SmallRows as IntoIterator>::IntoIter),
    Large(std::collections::btree_map::IntoIter<ClusteringKey, Row>),
}

impl Iterator for IntoIter {
    type Item = (ClusteringKey, Row);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            IntoIter::Small(i) => i.next(),
            IntoIter::Large(i) => i.next(),
        }
    }
}

impl DoubleEndedIterator for IntoIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            IntoIter::Small(i) => i.next_back(),
            IntoIter::Large(i) => i.next_back(),
        }
    }
}

impl Rows {
    pub fn new() -> Self {
        Self::default()
    }

    /// Frees unused capacity of the small representation.
    pub fn shrink_to_fit(&mut self) {
        if let Rows::Small(v) = self {
            v.shrink_to_fit();
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Rows::Small(v) => v.len(),
            Rows::Large(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, ck: &ClusteringKey) -> Option<&Row> {
        match self {
            Rows::Small(v) => v.binary_search_by(|(k, _)| k.cmp(ck)).ok().map(|i| &v[i].1),
            Rows::Large(m) => m.get(ck),
        }
    }

    pub fn get_mut(&mut self, ck: &ClusteringKey) -> Option<&mut Row> {
        match self {
            Rows::Small(v) => match v.binary_search_by(|(k, _)| k.cmp(ck)) {
                Ok(i) => Some(&mut v[i].1),
                Err(_) => None,
            },
            Rows::Large(m) => m.get_mut(ck),
        }
    }

    /// Inserts or replaces, returning the previous row.
    pub fn insert(&mut self, ck: ClusteringKey, row: Row) -> Option<Row> {
        match self {
            Rows::Small(v) => {
                // appending in clustering order is the common case
                if v.last().map(|(k, _)| *k < ck).unwrap_or(true) {
                    v.push((ck, row));
                } else {
                    match v.binary_search_by(|(k, _)| k.cmp(&ck)) {
                        Ok(i) => return Some(std::mem::replace(&mut v[i].1, row)),
                        Err(i) => v.insert(i, (ck, row)),
                    }
                }
                if v.len() > SMALL_MAX {
                    let m: BTreeMap<ClusteringKey, Row> = std::mem::take(v).into_iter().collect();
                    *self = Rows::Large(m);
                }
                None
            }
            Rows::Large(m) => m.insert(ck, row),
        }
    }

    pub fn retain(&mut self, mut f: impl FnMut(&ClusteringKey, &mut Row) -> bool) {
        match self {
            Rows::Small(v) => v.retain(|(k, r)| f(k, r)),
            Rows::Large(m) => m.retain(|k, r| f(k, r)),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match self {
            Rows::Small(v) => Iter::Small(v.iter()),
            Rows::Large(m) => Iter::Large(m.iter()),
        }
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &ClusteringKey> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Row> {
        self.iter().map(|(_, r)| r)
    }

    /// Rows with `start <= clustering <= end`.
    pub fn range<'a>(
        &'a self,
        start: &ClusteringKey,
        end: &ClusteringKey,
    ) -> Box<dyn Iterator<Item = (&'a ClusteringKey, &'a Row)> + 'a> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        match self {
            Rows::Small(v) => {
                let lo = v.partition_point(|(k, _)| k < start);
                let hi = v.partition_point(|(k, _)| k <= end);
                Box::new(v[lo..hi.max(lo)].iter().map(|(k, r)| (k, r)))
            }
            Rows::Large(m) => Box::new(m.range(start.clone()..=end.clone())),
        }
    }
}

impl IntoIterator for Rows {
    type Item = (ClusteringKey, Row);
    type IntoIter = IntoIter;
    fn into_iter(self) -> IntoIter {
        match self {
            Rows::Small(v) => IntoIter::Small(v.into_iter()),
            Rows::Large(m) => IntoIter::Large(m.into_iter()),
        }
    }
}

impl<'a> IntoIterator for &'a Rows {
    type Item = (&'a ClusteringKey, &'a Row);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<(ClusteringKey, Row)> for Rows {
    fn from_iter<T: IntoIterator<Item = (ClusteringKey, Row)>>(iter: T) -> Self {
        let mut r = Rows::new();
        for (k, v) in iter {
            r.insert(k, v);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clustering::ClusteringComparator;
    use bytes::Bytes;
    use sibyl_types::CqlType;

    #[test]
    fn small_and_large_forms_behave_the_same() {
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        let ck = |i: i32| {
            ClusteringKey::row(vec![Bytes::copy_from_slice(&i.to_be_bytes())], cmp.clone())
        };
        let mut r = Rows::new();
        for i in [5, 1, 3, 9, 7] {
            r.insert(ck(i), Row::default());
        }
        assert!(matches!(r, Rows::Small(_)));
        let order: Vec<i32> = r
            .keys()
            .map(|k| i32::from_be_bytes(k.values[0].as_ref().try_into().expect("4")))
            .collect();
        assert_eq!(order, vec![1, 3, 5, 7, 9]);
        assert_eq!(r.range(&ck(3), &ck(7)).count(), 3);
        for i in 100..200 {
            r.insert(ck(-i), Row::default());
        }
        assert!(matches!(r, Rows::Large(_)));
        assert_eq!(r.len(), 105);
        assert_eq!(r.range(&ck(3), &ck(7)).count(), 3);
        assert!(r.get(&ck(-150)).is_some());
        r.retain(|k, _| k.values[0][0] & 0x80 == 0);
        assert_eq!(r.len(), 5);
        assert_eq!(r.into_iter().rev().count(), 5);
    }
}
