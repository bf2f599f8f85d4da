//! Compaction: merges SSTables into one, dropping what is shadowed or
//! expired and purging tombstones after `gc_grace_seconds` when nothing
//! outside the compaction can hold data they shadow.
//!
//! Strategies choose what to compact. SizeTieredCompactionStrategy (Cassandra's
//! default): SSTables of similar size are bucketed (`bucket_low`..`bucket_high`
//! around the bucket's average; everything under `min_sstable_size` in one
//! bucket) and a bucket with at least `min_threshold` SSTables is compacted,
//! at most `max_threshold` at a time, smallest bucket first.

use crate::data::{DecoratedKey, Partition};
use crate::sstable::{SSTableReader, SSTableWriter};
use crate::StorageError;
use std::collections::BTreeMap;

pub use sibyl_db::compaction_params::{SizeTieredOptions, Strategy};
use std::sync::Arc;

/// Groups SSTable sizes into buckets (indexes into `sizes`), as Cassandra's
/// `SizeTieredCompactionStrategy.getBuckets`.
pub fn size_tiered_buckets(sizes: &[u64], o: &SizeTieredOptions) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|i| sizes[*i]);
    let mut buckets: Vec<(f64, Vec<usize>)> = Vec::new();
    for i in order {
        let size = sizes[i] as f64;
        let mut placed = false;
        for (avg, members) in buckets.iter_mut() {
            let fits = (size > *avg * o.bucket_low && size < *avg * o.bucket_high)
                || (sizes[i] < o.min_sstable_size_bytes && *avg < o.min_sstable_size_bytes as f64);
            if fits {
                members.push(i);
                *avg = members.iter().map(|j| sizes[*j] as f64).sum::<f64>() / members.len() as f64;
                placed = true;
                break;
            }
        }
        if !placed {
            buckets.push((size, vec![i]));
        }
    }
    buckets.into_iter().map(|(_, m)| m).collect()
}

/// The SSTables size-tiered compaction would compact next (indexes), if any.
pub fn size_tiered_candidates(sizes: &[u64], o: &SizeTieredOptions) -> Option<Vec<usize>> {
    let mut eligible: Vec<Vec<usize>> = size_tiered_buckets(sizes, o)
        .into_iter()
        .filter(|b| b.len() >= o.min_threshold)
        .collect();
    eligible.sort_by_key(|b| b.iter().map(|i| sizes[*i]).sum::<u64>() / b.len() as u64);
    eligible.into_iter().next().map(|mut b| {
        b.sort_by_key(|i| sizes[*i]);
        b.truncate(o.max_threshold);
        b
    })
}

/// What to compact and where the output goes.
#[derive(Clone)]
pub struct CompactionTask {
    pub inputs: Vec<Arc<SSTableReader>>,
    pub output_level: u32,
    /// Outputs are split at this size (leveled compaction).
    pub max_output_bytes: u64,
    /// `nodetool compact -s`: outputs of half, a quarter, an eighth... of the
    /// input, down to 50 MiB, instead of one file.
    pub split_output: bool,
}

/// The smallest file a split major compaction writes (Cassandra's 50 MiB).
pub const SPLIT_SMALLEST_BYTES: u64 = 50 * 1024 * 1024;

/// The size limit of output `i` of a task over `input_bytes`.
pub fn output_limit(task: &CompactionTask, input_bytes: u64, i: usize) -> u64 {
    if !task.split_output {
        return task.max_output_bytes;
    }
    let share = input_bytes >> (i as u32 + 1).min(63);
    if share < SPLIT_SMALLEST_BYTES {
        u64::MAX
    } else {
        share
    }
}

fn overlaps(a: &SSTableReader, b: &SSTableReader) -> bool {
    a.stats.min_token <= b.stats.max_token && b.stats.min_token <= a.stats.max_token
}

fn stcs_task(
    ss: &[Arc<SSTableReader>],
    o: &SizeTieredOptions,
    level: u32,
) -> Option<CompactionTask> {
    let sizes: Vec<u64> = ss.iter().map(|s| s.stats.data_bytes).collect();
    size_tiered_candidates(&sizes, o).map(|idx| CompactionTask {
        inputs: idx.into_iter().map(|i| ss[i].clone()).collect(),
        output_level: level,
        max_output_bytes: u64::MAX,
        split_output: false,
    })
}

