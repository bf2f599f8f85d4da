//! The partition data model: cells, rows, tombstones, partitions and
//! mutations, with Cassandra's reconciliation rules (last write wins per cell;
//! on equal timestamps a tombstone wins, then the later expiry, then the
//! greater value).

use crate::clustering::{ClusteringComparator, ClusteringKey};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `local_deletion_time` meaning "never".
pub const NO_DELETION_TIME: i32 = i32::MAX;

/// A deletion: everything with a timestamp <= `marked_for_delete_at` is shadowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeletionTime {
    pub marked_for_delete_at: i64,
    /// Seconds since epoch when the deletion was made (for gc_grace_seconds).
    pub local_deletion_time: i32,
}

impl DeletionTime {
    pub const LIVE: DeletionTime = DeletionTime {
        marked_for_delete_at: i64::MIN,
        local_deletion_time: NO_DELETION_TIME,
    };

    pub fn is_live(&self) -> bool {
        self.marked_for_delete_at == i64::MIN
    }

    pub fn deletes(&self, timestamp: i64) -> bool {
        timestamp <= self.marked_for_delete_at
    }

    /// The deletion that wins of two.
    pub fn supersedes(&self, other: &DeletionTime) -> bool {
        self.marked_for_delete_at > other.marked_for_delete_at
            || (self.marked_for_delete_at == other.marked_for_delete_at
                && self.local_deletion_time > other.local_deletion_time)
    }

    pub fn merge(&mut self, other: &DeletionTime) {
        if other.supersedes(self) {
            *self = *other;
        }
    }
}

/// One cell. `value: None` is a tombstone; `ttl > 0` makes it expiring, with
/// `local_deletion_time` its expiry (seconds since epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub timestamp: i64,
    pub ttl: i32,
    pub local_deletion_time: i32,
    pub value: Option<Bytes>,
}

impl Cell {
    pub fn live(timestamp: i64, value: Bytes) -> Cell {
        Cell {
            timestamp,
            ttl: 0,
            local_deletion_time: NO_DELETION_TIME,
            value: Some(value),
        }
    }

    pub fn expiring(timestamp: i64, ttl: i32, now: i32, value: Bytes) -> Cell {
        Cell {
            timestamp,
            ttl,
            local_deletion_time: now.saturating_add(ttl),
            value: Some(value),
        }
    }

    pub fn tombstone(timestamp: i64, now: i32) -> Cell {
        Cell {
            timestamp,
            ttl: 0,
            local_deletion_time: now,
            value: None,
        }
    }

    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }

    pub fn is_expiring(&self) -> bool {
        self.ttl > 0
    }

    /// Live at `now`: not a tombstone and not expired.
    pub fn is_live(&self, now: i32) -> bool {
        self.value.is_some() && (self.ttl == 0 || now < self.local_deletion_time)
    }

    /// Remaining TTL in seconds at `now`, if expiring.
    pub fn remaining_ttl(&self, now: i32) -> Option<i32> {
        if self.ttl > 0 {
            Some((self.local_deletion_time - now).max(0))
        } else {
            None
        }
    }

    /// Cassandra's `Cells.reconcile`: which of two versions of a cell wins.
    pub fn reconcile<'a>(a: &'a Cell, b: &'a Cell, now: i32) -> &'a Cell {
        if a.timestamp != b.timestamp {
            return if a.timestamp > b.timestamp { a } else { b };
        }
        let (la, lb) = (a.is_live(now), b.is_live(now));
        if la != lb {
            return if la { b } else { a };
        }
        if !la {
            // both dead: the later deletion time wins, a tombstone over an expired cell
            if a.is_tombstone() != b.is_tombstone() {
                return if a.is_tombstone() { a } else { b };
            }
            return if a.local_deletion_time >= b.local_deletion_time {
                a
            } else {
                b
            };
        }
        if a.is_expiring() != b.is_expiring()
            || (a.is_expiring() && a.local_deletion_time != b.local_deletion_time)
        {
            return if a.local_deletion_time >= b.local_deletion_time {
                a
            } else {
                b
            };
        }
        match (&a.value, &b.value) {
            (Some(x), Some(y)) if y > x => b,
            _ => a,
        }
    }

    /// Cassandra's `resolveCounter`: a tombstone always wins, whatever the
    /// timestamps; otherwise the contexts merge and the later timestamp is
    /// kept. `None` when `a` already is the result.
    pub fn reconcile_counter(a: &Cell, b: Cell) -> Option<Cell> {
        match (&a.value, &b.value) {
            (None, _) => None,
            (Some(_), None) => Some(b),
            (Some(x), Some(y)) => {
                let merged = crate::counter::merge(x, y);
                if merged == x && a.timestamp >= b.timestamp {
                    return None;
                }
                Some(Cell::live(a.timestamp.max(b.timestamp), merged))
            }
        }
    }
}

/// The primary key liveness of a row written by INSERT (the "row marker").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LivenessInfo {
    pub timestamp: i64,
    pub ttl: i32,
    pub local_expiration_time: i32,
}

impl LivenessInfo {
    pub fn is_live(&self, now: i32) -> bool {
        self.ttl == 0 || now < self.local_expiration_time
    }

    fn supersedes(&self, other: &LivenessInfo) -> bool {
        if self.timestamp != other.timestamp {
            return self.timestamp > other.timestamp;
        }
        self.local_expiration_time > other.local_expiration_time
    }
}

/// Data of one column in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnData {
    Simple(Cell),
    /// A non-frozen collection or UDT: a deletion of the whole collection and
    /// one cell per element, keyed by the cell path (list: timeuuid, set:
    /// element, map: key, UDT: field index).
    Complex {
        deletion: DeletionTime,
        cells: BTreeMap<Bytes, Cell>,
    },
    /// A counter column: the cell's value is a counter context
    /// ([`crate::counter`]); versions merge shard by shard instead of the
    /// last write winning, and a tombstone always wins.
    Counter(Cell),
}

