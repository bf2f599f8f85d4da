//! A table's compaction parameters (Cassandra's `schema.CompactionParams`):
//! parsed and validated from the table's `compaction` option map by the
//! schema, acted upon by the storage engine's compaction.

use std::collections::BTreeMap;

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
        SizeTieredOptions {
            min_threshold: 4,
            max_threshold: 32,
            bucket_low: 0.5,
            bucket_high: 1.5,
            min_sstable_size_bytes: 50 * 1024 * 1024,
        }
    }
}

impl SizeTieredOptions {
    /// From the table's `compaction` option map; bad values are an error message.
    pub fn from_map(m: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut o = SizeTieredOptions::default();
        let num = |k: &str| -> Result<Option<f64>, String> {
            m.get(k)
                .map(|v| {
                    v.parse::<f64>()
                        .map_err(|_| format!("{k} must be a number, not '{v}'"))
                })
                .transpose()
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
            return Err(format!(
                "bucket_high must be greater than bucket_low, but was {}",
                o.bucket_high
            ));
        }
        Ok(o)
    }
}

/// A table's compaction strategy with its options.
#[derive(Debug, Clone)]
pub enum Strategy {
    SizeTiered(SizeTieredOptions),
    /// LeveledCompactionStrategy: L0 takes flushes; level L holds up to
    /// `fanout^L` SSTables of `sstable_size_bytes`, non-overlapping.
    Leveled {
        sstable_size_bytes: u64,
        fanout: u64,
        l0: SizeTieredOptions,
    },
    /// TimeWindowCompactionStrategy: SSTables grouped by the window of their
    /// newest write; size-tiered inside the current window, one SSTable per
    /// older window.
    TimeWindow {
        window_micros: i64,
        stcs: SizeTieredOptions,
    },
}

impl Default for Strategy {
    fn default() -> Self {
        Strategy::SizeTiered(SizeTieredOptions::default())
    }
}

impl Strategy {
    /// From the table's `compaction` map (class already normalised).
    pub fn from_map(m: &BTreeMap<String, String>) -> Result<Self, String> {
        let class = m
            .get("class")
            .map(|s| s.as_str())
            .unwrap_or("SizeTieredCompactionStrategy");
        let stcs = SizeTieredOptions::from_map(m)?;
        if class.ends_with("LeveledCompactionStrategy") {
            let size_mb: u64 = match m.get("sstable_size_in_mb") {
                Some(v) => v.parse().map_err(|_| {
                    format!("sstable_size_in_mb must be a positive integer, not '{v}'")
                })?,
                None => 160,
            };
            let fanout: u64 = match m.get("fanout_size") {
                Some(v) => v
                    .parse()
                    .map_err(|_| format!("fanout_size must be a positive integer, not '{v}'"))?,
                None => 10,
            };
            if size_mb == 0 || fanout < 2 {
                return Err(
                    "sstable_size_in_mb must be positive and fanout_size at least 2".into(),
                );
            }
            return Ok(Strategy::Leveled {
                sstable_size_bytes: size_mb * 1024 * 1024,
                fanout,
                l0: stcs,
            });
        }
        if class.ends_with("TimeWindowCompactionStrategy") {
            let unit = m
                .get("compaction_window_unit")
                .map(|s| s.to_uppercase())
                .unwrap_or_else(|| "DAYS".into());
            let unit_micros: i64 = match unit.as_str() {
                "MINUTES" => 60_000_000,
                "HOURS" => 3_600_000_000,
                "DAYS" => 86_400_000_000,
                other => {
                    return Err(format!(
                        "{other} is not valid for compaction_window_unit (MINUTES, HOURS or DAYS)"
                    ))
                }
            };
            let size: i64 = match m.get("compaction_window_size") {
                Some(v) => v.parse().map_err(|_| {
                    format!("{v} is not a parsable int (base10) for compaction_window_size")
                })?,
                None => 1,
            };
            if size < 1 {
                return Err(format!(
                    "compaction_window_size value ({size}) must be greater than 1"
                ));
            }
            return Ok(Strategy::TimeWindow {
                window_micros: unit_micros * size,
                stcs,
            });
        }
        Ok(Strategy::SizeTiered(stcs))
    }

    pub fn min_threshold(&self) -> usize {
        match self {
            Strategy::SizeTiered(o)
            | Strategy::Leveled { l0: o, .. }
            | Strategy::TimeWindow { stcs: o, .. } => o.min_threshold,
        }
    }
}