/// The strategy's next compaction of `sstables`, if any.
pub fn next_task(strategy: &Strategy, sstables: &[Arc<SSTableReader>]) -> Option<CompactionTask> {
    next_task_after(strategy, sstables, &|_| None)
}

/// [`next_task`], where leveled compaction goes round each level as Cassandra
/// does: `last_compacted(level)` is the last token of what it last pushed
/// down from that level, and the next pick is the SSTable starting after it
/// (wrapping around), so every part of the ring gets its turn.
pub fn next_task_after(
    strategy: &Strategy,
    sstables: &[Arc<SSTableReader>],
    last_compacted: &dyn Fn(u32) -> Option<i64>,
) -> Option<CompactionTask> {
    match strategy {
        Strategy::SizeTiered(o) => stcs_task(sstables, o, 0),
        Strategy::Leveled {
            sstable_size_bytes,
            fanout,
            l0,
        } => {
            let level = |n: u32| {
                sstables
                    .iter()
                    .filter(|s| s.stats.level == n)
                    .cloned()
                    .collect::<Vec<_>>()
            };
            let l0s = level(0);
            if l0s.len() > 32 {
                // too far behind: size-tiered inside L0 first, as Cassandra does
                if let Some(t) = stcs_task(&l0s, l0, 0) {
                    return Some(t);
                }
            }
            if l0s.len() >= l0.min_threshold {
                let mut inputs: Vec<Arc<SSTableReader>> = l0s.into_iter().take(32).collect();
                let l1 = level(1);
                for s in l1 {
                    if inputs.iter().any(|i| overlaps(i, &s)) {
                        inputs.push(s);
                    }
                }
                return Some(CompactionTask {
                    inputs,
                    output_level: 1,
                    max_output_bytes: *sstable_size_bytes,
                    split_output: false,
                });
            }
            let max_level = sstables.iter().map(|s| s.stats.level).max().unwrap_or(0);
            for n in 1..=max_level {
                let in_level = level(n);
                let bytes: u64 = in_level.iter().map(|s| s.stats.data_bytes).sum();
                let limit = sstable_size_bytes.saturating_mul(fanout.saturating_pow(n));
                if bytes > limit {
                    let mut by_token = in_level.clone();
                    by_token.sort_by_key(|s| s.stats.min_token);
                    let after = last_compacted(n);
                    let next = by_token
                        .iter()
                        .find(|s| after.map(|a| s.stats.min_token > a).unwrap_or(true));
                    let Some(pick) = next.or(by_token.first()).cloned() else {
                        continue;
                    };
                    let mut inputs = vec![pick.clone()];
                    for s in level(n + 1) {
                        if overlaps(&pick, &s) {
                            inputs.push(s);
                        }
                    }
                    return Some(CompactionTask {
                        inputs,
                        output_level: n + 1,
                        max_output_bytes: *sstable_size_bytes,
                        split_output: false,
                    });
                }
            }
            None
        }
        Strategy::TimeWindow {
            window_micros,
            stcs,
        } => {
            let mut windows: BTreeMap<i64, Vec<Arc<SSTableReader>>> = BTreeMap::new();
            for s in sstables {
                windows
                    .entry(s.stats.max_timestamp.div_euclid(*window_micros))
                    .or_default()
                    .push(s.clone());
            }
            let newest = *windows.keys().next_back()?;
            for (w, ss) in windows.iter().rev() {
                if *w == newest {
                    if let Some(t) = stcs_task(ss, stcs, 0) {
                        return Some(t);
                    }
                } else if ss.len() >= 2 {
                    return Some(CompactionTask {
                        inputs: ss.clone(),
                        output_level: 0,
                        max_output_bytes: u64::MAX,
                        split_output: false,
                    });
                }
            }
            None
        }
    }
}