impl ColumnData {
    /// The cell of a simple or counter column.
    pub fn single(&self) -> Option<&Cell> {
        match self {
            ColumnData::Simple(c) | ColumnData::Counter(c) => Some(c),
            ColumnData::Complex { .. } => None,
        }
    }
}

/// A column name, interned: one copy of each distinct name for the life of
/// the process, so a cell's name costs neither an allocation nor a shared
/// reference count (names come from schemas: few, and rarely new).
/// Two names are equal exactly when they are the same copy, so equality
/// compares addresses; order (the order of a row's cells) is by content.
#[derive(Clone, Copy, Eq, PartialOrd, Ord)]
pub struct ColumnName(&'static str);

impl PartialEq for ColumnName {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

// by content, as before: equal names are the same copy, so the same text
impl std::hash::Hash for ColumnName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl ColumnName {
    pub fn new(name: &str) -> ColumnName {
        thread_local! {
            static LOCAL: std::cell::RefCell<NameSet> = Default::default();
        }
        static GLOBAL: std::sync::OnceLock<parking_lot::Mutex<NameSet>> =
            std::sync::OnceLock::new();
        if let Some(n) = LOCAL.with(|l| l.borrow().get(name).copied()) {
            return ColumnName(n);
        }
        let n = {
            let mut g = GLOBAL.get_or_init(Default::default).lock();
            match g.get(name) {
                Some(n) => *n,
                None => {
                    let n: &'static str = Box::leak(name.to_owned().into_boxed_str());
                    g.insert(n);
                    n
                }
            }
        };
        LOCAL.with(|l| l.borrow_mut().insert(n));
        ColumnName(n)
    }

    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

impl std::ops::Deref for ColumnName {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

/// Interned names (FNV-1a: names are short, and come from schemas).
type NameSet = std::collections::HashSet<&'static str, std::hash::BuildHasherDefault<Fnv>>;

#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

impl AsRef<str> for ColumnName {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl std::fmt::Debug for ColumnName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.0, f)
    }
}

impl std::fmt::Display for ColumnName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl From<&str> for ColumnName {
    fn from(s: &str) -> Self {
        ColumnName::new(s)
    }
}

impl From<&String> for ColumnName {
    fn from(s: &String) -> Self {
        ColumnName::new(s)
    }
}

impl From<String> for ColumnName {
    fn from(s: String) -> Self {
        ColumnName::new(&s)
    }
}

impl From<Arc<str>> for ColumnName {
    fn from(s: Arc<str>) -> Self {
        ColumnName::new(&s)
    }
}

/// The cells of a row by column name: a small sorted vector, since rows have
/// few columns (a `BTreeMap` node costs about a kilobyte even for one entry).
/// One cell is held in place: a row of one column (a key-value table's) is
/// made, copied and freed without an allocation for its cells.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowCells(smallvec::SmallVec<[(ColumnName, ColumnData); 1]>);

impl RowCells {
    pub fn new() -> Self {
        RowCells(smallvec::SmallVec::new())
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| (**n).cmp(name))
    }

    pub fn get(&self, name: &str) -> Option<&ColumnData> {
        self.find(name).ok().map(|i| &self.0[i].1)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut ColumnData> {
        match self.find(name) {
            Ok(i) => Some(&mut self.0[i].1),
            Err(_) => None,
        }
    }

    /// [`RowCells::get_mut`] by interned name: in a row of a few cells, a
    /// scan of addresses, without comparing any text.
    pub fn get_mut_by_name(&mut self, name: ColumnName) -> Option<&mut ColumnData> {
        if self.0.len() <= 16 {
            return self.0.iter_mut().find(|(n, _)| *n == name).map(|(_, d)| d);
        }
        self.get_mut(name.as_str())
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Inserts or replaces, returning the previous data.
    pub fn insert(&mut self, name: impl Into<ColumnName>, data: ColumnData) -> Option<ColumnData> {
        let name = name.into();
        match self.find(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, data)),
            Err(i) => {
                self.0.insert(i, (name, data));
                None
            }
        }
    }

    pub fn retain(&mut self, mut f: impl FnMut(&ColumnName, &mut ColumnData) -> bool) {
        self.0.retain(|(n, d)| f(n, d));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ColumnName, &ColumnData)> {
        self.0.iter().map(|(n, d)| (n, d))
    }

    pub fn values(&self) -> impl Iterator<Item = &ColumnData> {
        self.0.iter().map(|(_, d)| d)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut ColumnData> {
        self.0.iter_mut().map(|(_, d)| d)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Frees unused capacity (a memtable keeps rows for a long time).
    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }
}

impl IntoIterator for RowCells {
    type Item = (ColumnName, ColumnData);
    type IntoIter = smallvec::IntoIter<[(ColumnName, ColumnData); 1]>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// A row: liveness, deletion and its cells by column name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Row {
    pub liveness: Option<LivenessInfo>,
    pub deletion: Option<DeletionTime>,
    pub cells: RowCells,
}

impl Row {
    pub fn merge(&mut self, other: Row, now: i32) {
        self.merge_in::<false>(other, now);
    }

    /// [`merge`](Self::merge), and what it changed of the row's
    /// [memory](Partition::memory_size) when `SIZED` (0 otherwise): cells
    /// added count whole, a cell replaced counts the difference of the two.
    /// What a deletion drops of counter cells is not taken off (the sum
    /// errs high, never low).
    fn merge_in<const SIZED: bool>(&mut self, mut other: Row, now: i32) -> isize {
        let mut delta = 0;
        // counter shards on either side that a row deletion covers must not
        // be summed into the other side's shards (merging is order-free)
        if let Some(d) = self
            .deletion
            .iter()
            .chain(other.deletion.iter())
            .copied()
            .reduce(|mut a, b| {
                a.merge(&b);
                a
            })
        {
            self.drop_counters(d);
            other.drop_counters(d);
        }
        if let Some(l) = other.liveness {
            match &self.liveness {
                Some(mine) if !l.supersedes(mine) => {}
                _ => self.liveness = Some(l),
            }
        }
        if let Some(d) = other.deletion {
            match &mut self.deletion {
                Some(mine) => mine.merge(&d),
                None => self.deletion = Some(d),
            }
        }
        for (name, data) in other.cells {
            match self.cells.get_mut_by_name(name) {
                None => {
                    if SIZED {
                        delta += column_memory(&data) as isize;
                    }
                    self.cells.insert(name, data);
                }
                Some(existing) => delta += merge_column::<SIZED>(existing, data, now),
            }
        }
        delta
    }

    /// Removes counter cells written at or before `d`.
    pub fn drop_counters(&mut self, d: DeletionTime) {
        if !d.is_live() {
            self.cells.retain(
                |_, data| !matches!(data, ColumnData::Counter(c) if d.deletes(c.timestamp)),
            );
        }
    }

    /// Drops everything shadowed by `deletion` (and by the row's own deletion),
    /// and expired or deleted cells when `purge_dead` is set. Returns whether the
    /// row is still live at `now`.
    pub fn resolve(&mut self, outer: DeletionTime, now: i32, purge_dead: bool) -> bool {
        let mut del = outer;
        if let Some(d) = self.deletion {
            del.merge(&d);
        }
        if let Some(l) = self.liveness {
            if del.deletes(l.timestamp) || (purge_dead && !l.is_live(now)) {
                self.liveness = None;
            }
        }
        self.cells.retain(|_, data| match data {
            ColumnData::Simple(c) | ColumnData::Counter(c) => {
                !(del.deletes(c.timestamp) || (purge_dead && !c.is_live(now)))
            }
            ColumnData::Complex { deletion, cells } => {
                let mut cdel = del;
                cdel.merge(deletion);
                cells
                    .retain(|_, c| !(cdel.deletes(c.timestamp) || (purge_dead && !c.is_live(now))));
                if purge_dead {
                    *deletion = DeletionTime::LIVE;
                }
                !cells.is_empty() || !deletion.is_live()
            }
        });
        if purge_dead {
            self.deletion = None;
        }
        self.is_live(now)
    }

    /// A row is live if its primary key liveness is live or any cell is.
    pub fn is_live(&self, now: i32) -> bool {
        if matches!(self.liveness, Some(l) if l.is_live(now)) {
            return true;
        }
        self.cells.values().any(|d| match d {
            ColumnData::Simple(c) | ColumnData::Counter(c) => c.is_live(now),
            ColumnData::Complex { cells, .. } => cells.values().any(|c| c.is_live(now)),
        })
    }
}

/// Merges `other` into `existing`; when `SIZED`, returns the change in
/// memory (see [`Row::merge_in`]).
fn merge_column<const SIZED: bool>(
    existing: &mut ColumnData,
    other: ColumnData,
    now: i32,
) -> isize {
    let diff = |new: usize, old: usize| {
        if SIZED {
            new as isize - old as isize
        } else {
            0
        }
    };
    match (existing, other) {
        (ColumnData::Simple(a), ColumnData::Simple(b)) => {
            if std::ptr::eq(Cell::reconcile(a, &b, now), &b) {
                let d = diff(cell_memory(&b), cell_memory(a));
                *a = b;
                return d;
            }
            0
        }
        (ColumnData::Counter(a), ColumnData::Counter(b)) => {
            if let Some(merged) = Cell::reconcile_counter(a, b) {
                let d = diff(cell_memory(&merged), cell_memory(a));
                *a = merged;
                return d;
            }
            0
        }
        (
            ColumnData::Complex { deletion, cells },
            ColumnData::Complex {
                deletion: od,
                cells: oc,
            },
        ) => {
            deletion.merge(&od);
            let mut d = 0;
            for (path, c) in oc {
                match cells.get_mut(&path) {
                    None => {
                        d += diff(complex_cell_memory(&path, &c), 0);
                        cells.insert(path, c);
                    }
                    Some(a) => {
                        if std::ptr::eq(Cell::reconcile(a, &c, now), &c) {
                            d += diff(cell_memory(&c), cell_memory(a));
                            *a = c;
                        }
                    }
                }
            }
            d
        }
        // a column changed between simple and complex (dropped and re-added): newest wins wholesale
        (e, o) => {
            let d = diff(column_memory(&o), column_memory(e));
            *e = o;
            d
        }
    }
}

/// Memory of a cell's value beyond the cell's slot ([`Partition::memory_size`]).
fn cell_memory(c: &Cell) -> usize {
    c.value.as_ref().map_or(0, |v| v.len() + 16)
}

/// Memory of one cell of a complex column: its path, its slot and its value.
fn complex_cell_memory(path: &Bytes, c: &Cell) -> usize {
    path.len() + 112 + cell_memory(c)
}

/// Memory of a column's data in a row: its 72-byte slot and what it holds.
fn column_memory(d: &ColumnData) -> usize {
    match d {
        ColumnData::Simple(c) | ColumnData::Counter(c) => 72 + cell_memory(c),
        ColumnData::Complex { cells, .. } => {
            72 + cells
                .iter()
                .map(|(p, c)| complex_cell_memory(p, c))
                .sum::<usize>()
        }
    }
}

/// Memory of a row: a 150-byte slot and its columns.
fn row_memory(r: &Row) -> usize {
    150 + r.cells.values().map(column_memory).sum::<usize>()
}

/// Memory of a row's clustering values.
fn clustering_memory(ck: &ClusteringKey) -> usize {
    ck.values.iter().map(|v| v.len() + 48).sum()
}

/// Memory of a range tombstone.
const RANGE_TOMBSTONE_MEMORY: usize = 160;

/// A range tombstone over a clustering slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    pub start: ClusteringKey,
    pub end: ClusteringKey,
    pub deletion: DeletionTime,
}

impl RangeTombstone {
    pub fn covers(&self, clustering: &ClusteringKey) -> bool {
        &self.start <= clustering && clustering <= &self.end
    }
}

/// A partition, or a fragment of one (an update, or what one source holds).
#[derive(Debug, Clone)]
pub struct Partition {
    pub deletion: DeletionTime,
    /// Boxed: few tables have static columns, and every partition moved
    /// (out of a memtable, up through a read, into an update) or held in a
    /// memtable's slot would carry a row's room for nothing (368 bytes a
    /// partition with it in place, 240 boxed).
    pub static_row: Option<Box<Row>>,
    pub rows: crate::rows::Rows,
    pub range_tombstones: Vec<RangeTombstone>,
}

impl Partition {
    /// Calls `see` with every timestamp this fragment carries: its deletion,
    /// each row's liveness and deletion, each cell's and each complex
    /// deletion's, and its range tombstones'.
    pub fn timestamps(&self, see: &mut impl FnMut(i64)) {
        if !self.deletion.is_live() {
            see(self.deletion.marked_for_delete_at);
        }
        let row = |r: &Row, see: &mut dyn FnMut(i64)| {
            if let Some(l) = &r.liveness {
                see(l.timestamp);
            }
            if let Some(d) = &r.deletion {
                see(d.marked_for_delete_at);
            }
            for d in r.cells.values() {
                match d {
                    ColumnData::Simple(c) | ColumnData::Counter(c) => see(c.timestamp),
                    ColumnData::Complex { deletion, cells } => {
                        if !deletion.is_live() {
                            see(deletion.marked_for_delete_at);
                        }
                        for c in cells.values() {
                            see(c.timestamp);
                        }
                    }
                }
            }
        };
        if let Some(r) = &self.static_row {
            row(r, see);
        }
        for r in self.rows.values() {
            row(r, see);
        }
        for rt in &self.range_tombstones {
            see(rt.deletion.marked_for_delete_at);
        }
    }

    /// What a read of this fragment went through (Cassandra's
    /// `LiveScannedHistogram` and `TombstoneScannedHistogram`): its live
    /// rows, and its tombstones (the partition's, range tombstones, row
    /// deletions, and deleted or expired cells).
    pub fn scanned(&self, now: i32) -> (u64, u64) {
        let (mut live, mut tombstones) = (0u64, 0u64);
        if !self.deletion.is_live() {
            tombstones += 1;
        }
        tombstones += self.range_tombstones.len() as u64;
        let dead = |c: &Cell| !c.is_live(now) as u64;
        for row in self
            .static_row
            .as_deref()
            .into_iter()
            .chain(self.rows.values())
        {
            if row.is_live(now) {
                live += 1;
            }
            if row.deletion.is_some_and(|d| !d.is_live()) {
                tombstones += 1;
            }
            for data in row.cells.values() {
                tombstones += match data {
                    ColumnData::Simple(c) | ColumnData::Counter(c) => dead(c),
                    ColumnData::Complex { deletion, cells } => {
                        !deletion.is_live() as u64 + cells.values().map(dead).sum::<u64>()
                    }
                };
            }
        }
        (live, tombstones)
    }

    /// Copies the parts of this partition that fall in `slices` (all of it
    /// when `None`).
    pub fn sliced(&self, slices: Option<&[crate::read::Slice]>) -> Partition {
        let Some(slices) = slices else {
            return self.clone();
        };
        let mut out = Partition {
            deletion: self.deletion,
            static_row: self.static_row.clone(),
            rows: Default::default(),
            range_tombstones: Vec::new(),
        };
        for (start, end) in slices {
            if start > end {
                continue;
            }
            for (ck, row) in self.rows.range(start, end) {
                out.rows.insert(ck.clone(), row.clone());
            }
            for rt in &self.range_tombstones {
                if !(rt.end < *start || rt.start > *end || out.range_tombstones.contains(rt)) {
                    out.range_tombstones.push(rt.clone());
                }
            }
        }
        out
    }

    pub fn new() -> Self {
        Partition {
            deletion: DeletionTime::LIVE,
            static_row: None,
            rows: crate::rows::Rows::new(),
            range_tombstones: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.deletion.is_live()
            && self.static_row.is_none()
            && self.rows.is_empty()
            && self.range_tombstones.is_empty()
    }

    /// Merges `other` into `self` (per-cell reconciliation).
    pub fn merge(&mut self, other: Partition, now: i32) {
        self.merge_in::<false>(other, now);
    }

    /// [`merge`](Self::merge), returning by how much it changed the
    /// partition's [`memory_size`](Self::memory_size): what is added counts
    /// whole, a cell replaced by a newer one counts the difference of the
    /// two (an overwrite of a value by one as long costs nothing). The
    /// memtable keeps its size with it, so that a workload that overwrites
    /// the same rows flushes for what it holds, not for what it wrote.
    pub fn merge_sized(&mut self, other: Partition, now: i32) -> isize {
        self.merge_in::<true>(other, now)
    }

    fn merge_in<const SIZED: bool>(&mut self, mut other: Partition, now: i32) -> isize {
        if self.is_empty() {
            // nothing to reconcile with (a new memtable partition): take it whole
            *self = other;
            return if SIZED {
                self.memory_size() as isize
            } else {
                0
            };
        }
        let mut delta = 0;
        let (mine, theirs) = (self.deletion, other.deletion);
        self.deletion.merge(&other.deletion);
        if !self.deletion.is_live() {
            // see `Row::merge`: deleted counter shards are never summed in
            // (only the side whose deletion was older can hold any)
            let d = self.deletion;
            let sides: [(&mut Partition, bool); 2] =
                [(&mut *self, mine != d), (&mut other, theirs != d)];
            for (p, older) in sides {
                if !older {
                    continue;
                }
                if let Some(r) = &mut p.static_row {
                    r.drop_counters(d);
                }
                p.rows.retain(|_, r| {
                    r.drop_counters(d);
                    true
                });
            }
        }
        if let Some(sr) = other.static_row {
            match &mut self.static_row {
                Some(mine) => delta += mine.merge_in::<SIZED>(*sr, now),
                None => {
                    if SIZED {
                        delta += row_memory(&sr) as isize;
                    }
                    self.static_row = Some(sr);
                }
            }
        }
        for (ck, row) in other.rows {
            match self.rows.get_mut(&ck) {
                Some(mine) => delta += mine.merge_in::<SIZED>(row, now),
                None => {
                    if SIZED {
                        delta += (clustering_memory(&ck) + row_memory(&row)) as isize;
                    }
                    self.rows.insert(ck, row);
                }
            }
        }
        for rt in other.range_tombstones {
            if !self.range_tombstones.contains(&rt) {
                if SIZED {
                    delta += RANGE_TOMBSTONE_MEMORY as isize;
                }
                self.range_tombstones.push(rt);
            }
        }
        delta
    }

    /// Forgets cells of dropped columns written at or before the drop (a
    /// column dropped and added again starts empty).
    pub fn purge_dropped(&mut self, dropped: &[(String, i64)]) {
        let purge = |row: &mut Row| {
            for (name, at) in dropped {
                let gone = match row.cells.get_mut(name) {
                    Some(ColumnData::Simple(c) | ColumnData::Counter(c)) => c.timestamp <= *at,
                    Some(ColumnData::Complex { deletion, cells }) => {
                        cells.retain(|_, c| c.timestamp > *at);
                        if deletion.marked_for_delete_at <= *at {
                            *deletion = DeletionTime::LIVE;
                        }
                        cells.is_empty() && deletion.is_live()
                    }
                    None => false,
                };
                if gone {
                    row.cells.retain(|n, _| &**n != name.as_str());
                }
            }
        };
        if let Some(sr) = &mut self.static_row {
            purge(sr);
        }
        self.rows.retain(|_, row| {
            purge(row);
            true
        });
    }

    /// Applies tombstones and expiry: what a reader sees at `now`.
    pub fn resolve(&mut self, now: i32) {
        let pdel = self.deletion;
        if let Some(sr) = &mut self.static_row {
            if !sr.resolve(pdel, now, true) {
                self.static_row = None;
            }
        }
        let rts = std::mem::take(&mut self.range_tombstones);
        self.rows.retain(|ck, row| {
            let mut del = pdel;
            for rt in &rts {
                if rt.covers(ck) {
                    del.merge(&rt.deletion);
                }
            }
            row.resolve(del, now, true)
        });
    }

    /// Cells of the partition (a complex column counts each element).
    pub fn cell_count(&self) -> usize {
        let row = |r: &Row| -> usize {
            r.cells
                .values()
                .map(|d| match d {
                    ColumnData::Complex { cells, .. } => cells.len(),
                    _ => 1,
                })
                .sum()
        };
        self.static_row.as_deref().map(row).unwrap_or(0)
            + self.rows.values().map(row).sum::<usize>()
    }

    /// Cassandra's `PartitionUpdate.dataSize()`, what a batch's size
    /// warning and limit count: per cell its timestamp, TTL and local
    /// deletion time (8 + 4 + 8 bytes), value and path; per row its
    /// clustering values, liveness (8 bytes, 20 when expiring) and deletion
    /// (13); the static row always (20 when empty); the partition deletion
    /// (8) and range tombstones (4 + bounds + 12 each).
    pub fn data_size(&self) -> usize {
        let cell = |c: &Cell| 20 + c.value.as_ref().map_or(0, |v| v.len());
        let row = |clustering: usize, r: Option<&Row>| {
            let liveness = match r.and_then(|r| r.liveness.as_ref()) {
                Some(l) if l.ttl > 0 => 20,
                _ => 8,
            };
            let cells: usize = r.map_or(0, |r| {
                r.cells
                    .values()
                    .map(|d| match d {
                        ColumnData::Simple(c) => cell(c),
                        // an update's context: one local shard (36 bytes)
                        ColumnData::Counter(c) if c.value.is_some() => 56,
                        ColumnData::Counter(c) => cell(c),
                        ColumnData::Complex { cells, .. } => {
                            12 + cells.iter().map(|(p, c)| p.len() + cell(c)).sum::<usize>()
                        }
                    })
                    .sum()
            });
            clustering + liveness + 13 + cells
        };
        let bound = |k: &ClusteringKey| k.values.iter().map(|v| v.len()).sum::<usize>();
        let ranges = if self.range_tombstones.is_empty() {
            0
        } else {
            4 + self
                .range_tombstones
                .iter()
                .map(|rt| bound(&rt.start) + bound(&rt.end) + 12)
                .sum::<usize>()
        };
        8 + ranges
            + row(0, self.static_row.as_deref())
            + self
                .rows
                .iter()
                .map(|(ck, r)| row(bound(ck), Some(r)))
                .sum::<usize>()
    }

    /// Estimated heap size, for memtable accounting.
    /// Bytes of memory an update adds, counting allocation overhead (a row
    /// slot, its cell vector, cell headers) as measured, not just payload.
    pub fn estimated_size(&self) -> usize {
        let row_size = |r: &Row| {
            200 + r
                .cells
                .iter()
                .map(|(n, d)| {
                    n.len()
                        + 80
                        + match d {
                            ColumnData::Simple(c) | ColumnData::Counter(c) => {
                                c.value.as_ref().map_or(0, |v| v.len())
                            }
                            ColumnData::Complex { cells, .. } => cells
                                .iter()
                                .map(|(p, c)| {
                                    p.len() + 48 + c.value.as_ref().map_or(0, |v| v.len())
                                })
                                .sum(),
                        }
                })
                .sum::<usize>()
        };
        let mut s = 64;
        if let Some(r) = &self.static_row {
            s += row_size(r);
        }
        for (ck, r) in &self.rows {
            s += ck.values.iter().map(|v| v.len() + 16).sum::<usize>() + row_size(r);
        }
        s + self.range_tombstones.len() * 96
    }

    /// Memory the partition takes in a memtable or the row cache, beyond
    /// its key: calibrated against the resident size of a node holding a
    /// million one-row partitions (a row is a 112-byte slot plus its
    /// clustering values; a cell a 72-byte slot plus its value allocation;
    /// column names are shared).
    pub fn memory_size(&self) -> usize {
        let mut s = 0;
        if let Some(r) = &self.static_row {
            s += row_memory(r);
        }
        for (ck, r) in &self.rows {
            s += clustering_memory(ck) + row_memory(r);
        }
        s + self.range_tombstones.len() * RANGE_TOMBSTONE_MEMORY
    }
}

impl Default for Partition {
    fn default() -> Self {
        Self::new()
    }
}

/// A partition key with its token; orders by token, then key bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DecoratedKey {
    pub token: i64,
    pub key: Bytes,
}

impl DecoratedKey {
    pub fn new(key: Bytes) -> Self {
        DecoratedKey {
            token: sibyl_types::murmur3::token(&key),
            key,
        }
    }
}

/// An update to one partition of one table.
#[derive(Debug, Clone)]
pub struct Mutation {
    pub table_id: uuid::Uuid,
    pub key: DecoratedKey,
    pub update: Partition,
}

/// Helpers for building updates against a table's comparator.
pub fn empty_partition() -> Partition {
    Partition::new()
}

/// The comparator used for tables without clustering columns.
pub fn no_clustering() -> Arc<ClusteringComparator> {
    ClusteringComparator::new(Vec::new())
}

/// Values up to this size are copied into the thread's slab by [`own`];
/// larger ones get an allocation of their own.
const SLAB_VALUE_MAX: usize = 1024;
/// Size of a slab: a memtable's values are slices of a few of them.
const SLAB_BYTES: usize = 64 * 1024;

thread_local! {
    /// The slab a thread copies detached values into.
    static SLAB: std::cell::RefCell<bytes::BytesMut> =
        std::cell::RefCell::new(bytes::BytesMut::new());
}

/// A copy of `b` that shares nothing with the buffer it was decoded from.
/// Small values are copied into a 64 KiB slab shared by the values the
/// thread detaches after them (one allocation per slab instead of one per
/// value, and a memtable's values lie together); a slab is freed when the
/// last value in it is dropped, which is when the memtables holding them
/// have been flushed.
fn own(b: &Bytes) -> Bytes {
    if b.is_empty() {
        return Bytes::new();
    }
    if b.len() > SLAB_VALUE_MAX {
        return Bytes::copy_from_slice(b);
    }
    SLAB.with(|slab| {
        let mut slab = slab.borrow_mut();
        if slab.capacity() - slab.len() < b.len() {
            *slab = bytes::BytesMut::with_capacity(SLAB_BYTES);
        }
        slab.extend_from_slice(b);
        slab.split().freeze()
    })
}

fn own_cell(c: &mut Cell) {
    if let Some(v) = &c.value {
        c.value = Some(own(v));
    }
}

fn own_row(r: &mut Row) {
    r.cells.shrink_to_fit();
    for data in r.cells.values_mut() {
        match data {
            ColumnData::Simple(c) | ColumnData::Counter(c) => own_cell(c),
            ColumnData::Complex { cells, .. } => {
                let owned: BTreeMap<Bytes, Cell> = std::mem::take(cells)
                    .into_iter()
                    .map(|(p, mut c)| {
                        own_cell(&mut c);
                        (own(&p), c)
                    })
                    .collect();
                *cells = owned;
            }
        }
    }
}

impl Mutation {
    /// Copies every value into its own allocation. Values decoded from a
    /// network frame are slices of the connection's read buffer; stored as they
    /// are, each would keep that whole buffer alive in the memtable.
    pub fn detach(&mut self) {
        self.key.key = own(&self.key.key);
        let p = &mut self.update;
        if let Some(r) = &mut p.static_row {
            own_row(r);
        }
        match &mut p.rows {
            // in place: a mutation's rows are nearly always a short vector
            crate::rows::Rows::Small(v) => {
                for (ck, r) in v.iter_mut() {
                    for value in ck.values.iter_mut() {
                        *value = own(value);
                    }
                    own_row(r);
                }
            }
            rows => {
                *rows = std::mem::take(rows)
                    .into_iter()
                    .map(|(mut ck, mut r)| {
                        ck.values = ck.values.iter().map(own).collect();
                        own_row(&mut r);
                        (ck, r)
                    })
                    .collect();
            }
        }
        p.rows.shrink_to_fit();
        for rt in &mut p.range_tombstones {
            rt.start.values = rt.start.values.iter().map(own).collect();
            rt.end.values = rt.end.values.iter().map(own).collect();
        }
    }
}

impl Cell {
    /// An expired cell becomes a tombstone dated at its expiry.
    fn expire(&mut self, now: i32) {
        if self.ttl > 0 && self.value.is_some() && !self.is_live(now) {
            self.value = None;
            self.ttl = 0;
        }
    }
}

impl Partition {
    /// Calls `f` with the local deletion time of every tombstone and the
    /// expiry of every cell or row with a TTL; with `i32::MAX` for data that
    /// lives forever.
    pub fn for_each_deletion_time(&self, mut f: impl FnMut(i32)) {
        if !self.deletion.is_live() {
            f(self.deletion.local_deletion_time);
        }
        let mut row = |r: &Row| {
            if let Some(l) = &r.liveness {
                f(if l.ttl > 0 {
                    l.local_expiration_time
                } else {
                    i32::MAX
                });
            }
            if let Some(d) = &r.deletion {
                f(d.local_deletion_time);
            }
            let cell = |c: &Cell| {
                if c.value.is_some() && c.ttl == 0 {
                    i32::MAX
                } else {
                    c.local_deletion_time
                }
            };
            for d in r.cells.values() {
                match d {
                    ColumnData::Simple(c) | ColumnData::Counter(c) => f(cell(c)),
                    ColumnData::Complex { cells, deletion } => {
                        if !deletion.is_live() {
                            f(deletion.local_deletion_time);
                        }
                        for c in cells.values() {
                            f(cell(c));
                        }
                    }
                }
            }
        };
        if let Some(r) = &self.static_row {
            row(r);
        }
        for r in self.rows.values() {
            row(r);
        }
        for rt in &self.range_tombstones {
            f(rt.deletion.local_deletion_time);
        }
    }

    /// Whether compaction could purge anything here at `gc_before`: a
    /// tombstone or an expiring cell older than it.
    pub fn may_purge(&self, gc_before: i32) -> bool {
        let mut any = false;
        self.for_each_deletion_time(|t| any |= t < gc_before);
        any
    }
}

impl Partition {
    /// Compaction's view of a partition: drops what deletions shadow, turns
    /// expired cells into tombstones, and — when `purgeable` (no data outside
    /// the compaction can be shadowed by them) — drops tombstones whose
    /// deletion time is before `gc_before` (now − gc_grace_seconds).
    /// Returns whether anything is left.
    pub fn compact(&mut self, now: i32, gc_before: i32, purgeable: bool) -> bool {
        let pdel = self.deletion;
        let gc = |d: &DeletionTime| purgeable && !d.is_live() && d.local_deletion_time < gc_before;
        let rts = std::mem::take(&mut self.range_tombstones);
        let compact_row = |row: &mut Row, del: DeletionTime| -> bool {
            row.resolve(del, now, false);
            if let Some(l) = row.liveness {
                if !l.is_live(now) && purgeable && l.local_expiration_time < gc_before {
                    row.liveness = None;
                }
            }
            if let Some(d) = row.deletion {
                if gc(&d) {
                    row.deletion = None;
                }
            }
            row.cells.retain(|_, data| match data {
                ColumnData::Simple(c) | ColumnData::Counter(c) => {
                    c.expire(now);
                    !(c.value.is_none() && purgeable && c.local_deletion_time < gc_before)
                }
                ColumnData::Complex { deletion, cells } => {
                    if gc(deletion) {
                        *deletion = DeletionTime::LIVE;
                    }
                    cells.retain(|_, c| {
                        c.expire(now);
                        !(c.value.is_none() && purgeable && c.local_deletion_time < gc_before)
                    });
                    !cells.is_empty() || !deletion.is_live()
                }
            });
            row.liveness.is_some() || row.deletion.is_some() || !row.cells.is_empty()
        };
        if let Some(sr) = &mut self.static_row {
            if !compact_row(sr, pdel) {
                self.static_row = None;
            }
        }
        self.rows.retain(|ck, row| {
            let mut del = pdel;
            for rt in &rts {
                if rt.covers(ck) {
                    del.merge(&rt.deletion);
                }
            }
            compact_row(row, del)
        });
        self.range_tombstones = rts
            .into_iter()
            .filter(|rt| !gc(&rt.deletion) && !pdel.supersedes(&rt.deletion) && pdel != rt.deletion)
            .collect();
        if gc(&self.deletion) {
            self.deletion = DeletionTime::LIVE;
        }
        !self.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_columns_lose_the_cells_written_before_the_drop() {
        let cmp = crate::clustering::ClusteringComparator::new(vec![]);
        let mut p = Partition::new();
        let mut row = Row::default();
        row.cells.insert(
            "v",
            ColumnData::Simple(Cell::live(10, Bytes::from_static(b"old"))),
        );
        row.cells.insert(
            "w",
            ColumnData::Simple(Cell::live(30, Bytes::from_static(b"new"))),
        );
        let mut cells = BTreeMap::new();
        cells.insert(Bytes::from_static(b"a"), Cell::live(10, Bytes::new()));
        cells.insert(Bytes::from_static(b"b"), Cell::live(30, Bytes::new()));
        row.cells.insert(
            "s",
            ColumnData::Complex {
                deletion: DeletionTime {
                    marked_for_delete_at: 5,
                    local_deletion_time: 0,
                },
                cells,
            },
        );
        p.rows
            .insert(crate::clustering::ClusteringKey::row(vec![], cmp), row);
        p.purge_dropped(&[("v".into(), 20), ("w".into(), 20), ("s".into(), 20)]);
        let row = p.rows.values().next().unwrap();
        assert!(row.cells.get("v").is_none(), "written before the drop");
        assert!(row.cells.get("w").is_some(), "written after the drop");
        match row.cells.get("s") {
            Some(ColumnData::Complex { deletion, cells }) => {
                assert!(deletion.is_live());
                assert_eq!(
                    cells.keys().collect::<Vec<_>>(),
                    vec![&Bytes::from_static(b"b")]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// What `merge_sized` reports, summed from an empty partition, is the
    /// partition's memory after every kind of change: new rows, static rows,
    /// columns and complex cells, overwrites by longer, shorter and older
    /// values, a column turned complex, range tombstones, a repeat.
    #[test]
    fn sized_merges_add_up_to_the_partitions_memory() {
        let cmp = crate::clustering::ClusteringComparator::new(vec![]);
        let ck = |v: &str| crate::clustering::ClusteringKey::row(vec![b(v)], cmp.clone());
        let simple = |ts: i64, v: &str| ColumnData::Simple(Cell::live(ts, b(v)));
        let complex = |cells: &[(&str, i64, &str)]| ColumnData::Complex {
            deletion: DeletionTime::LIVE,
            cells: cells
                .iter()
                .map(|(p, ts, v)| (b(p), Cell::live(*ts, b(v))))
                .collect(),
        };
        let update = |rows: Vec<(&str, Vec<(&str, ColumnData)>)>, rt: bool| {
            let mut p = Partition::new();
            for (k, cols) in rows {
                let mut row = Row::default();
                for (name, d) in cols {
                    row.cells.insert(name, d);
                }
                if k == "static" {
                    p.static_row = Some(Box::new(row));
                } else {
                    p.rows.insert(ck(k), row);
                }
            }
            if rt {
                p.range_tombstones.push(RangeTombstone {
                    start: ck("a"),
                    end: ck("c"),
                    deletion: DeletionTime {
                        marked_for_delete_at: 1,
                        local_deletion_time: 0,
                    },
                });
            }
            p
        };
        let updates = vec![
            update(vec![("a", vec![("v", simple(1, "one"))])], false),
            // a longer value, then a shorter one, then an older one (no change)
            update(vec![("a", vec![("v", simple(2, "a longer value"))])], false),
            update(vec![("a", vec![("v", simple(3, "s"))])], false),
            update(
                vec![("a", vec![("v", simple(0, "older and ignored"))])],
                false,
            ),
            // a new column, a new row, a static row, a range tombstone
            update(
                vec![
                    ("a", vec![("w", simple(4, "w"))]),
                    ("b", vec![("v", simple(4, "bb"))]),
                ],
                true,
            ),
            update(vec![("static", vec![("s", simple(5, "static"))])], false),
            update(
                vec![("static", vec![("s", simple(6, "static, longer"))])],
                true,
            ),
            // complex cells added and replaced, a column turned complex
            update(vec![("b", vec![("m", complex(&[("k1", 7, "x")]))])], false),
            update(
                vec![(
                    "b",
                    vec![("m", complex(&[("k1", 8, "xyz"), ("k2", 8, "")]))],
                )],
                false,
            ),
            update(
                vec![("a", vec![("v", complex(&[("k", 9, "now complex")]))])],
                false,
            ),
        ];
        let mut p = Partition::new();
        let mut sum = 0isize;
        for (i, u) in updates.into_iter().enumerate() {
            sum += p.merge_sized(u, 0);
            assert_eq!(sum, p.memory_size() as isize, "after update {i}");
        }
        assert_eq!(p.range_tombstones.len(), 1, "the repeated tombstone is one");
        // what a plain merge makes is the same partition
        let mut q = Partition::new();
        q.merge(p.clone(), 0);
        assert_eq!(q.memory_size(), p.memory_size());
    }

    /// Names made from equal text are the same copy (equality compares
    /// addresses), and a row finds its cells by name, short or wide.
    #[test]
    fn column_names_are_interned() {
        let a = ColumnName::new("abc");
        let owned = String::from("ab") + "c";
        assert_eq!(a, ColumnName::new(&owned));
        assert_eq!(
            a,
            std::thread::spawn(|| ColumnName::new("abc"))
                .join()
                .unwrap()
        );
        assert_ne!(a, ColumnName::new("abd"));
        assert!(ColumnName::new("abd") > a);
        for width in [3usize, 40] {
            let mut row = RowCells::new();
            for i in 0..width {
                row.insert(
                    format!("c{i}").as_str(),
                    ColumnData::Simple(Cell::live(i as i64, Bytes::new())),
                );
            }
            for i in 0..width {
                let d = row.get_mut_by_name(ColumnName::new(&format!("c{i}")));
                assert_eq!(
                    d.and_then(|d| d.single()).map(|c| c.timestamp),
                    Some(i as i64)
                );
            }
            assert!(row.get_mut_by_name(ColumnName::new("zz")).is_none());
        }
    }

    /// Detached values equal the originals and share no memory with the
    /// buffer they were read from, across slab boundaries; a large value is
    /// copied alone.
    #[test]
    fn detached_values_are_copies() {
        let frame = Bytes::from(vec![7u8; 4096]);
        let mut kept = Vec::new();
        for i in 0..2000usize {
            let len = [0, 1, 100, 1000, 1024, 1025, 4000][i % 7];
            let src = frame.slice(i % 50..i % 50 + len);
            let own = own(&src);
            assert_eq!(own, src);
            if len > 0 {
                assert_ne!(own.as_ptr(), src.as_ptr());
            }
            kept.push((src, own));
        }
        drop(frame);
        for (src, own) in &kept {
            assert_eq!(own, src);
        }
        // values survive the slab they were cut from being replaced
        let first = kept[2].1.clone();
        kept.clear();
        assert_eq!(first, Bytes::from(vec![7u8; 100]));
    }

    #[test]
    fn reconcile_higher_timestamp_wins_then_tombstone_then_greater_value() {
        let now = 1000;
        let a = Cell::live(10, b("a"));
        let z = Cell::live(9, b("z"));
        assert_eq!(Cell::reconcile(&a, &z, now), &a);
        let t = Cell::tombstone(10, now);
        assert_eq!(Cell::reconcile(&a, &t, now), &t);
        let c = Cell::live(10, b("c"));
        assert_eq!(Cell::reconcile(&a, &c, now), &c);
        assert_eq!(Cell::reconcile(&c, &a, now), &c);
    }

    #[test]
    fn row_deletion_shadows_older_cells_only() {
        let now = 1000;
        let mut r = Row::default();
        r.cells
            .insert("x", ColumnData::Simple(Cell::live(5, b("old"))));
        r.cells
            .insert("y", ColumnData::Simple(Cell::live(7, b("new"))));
        r.deletion = Some(DeletionTime {
            marked_for_delete_at: 6,
            local_deletion_time: now,
        });
        assert!(r.resolve(DeletionTime::LIVE, now, true));
        assert!(!r.cells.contains_key("x"));
        assert!(r.cells.contains_key("y"));
    }

    #[test]
    fn expired_cells_are_not_live() {
        let c = Cell::expiring(1, 10, 100, b("v"));
        assert!(c.is_live(109));
        assert!(!c.is_live(110));
        assert_eq!(c.remaining_ttl(105), Some(5));
    }
}
