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
use std::sync::Arc;

/// Size-tiered options, with Cassandra's defaults.
#[derive(Debug, Clone)]
pub struct SizeTieredOptions {
    pub min_threshold: usize,
    pub max_threshold: usize,
    pub bucket_low: f64,
    pub bucket_high: f64,
    pub min_sstable_size_bytes: u64,
}

impl Default for SizeTieredOptions {
    fn default() -> Self {
        SizeTieredOptions { min_threshold: 4, max_threshold: 32, bucket_low: 0.5, bucket_high: 1.5, min_sstable_size_bytes: 50 * 1024 * 1024 }
    }
}

impl SizeTieredOptions {
    /// From the table's `compaction` option map; bad values are an error message.
    pub fn from_map(m: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut o = SizeTieredOptions::default();
        let num = |k: &str| -> Result<Option<f64>, String> {
            m.get(k).map(|v| v.parse::<f64>().map_err(|_| format!("{k} must be a number, not '{v}'"))).transpose()
        };
        if let Some(v) = num("min_threshold")? {
            o.min_threshold = v as usize;
        }
        if let Some(v) = num("max_threshold")? {
            o.max_threshold = v as usize;
        }
        if let Some(v) = num("bucket_low")? {
            o.bucket_low = v;
        }
        if let Some(v) = num("bucket_high")? {
            o.bucket_high = v;
        }
        if let Some(v) = num("min_sstable_size")? {
            o.min_sstable_size_bytes = (v * 1024.0 * 1024.0) as u64;
        }
        if o.min_threshold < 2 {
            return Err("min_threshold must be at least 2".into());
        }
        if o.max_threshold < o.min_threshold {
            return Err("max_threshold cannot be smaller than min_threshold".into());
        }
        if o.bucket_high <= o.bucket_low {
            return Err(format!("bucket_high must be greater than bucket_low, but was {}", o.bucket_high));
        }
        Ok(o)
    }
}

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
    let mut eligible: Vec<Vec<usize>> = size_tiered_buckets(sizes, o).into_iter().filter(|b| b.len() >= o.min_threshold).collect();
    eligible.sort_by_key(|b| b.iter().map(|i| sizes[*i]).sum::<u64>() / b.len() as u64);
    eligible.into_iter().next().map(|mut b| {
        b.sort_by_key(|i| sizes[*i]);
        b.truncate(o.max_threshold);
        b
    })
}

/// What a compaction did.
#[derive(Debug, Clone, Default)]
pub struct CompactionResult {
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub input_partitions: u64,
    pub output_partitions: u64,
}

/// Merges `inputs` into a new SSTable of `generation`. `outside(key)` says
/// whether data for the key may exist outside the compaction (other SSTables,
/// memtables): then no tombstone of that key is purged.
#[allow(clippy::too_many_arguments)]
pub fn compact(
    inputs: &[Arc<SSTableReader>],
    writer: SSTableWriter,
    now: i32,
    gc_before: i32,
    outside: &dyn Fn(&DecoratedKey) -> bool,
    progress: &dyn Fn(u64),
) -> Result<CompactionResult, StorageError> {
    let mut result = CompactionResult { input_bytes: inputs.iter().map(|s| s.stats.data_bytes).sum(), ..Default::default() };
    let mut writer = writer;
    let mut scanners = Vec::with_capacity(inputs.len());
    for s in inputs {
        scanners.push(s.scanner()?);
    }
    let mut heads: Vec<Option<(DecoratedKey, Partition)>> = Vec::with_capacity(scanners.len());
    for sc in scanners.iter_mut() {
        heads.push(sc.next().transpose()?);
    }
    let position = inputs.iter().map(|s| s.stats.commitlog_position).max().unwrap_or(0);
    loop {
        let Some(min) = heads.iter().flatten().map(|(k, _)| k).min().cloned() else { break };
        let mut merged: Option<Partition> = None;
        for (i, h) in heads.iter_mut().enumerate() {
            if h.as_ref().map(|(k, _)| *k == min).unwrap_or(false) {
                if let Some((_, p)) = h.take() {
                    result.input_partitions += 1;
                    match &mut merged {
                        Some(m) => m.merge(p, now),
                        None => merged = Some(p),
                    }
                }
                *h = scanners[i].next().transpose()?;
            }
        }
        if let Some(mut p) = merged {
            if p.compact(now, gc_before, !outside(&min)) {
                writer.append(&min, &p)?;
                result.output_partitions += 1;
            }
        }
        progress(result.input_partitions);
    }
    let g = writer.generation();
    let dir = writer.dir().to_path_buf();
    writer.finish(position)?;
    result.output_bytes = crate::sstable::component_size(&dir, g);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_tiered_buckets_similar_sizes_and_waits_for_min_threshold() {
        let o = SizeTieredOptions { min_sstable_size_bytes: 10, ..Default::default() };
        let sizes = [100, 110, 95, 105, 1000, 990, 5];
        let b = size_tiered_buckets(&sizes, &o);
        assert!(b.iter().any(|x| { let mut x = x.clone(); x.sort(); x == vec![0, 1, 2, 3] }), "{b:?}");
        assert_eq!(size_tiered_candidates(&sizes, &o).map(|mut c| { c.sort(); c }), Some(vec![0, 1, 2, 3]));
        assert_eq!(size_tiered_candidates(&[100, 100, 100], &o), None);
        // tiny SSTables all go to one bucket
        let o2 = SizeTieredOptions::default();
        assert_eq!(size_tiered_candidates(&[1, 50, 3000, 7], &o2).map(|c| c.len()), Some(4));
    }

    #[test]
    fn options_are_validated() {
        let mut m = BTreeMap::new();
        m.insert("min_threshold".to_string(), "1".to_string());
        assert!(SizeTieredOptions::from_map(&m).is_err());
        m.insert("min_threshold".to_string(), "6".to_string());
        assert_eq!(SizeTieredOptions::from_map(&m).expect("ok").min_threshold, 6);
    }
}