/// SSTables that can be dropped whole: everything in them expired or was
/// deleted before `gc_before`, and no overlapping SSTable holds older data
/// they might shadow (Cassandra's `getFullyExpiredSSTables`).
pub fn fully_expired(sstables: &[Arc<SSTableReader>], gc_before: i32) -> Vec<Arc<SSTableReader>> {
    sstables
        .iter()
        .filter(|s| s.stats.max_local_deletion_time < gc_before)
        .filter(|s| {
            sstables.iter().all(|o| {
                std::ptr::eq(o.as_ref(), s.as_ref())
                    || !overlaps(o, s)
                    || o.stats.min_timestamp > s.stats.max_timestamp
                    || o.stats.max_local_deletion_time < gc_before
            })
        })
        .cloned()
        .collect()
}

/// What a compaction did.
#[derive(Debug, Clone, Default)]
pub struct CompactionResult {
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub input_partitions: u64,
    pub output_partitions: u64,
    /// Rows read from the inputs (static rows included, as Cassandra's
    /// `totalSourceCQLRows`).
    pub input_rows: u64,
    /// `merge_counts[n - 1]`: the keys found in `n` inputs (Cassandra's
    /// "Partition merge counts").
    pub merge_counts: Vec<u64>,
}

/// Merges `inputs` into new SSTables made by `new_writer`, starting a new one
/// whenever one reaches `max_output_bytes`. `outside(key)` says whether data
/// for the key may exist outside the compaction (other SSTables, memtables):
/// then no tombstone of that key is purged. Partitions `keep` refuses are
/// dropped (cleanup). Returns the generations written.
#[allow(clippy::too_many_arguments)]
pub fn compact(
    inputs: &[Arc<SSTableReader>],
    new_writer: &mut dyn FnMut() -> Result<SSTableWriter, StorageError>,
    max_output_bytes: &dyn Fn(usize) -> u64,
    now: i32,
    gc_before: &dyn Fn(&DecoratedKey) -> i32,
    dropped_columns: &[(String, i64)],
    outside: &dyn Fn(&DecoratedKey) -> bool,
    keep: &dyn Fn(&DecoratedKey) -> bool,
    progress: &dyn Fn(u64),
) -> Result<(CompactionResult, Vec<u64>), StorageError> {
    let mut result = CompactionResult {
        input_bytes: inputs.iter().map(|s| s.stats.data_bytes).sum(),
        ..Default::default()
    };
    let mut writer = new_writer()?;
    let mut written = Vec::new();
    let mut writer_empty = true;
    let mut scanners = Vec::with_capacity(inputs.len());
    for s in inputs {
        scanners.push(s.scanner()?);
    }
    let mut heads: Vec<Option<(DecoratedKey, Partition)>> = Vec::with_capacity(scanners.len());
    for sc in scanners.iter_mut() {
        heads.push(sc.next().transpose()?);
    }
    let position = inputs
        .iter()
        .map(|s| s.stats.commitlog_position)
        .max()
        .unwrap_or(0);
    loop {
        let Some(min) = heads.iter().flatten().map(|(k, _)| k).min().cloned() else {
            break;
        };
        let mut merged: Option<Partition> = None;
        let mut sources = 0;
        for (i, h) in heads.iter_mut().enumerate() {
            if h.as_ref().map(|(k, _)| *k == min).unwrap_or(false) {
                if let Some((_, p)) = h.take() {
                    result.input_partitions += 1;
                    result.input_rows +=
                        (p.rows.len() + usize::from(p.static_row.is_some())) as u64;
                    sources += 1;
                    match &mut merged {
                        Some(m) => m.merge(p, now),
                        None => merged = Some(p),
                    }
                }
                *h = scanners[i].next().transpose()?;
            }
        }
        if result.merge_counts.len() < sources {
            result.merge_counts.resize(sources, 0);
        }
        if sources > 0 {
            result.merge_counts[sources - 1] += 1;
        }
        // `nodetool cleanup`: partitions this node no longer owns go
        let merged = merged.filter(|_| keep(&min));
        if let Some(mut p) = merged {
            if !dropped_columns.is_empty() {
                p.purge_dropped(dropped_columns);
            }
            // whether other data of the key may exist is only asked when
            // there is something to purge
            let gc_before = gc_before(&min);
            let purgeable = p.may_purge(gc_before) && !outside(&min);
            if p.compact(now, gc_before, purgeable) {
                if writer.data_bytes() >= max_output_bytes(written.len()) {
                    let next = new_writer()?;
                    let done = std::mem::replace(&mut writer, next);
                    let g = done.generation();
                    result.output_bytes += done.data_bytes();
                    done.finish(position)?;
                    written.push(g);
                }
                writer.append(&min, &p)?;
                writer_empty = false;
                result.output_partitions += 1;
            }
        }
        progress(result.input_partitions);
    }
    if writer_empty {
        writer.abandon();
    } else {
        let g = writer.generation();
        result.output_bytes += writer.data_bytes();
        writer.finish(position)?;
        written.push(g);
    }
    Ok((result, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_tiered_buckets_similar_sizes_and_waits_for_min_threshold() {
        let o = SizeTieredOptions {
            min_sstable_size_bytes: 10,
            ..Default::default()
        };
        let sizes = [100, 110, 95, 105, 1000, 990, 5];
        let b = size_tiered_buckets(&sizes, &o);
        assert!(
            b.iter().any(|x| {
                let mut x = x.clone();
                x.sort();
                x == vec![0, 1, 2, 3]
            }),
            "{b:?}"
        );
        assert_eq!(
            size_tiered_candidates(&sizes, &o).map(|mut c| {
                c.sort();
                c
            }),
            Some(vec![0, 1, 2, 3])
        );
        assert_eq!(size_tiered_candidates(&[100, 100, 100], &o), None);
        // tiny SSTables all go to one bucket
        let o2 = SizeTieredOptions::default();
        assert_eq!(
            size_tiered_candidates(&[1, 50, 3000, 7], &o2).map(|c| c.len()),
            Some(4)
        );
    }

    use crate::clustering::ClusteringComparator;
    use crate::data::{Cell, ColumnData, DecoratedKey, Partition, Row, RowCells};
    use crate::sstable::{ChunkCache, SSTableReader, SSTableWriter};
    use bytes::Bytes;

    /// An SSTable of `keys` written at `ts` (with `ttl`), at `level`.
    fn table(
        dir: &std::path::Path,
        g: u64,
        keys: std::ops::Range<u32>,
        ts: i64,
        ttl: i32,
        level: u32,
    ) -> Arc<SSTableReader> {
        let cmp = ClusteringComparator::new(vec![]);
        let mut w = SSTableWriter::create(dir, g, 4096, true, 0.01).expect("writer");
        w.set_level(level);
        let mut ks: Vec<DecoratedKey> = keys
            .map(|k| DecoratedKey::new(Bytes::copy_from_slice(&k.to_be_bytes())))
            .collect();
        ks.sort();
        for k in &ks {
            let mut p = Partition::new();
            let mut cells = RowCells::new();
            let c = if ttl > 0 {
                Cell::expiring(ts, ttl, 1000, Bytes::from_static(b"v"))
            } else {
                Cell::live(ts, Bytes::from_static(b"v"))
            };
            cells.insert("v", ColumnData::Simple(c));
            p.rows.insert(
                crate::clustering::ClusteringKey::row(vec![], cmp.clone()),
                Row {
                    liveness: None,
                    deletion: None,
                    cells,
                },
            );
            w.append(k, &p).expect("append");
        }
        w.finish(0).expect("finish");
        Arc::new(SSTableReader::open(dir, g, cmp, ChunkCache::new(1 << 20)).expect("open"))
    }

    fn gens(t: &CompactionTask) -> Vec<u64> {
        let mut g: Vec<u64> = t.inputs.iter().map(|s| s.generation).collect();
        g.sort();
        g
    }

    #[test]
    fn leveled_compacts_l0_into_l1_with_overlapping_l1_and_promotes_full_levels() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut m = BTreeMap::new();
        m.insert(
            "class".to_string(),
            "org.apache.cassandra.db.compaction.LeveledCompactionStrategy".to_string(),
        );
        m.insert("sstable_size_in_mb".to_string(), "1".to_string());
        let lcs = Strategy::from_map(&m).expect("lcs");
        let l0: Vec<_> = (1..=3)
            .map(|g| table(dir.path(), g, 0..50, 10, 0, 0))
            .collect();
        assert!(
            next_task(&lcs, &l0).is_none(),
            "three L0 SSTables are below min_threshold"
        );
        let mut all = l0.clone();
        all.push(table(dir.path(), 4, 0..50, 10, 0, 0));
        all.push(table(dir.path(), 5, 0..50, 10, 0, 1));
        let t = next_task(&lcs, &all).expect("task");
        assert_eq!(
            gens(&t),
            vec![1, 2, 3, 4, 5],
            "L0 plus the overlapping L1 SSTable"
        );
        assert_eq!(t.output_level, 1);
        assert_eq!(t.max_output_bytes, 1024 * 1024);
        // a level over its size limit (fanout^L * size) pushes one SSTable down
        let mut m2 = m.clone();
        m2.insert("fanout_size".to_string(), "2".to_string());
        let tiny = Strategy::Leveled {
            sstable_size_bytes: 10,
            fanout: 2,
            l0: SizeTieredOptions::default(),
        };
        let l1: Vec<_> = (6..=8)
            .map(|g| {
                table(
                    dir.path(),
                    g,
                    (g as u32 * 100)..(g as u32 * 100 + 10),
                    10,
                    0,
                    1,
                )
            })
            .collect();
        let t = next_task(&tiny, &l1).expect("promotion");
        assert_eq!(t.output_level, 2);
        let mut order: Vec<_> = l1
            .iter()
            .map(|s| (s.stats.min_token, s.generation))
            .collect();
        order.sort();
        assert_eq!(gens(&t), vec![order[0].1], "the first pick starts the ring");
        // the next promotion from L1 starts after the last one, wrapping round
        let last = l1
            .iter()
            .find(|s| s.generation == order[0].1)
            .map(|s| s.stats.max_token)
            .unwrap_or(0);
        let t = next_task_after(&tiny, &l1, &|l| (l == 1).then_some(last)).expect("promotion");
        let after: Vec<u64> = order
            .iter()
            .filter(|(t, _)| *t > last)
            .map(|(_, g)| *g)
            .collect();
        assert_eq!(gens(&t), vec![*after.first().unwrap_or(&order[0].1)]);
        let last_of_all = order.iter().map(|(t, _)| *t).max().unwrap_or(0);
        let t = next_task_after(&tiny, &l1, &|_| Some(last_of_all)).expect("promotion");
        assert_eq!(
            gens(&t),
            vec![order[0].1],
            "wraps round to the first SSTable"
        );
        assert!(Strategy::from_map(&m2).is_ok());
    }

    #[test]
    fn time_window_keeps_one_sstable_per_old_window_and_tiers_the_current_one() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut m = BTreeMap::new();
        m.insert(
            "class".to_string(),
            "org.apache.cassandra.db.compaction.TimeWindowCompactionStrategy".to_string(),
        );
        m.insert("compaction_window_unit".to_string(), "HOURS".to_string());
        m.insert("compaction_window_size".to_string(), "1".to_string());
        let twcs = Strategy::from_map(&m).expect("twcs");
        let hour = 3_600_000_000i64;
        let ss = vec![
            table(dir.path(), 1, 0..10, 10 * hour + 5, 0, 0),
            table(dir.path(), 2, 0..10, 10 * hour + 9, 0, 0),
            table(dir.path(), 3, 0..10, 12 * hour, 0, 0),
            table(dir.path(), 4, 0..10, 12 * hour + 1, 0, 0),
        ];
        let t = next_task(&twcs, &ss).expect("old window");
        assert_eq!(
            gens(&t),
            vec![1, 2],
            "the two SSTables of an older window become one"
        );
        assert!(
            next_task(&twcs, &ss[2..]).is_none(),
            "the current window waits for min_threshold"
        );
        m.insert("compaction_window_unit".to_string(), "WEEKS".to_string());
        assert!(Strategy::from_map(&m).is_err());
    }

    #[test]
    fn fully_expired_sstables_are_dropped_only_when_they_shadow_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let old_live = table(dir.path(), 1, 0..10, 5, 0, 0);
        let expired = table(dir.path(), 2, 0..10, 10, 5, 0); // expires at 1005
        assert!(fully_expired(std::slice::from_ref(&expired), 2000).len() == 1);
        assert!(
            fully_expired(&[old_live.clone(), expired.clone()], 2000).is_empty(),
            "older data it may shadow overlaps"
        );
        assert!(
            fully_expired(std::slice::from_ref(&expired), 1000).is_empty(),
            "not expired before gc_before"
        );
    }

    #[test]
    fn only_partitions_with_something_to_purge_ask_whether_data_exists_outside() {
        use crate::clustering::{ClusteringComparator, ClusteringKey};
        use crate::data::{Cell, ColumnData, Row, RowCells};
        use crate::sstable::ChunkCache;
        use bytes::Bytes;
        let dir = tempfile::tempdir().expect("tmp");
        let cmp = ClusteringComparator::new(vec![]);
        let cache = ChunkCache::new(1 << 20);
        let now = 1_000_000;
        let gc_before = now - 10;
        let part = |cell: Cell| {
            let mut p = Partition::new();
            let mut cells = RowCells::new();
            cells.insert("v", ColumnData::Simple(cell));
            p.rows.insert(
                ClusteringKey::row(vec![], cmp.clone()),
                Row {
                    liveness: None,
                    deletion: None,
                    cells,
                },
            );
            p
        };
        let mut keys: Vec<DecoratedKey> = (0..4u8)
            .map(|i| DecoratedKey::new(Bytes::from(vec![i; 4])))
            .collect();
        keys.sort();
        let live = part(Cell::live(1, Bytes::from_static(b"x")));
        let old_tombstone = part(Cell::tombstone(2, now - 100));
        let new_tombstone = part(Cell::tombstone(3, now - 1));
        let expired_ttl = part(Cell::expiring(4, 10, now - 100, Bytes::from_static(b"y")));
        assert!(!live.may_purge(gc_before));
        assert!(old_tombstone.may_purge(gc_before));
        assert!(!new_tombstone.may_purge(gc_before));
        assert!(expired_ttl.may_purge(gc_before));
        let mut w = SSTableWriter::create(dir.path(), 1, 4096, true, 0.01).expect("writer");
        for (k, p) in keys
            .iter()
            .zip([&live, &old_tombstone, &new_tombstone, &expired_ttl])
        {
            w.append(k, p).expect("append");
        }
        w.finish(1).expect("finish");
        let input = Arc::new(SSTableReader::open(dir.path(), 1, cmp.clone(), cache).expect("open"));
        for data_outside in [true, false] {
            let asked = std::sync::Mutex::new(Vec::new());
            let mut gen = 10 + data_outside as u64;
            let (result, _) = compact(
                std::slice::from_ref(&input),
                &mut || {
                    gen += 2;
                    SSTableWriter::create(dir.path(), gen, 4096, true, 0.01)
                },
                &|_| u64::MAX,
                now,
                &|_| gc_before,
                &[],
                &|k| {
                    asked.lock().expect("lock").push(k.clone());
                    data_outside
                },
                &|_| true,
                &|_| {},
            )
            .expect("compact");
            // asked about the old tombstone and the long-expired cell only
            assert_eq!(
                *asked.lock().expect("lock"),
                vec![keys[1].clone(), keys[3].clone()]
            );
            // purged only when nothing outside can hold what they shadow
            assert_eq!(result.output_partitions, if data_outside { 4 } else { 2 });
        }
    }

    #[test]
    fn options_are_validated() {
        let mut m = BTreeMap::new();
        m.insert("min_threshold".to_string(), "1".to_string());
        assert!(SizeTieredOptions::from_map(&m).is_err());
        m.insert("min_threshold".to_string(), "6".to_string());
        assert_eq!(
            SizeTieredOptions::from_map(&m).expect("ok").min_threshold,
            6
        );
    }
}
