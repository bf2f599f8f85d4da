//! Schema: keyspaces, tables, columns, user types; their validation as
//! Cassandra does it; and the definitions of the system tables.

use crate::error::{Result, SchemaError as Error};
use sibyl_cql::{Property, PropertyValue};
use sibyl_db::ClusteringComparator;
use sibyl_types::fast_map::FastHashMap;
use sibyl_types::{CqlType, UserType};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ColumnKind {
    PartitionKey,
    Clustering,
    Static,
    Regular,
}

impl ColumnKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ColumnKind::PartitionKey => "partition_key",
            ColumnKind::Clustering => "clustering",
            ColumnKind::Static => "static",
            ColumnKind::Regular => "regular",
        }
    }

    pub fn parse(s: &str) -> Option<ColumnKind> {
        Some(match s {
            "partition_key" => ColumnKind::PartitionKey,
            "clustering" => ColumnKind::Clustering,
            "static" => ColumnKind::Static,
            "regular" => ColumnKind::Regular,
            _ => return None,
        })
    }

    pub fn is_primary_key(&self) -> bool {
        matches!(self, ColumnKind::PartitionKey | ColumnKind::Clustering)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnMetadata {
    pub name: String,
    pub typ: CqlType,
    pub kind: ColumnKind,
    /// Position within the partition key or clustering; -1 otherwise.
    pub position: i32,
    /// Clustering column in DESC order.
    pub reversed: bool,
}

/// Table options, with Cassandra 5.0's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct TableParams {
    pub additional_write_policy: String,
    pub allow_auto_snapshot: bool,
    pub bloom_filter_fp_chance: f64,
    pub caching: BTreeMap<String, String>,
    pub cdc: bool,
    pub comment: String,
    pub compaction: BTreeMap<String, String>,
    pub compression: BTreeMap<String, String>,
    pub crc_check_chance: f64,
    pub default_time_to_live: i32,
    pub extensions: BTreeMap<String, bytes::Bytes>,
    pub gc_grace_seconds: i32,
    pub incremental_backups: bool,
    pub max_index_interval: i32,
    pub memtable: String,
    pub memtable_flush_period_in_ms: i32,
    pub min_index_interval: i32,
    pub read_repair: String,
    pub speculative_retry: String,
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Default for TableParams {
    fn default() -> Self {
        TableParams {
            additional_write_policy: "99p".into(),
            allow_auto_snapshot: true,
            bloom_filter_fp_chance: 0.01,
            caching: map(&[("keys", "ALL"), ("rows_per_partition", "NONE")]),
            cdc: false,
            comment: String::new(),
            compaction: map(&[
                (
                    "class",
                    "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
                ),
                ("max_threshold", "32"),
                ("min_threshold", "4"),
            ]),
            compression: map(&[
                ("chunk_length_in_kb", "16"),
                ("class", "org.apache.cassandra.io.compress.LZ4Compressor"),
            ]),
            crc_check_chance: 1.0,
            default_time_to_live: 0,
            extensions: BTreeMap::new(),
            gc_grace_seconds: 864000,
            incremental_backups: true,
            max_index_interval: 2048,
            memtable: "default".into(),
            memtable_flush_period_in_ms: 0,
            min_index_interval: 128,
            read_repair: "BLOCKING".into(),
            speculative_retry: "99p".into(),
        }
    }
}

/// The `extensions` key that keeps a table's `tombstone_gc` mode (absent:
/// `timeout`, Cassandra's rule).
pub const TOMBSTONE_GC: &str = "tombstone_gc";

impl TableParams {
    /// `tombstone_gc`'s mode: `timeout`, `repair`, `disabled` or `immediate`.
    pub fn tombstone_gc(&self) -> String {
        self.extensions
            .get(TOMBSTONE_GC)
            .map(|m| String::from_utf8_lossy(m).into_owned())
            .unwrap_or_else(|| "timeout".into())
    }
}

/// A property's value as a string (Cassandra's `PropertyDefinitions.getString`).
pub fn prop_text(p: &Property) -> Result<String> {
    p.value.as_text().ok_or_else(|| {
        Error::Syntax(format!(
            "Invalid value for property '{}'. It should be a string",
            p.name
        ))
    })
}

/// A map property (Cassandra's `PropertyDefinitions.getMap`).
pub fn prop_map(p: &Property) -> Result<BTreeMap<String, String>> {
    match &p.value {
        PropertyValue::Map(m) => Ok(m.iter().cloned().collect()),
        _ => Err(Error::Syntax(format!(
            "Invalid value for property '{}'. It should be a map.",
            p.name
        ))),
    }
}

fn prop_int(p: &Property) -> Result<i32> {
    let t = prop_text(p)?;
    t.parse::<i32>()
        .map_err(|_| Error::Syntax(format!("Invalid integer value {} for '{}'", t, p.name)))
}

fn prop_double(p: &Property) -> Result<f64> {
    let t = prop_text(p)?;
    t.parse::<f64>()
        .map_err(|_| Error::Syntax(format!("Invalid double value {} for '{}'", t, p.name)))
}

/// A boolean property (Cassandra's `PropertyDefinitions.parseBoolean`).
pub fn prop_bool(p: &Property) -> Result<bool> {
    let t = prop_text(p)?;
    match t.to_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(Error::Syntax(format!(
            "Invalid boolean value {t} for '{}'. Positive values can be '1', 'true' or 'yes'. Negative values can be '0', 'false' or 'no'.",
            p.name
        ))),
    }
}

fn full_class(short: &str, package: &str) -> String {
    if short.contains('.') {
        short.to_string()
    } else {
        format!("{package}.{short}")
    }
}

/// The table properties Cassandra 5.0 knows, Scylla's `tombstone_gc` among
/// them.
const KNOWN_TABLE_PROPERTIES: [&str; 20] = [
    "additional_write_policy",
    "allow_auto_snapshot",
    "bloom_filter_fp_chance",
    "caching",
    "cdc",
    "comment",
    "compaction",
    "compression",
    "crc_check_chance",
    "default_time_to_live",
    "extensions",
    "tombstone_gc",
    "gc_grace_seconds",
    "incremental_backups",
    "max_index_interval",
    "memtable",
    "memtable_flush_period_in_ms",
    "min_index_interval",
    "read_repair",
    "speculative_retry",
];

impl TableParams {
    /// Applies `WITH` properties, validating names and values like Cassandra.
    /// Leveled compaction defaults `bloom_filter_fp_chance` to 0.1.
    pub fn apply(&mut self, props: &[Property]) -> Result<()> {
        // Cassandra validates the options given over the defaults (not over
        // an altered table's current options)
        let mut given = TableParams::default();
        given.apply_each(props, false)?;
        given.validate()?;
        self.apply_each(props, false)?;
        let lcs = self
            .compaction
            .get("class")
            .map(|c| c.ends_with("LeveledCompactionStrategy"))
            .unwrap_or(false);
        if lcs
            && !props.iter().any(|p| p.name == "bloom_filter_fp_chance")
            && self.bloom_filter_fp_chance == 0.01
        {
            self.bloom_filter_fp_chance = 0.1;
        }
        Ok(())
    }

    /// What Cassandra's `TableAttributes.build` checks when it reads the
    /// properties, before a statement looks its table up (so even under
    /// IF [NOT] EXISTS): the values' forms, caching, compression and the
    /// compaction class, not the ranges, the compaction strategy's own
    /// options or unknown names, which come once the table is built.
    pub fn check_forms(props: &[Property]) -> Result<()> {
        TableParams::default().apply_each(props, true)
    }

    /// `forms_only`: skip the checks `check_forms` leaves for later.
    fn apply_each(&mut self, props: &[Property], forms_only: bool) -> Result<()> {
        for p in props {
            match p.name.as_str() {
                "additional_write_policy" => {
                    // (Cassandra's message names 'speculative_retry')
                    self.additional_write_policy = parse_speculative_retry(&prop_text(p)?)?
                }
                "allow_auto_snapshot" => self.allow_auto_snapshot = prop_bool(p)?,
                "bloom_filter_fp_chance" => self.bloom_filter_fp_chance = prop_double(p)?,
                "caching" => {
                    let m = prop_map(p)?;
                    let unknown: Vec<String> = m
                        .keys()
                        .filter(|k| !matches!(k.as_str(), "keys" | "rows_per_partition"))
                        .cloned()
                        .collect();
                    let mut c = map(&[("keys", "ALL"), ("rows_per_partition", "NONE")]);
                    for (k, v) in m {
                        match k.as_str() {
                            "keys" => {
                                let up = v.to_uppercase();
                                if up != "ALL" && up != "NONE" {
                                    return Err(Error::Config(format!("Invalid value '{v}' for caching sub-option 'keys': only 'ALL' and 'NONE' are allowed")));
                                }
                                c.insert(k, up);
                            }
                            "rows_per_partition" => {
                                let up = v.to_uppercase();
                                if up != "ALL" && up != "NONE" && v.parse::<u32>().is_err() {
                                    return Err(Error::Config(format!("Invalid value '{v}' for caching sub-option 'rows_per_partition': only 'ALL', 'NONE', and integer values are allowed")));
                                }
                                c.insert(k, if v.parse::<u32>().is_ok() { v } else { up });
                            }
                            _ => return Err(Error::Config(format!("Invalid caching sub-options [{}]: only 'keys' and 'rows_per_partition' are allowed", sibyl_types::ident::java_hash_set(unknown).join(", ")))),
                        }
                    }
                    self.caching = c;
                }
                "cdc" => self.cdc = prop_bool(p)?,
                "comment" => self.comment = prop_text(p)?,
                "compaction" => {
                    let mut m = prop_map(p)?;
                    let Some(class) = m.remove("class") else {
                        return Err(Error::Config(
                            "Missing sub-option 'class' for the 'compaction' option".into(),
                        ));
                    };
                    let class = match class.as_str() {
                        "DateTieredCompactionStrategy"
                        | "org.apache.cassandra.db.compaction.DateTieredCompactionStrategy" => {
                            // removed in Cassandra 4; its users get time-window compaction
                            tracing::warn!("DateTieredCompactionStrategy is deprecated; using TimeWindowCompactionStrategy");
                            for k in [
                                "base_time_seconds",
                                "max_sstable_age_days",
                                "max_window_size_seconds",
                                "timestamp_resolution",
                            ] {
                                m.remove(k);
                            }
                            "org.apache.cassandra.db.compaction.TimeWindowCompactionStrategy"
                                .to_string()
                        }
                        c => full_class(c, "org.apache.cassandra.db.compaction"),
                    };
                    let known = [
                        "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
                        "org.apache.cassandra.db.compaction.LeveledCompactionStrategy",
                        "org.apache.cassandra.db.compaction.TimeWindowCompactionStrategy",
                        "org.apache.cassandra.db.compaction.UnifiedCompactionStrategy",
                    ];
                    if !known.contains(&class.as_str()) {
                        return Err(Error::Config(format!(
                            "Unable to find compaction strategy class '{class}'"
                        )));
                    }
                    if forms_only {
                        continue;
                    }
                    validate_compaction_options(&class, &m)?;
                    m.insert("class".into(), class);
                    m.entry("max_threshold".into())
                        .or_insert_with(|| "32".into());
                    m.entry("min_threshold".into())
                        .or_insert_with(|| "4".into());
                    sibyl_db::compaction_params::Strategy::from_map(&m).map_err(Error::Config)?;
                    self.compaction = m;
                }
                "compression" => {
                    let mut m = prop_map(p)?;
                    let enabled = m
                        .get("enabled")
                        .is_none_or(|v| v.eq_ignore_ascii_case("true"));
                    if !m.is_empty() && enabled && !m.contains_key("class") {
                        return Err(Error::Config(
                            "Missing sub-option 'class' for the 'compression' option.".into(),
                        ));
                    }
                    if !enabled {
                        if m.len() > 1 {
                            return Err(Error::Config(
                                "If the 'enabled' option is set to false no other options must be specified".into(),
                            ));
                        }
                        self.compression = map(&[("enabled", "false")]);
                        continue;
                    }
                    m.remove("enabled");
                    let class = m.remove("class");
                    let Some(class) = class else {
                        return Err(Error::Config(
                            "Missing sub-option 'class' for the 'compression' option.".into(),
                        ));
                    };
                    let class = full_class(&class, "org.apache.cassandra.io.compress");
                    let known = [
                        "org.apache.cassandra.io.compress.LZ4Compressor",
                        "org.apache.cassandra.io.compress.ZstdCompressor",
                        "org.apache.cassandra.io.compress.SnappyCompressor",
                        "org.apache.cassandra.io.compress.DeflateCompressor",
                        "org.apache.cassandra.io.compress.NoopCompressor",
                    ];
                    if !known.contains(&class.as_str()) {
                        return Err(Error::Config(format!(
                            "Could not create Compression for type {class}"
                        )));
                    }
                    let chunk = m
                        .remove("chunk_length_in_kb")
                        .unwrap_or_else(|| "16".into());
                    validate_compression_options(&class, &chunk, &m)?;
                    let mut out = BTreeMap::new();
                    out.insert("chunk_length_in_kb".to_string(), chunk);
                    out.insert("class".to_string(), class);
                    out.extend(m);
                    self.compression = out;
                }
                "crc_check_chance" => self.crc_check_chance = prop_double(p)?,
                "default_time_to_live" => {
                    let v = prop_int(p)?;
                    if forms_only {
                        continue;
                    }
                    if v < 0 {
                        return Err(Error::Config(format!(
                            "default_time_to_live must be greater than or equal to 0 (got {v})"
                        )));
                    }
                    if v > 630_720_000 {
                        return Err(Error::Config(format!("default_time_to_live must be less than or equal to 630720000 (got {v})")));
                    }
                    self.default_time_to_live = v;
                }
                "extensions" => {}
                _ if forms_only && !KNOWN_TABLE_PROPERTIES.contains(&p.name.as_str()) => {}
                // ScyllaDB's option (kept in `extensions`): when tombstones
                // may be purged
                "tombstone_gc" => {
                    let m = prop_map(p)?;
                    let mut mode = "timeout".to_string();
                    for (k, v) in &m {
                        match k.as_str() {
                            "mode" => {
                                let v = v.to_ascii_lowercase();
                                if !["timeout", "repair", "disabled", "immediate"]
                                    .contains(&v.as_str())
                                {
                                    return Err(Error::Config(format!(
                                        "Invalid tombstone_gc mode '{v}': timeout, repair, disabled or immediate"
                                    )));
                                }
                                mode = v;
                            }
                            other => {
                                return Err(Error::Config(format!(
                                    "Unknown tombstone_gc sub-option '{other}'"
                                )))
                            }
                        }
                    }
                    if mode == "timeout" {
                        self.extensions.remove(TOMBSTONE_GC);
                    } else {
                        self.extensions
                            .insert(TOMBSTONE_GC.into(), bytes::Bytes::from(mode));
                    }
                }
                "gc_grace_seconds" => {
                    let v = prop_int(p)?;
                    if forms_only {
                        continue;
                    }
                    if v < 0 {
                        return Err(Error::Config(format!(
                            "gc_grace_seconds must be greater than or equal to 0 (got {v})"
                        )));
                    }
                    self.gc_grace_seconds = v;
                }
                "incremental_backups" => self.incremental_backups = prop_bool(p)?,
                "max_index_interval" => self.max_index_interval = prop_int(p)?,
                "memtable" => {
                    let v = prop_text(p)?;
                    // (the configurations of Cassandra's default cassandra.yaml)
                    if v != "default" {
                        return Err(Error::Config(format!(
                            "Memtable configuration \"{v}\" not found."
                        )));
                    }
                    self.memtable = v
                }
                "memtable_flush_period_in_ms" => self.memtable_flush_period_in_ms = prop_int(p)?,
                "min_index_interval" => self.min_index_interval = prop_int(p)?,
                "read_repair" => {
                    let v = prop_text(p)?.to_uppercase();
                    if v != "BLOCKING" && v != "NONE" {
                        return Err(Error::Config(format!("Invalid read repair strategy {v}")));
                    }
                    self.read_repair = v;
                }
                "speculative_retry" => {
                    self.speculative_retry = parse_speculative_retry(&prop_text(p)?)?
                }
                other => return Err(Error::Syntax(format!("Unknown property '{other}'"))),
            }
        }
        Ok(())
    }
}

impl TableParams {
    /// Cassandra's `TableParams.validate`: the ranges of the options.
    pub fn validate(&self) -> Result<()> {
        // (BloomCalculations.minSupportedBloomFilterFpChance())
        const MIN_BLOOM: f64 = 6.71e-5;
        let fail = |m: String| Err(Error::Config(m));
        if self.bloom_filter_fp_chance <= MIN_BLOOM || self.bloom_filter_fp_chance > 1.0 {
            return fail(format!(
                "bloom_filter_fp_chance must be larger than {} and less than or equal to 1.0 (got {})",
                java_double(MIN_BLOOM),
                java_double(self.bloom_filter_fp_chance)
            ));
        }
        if self.crc_check_chance < 0.0 || self.crc_check_chance > 1.0 {
            return fail(format!(
                "crc_check_chance must be larger than or equal to 0 and smaller than or equal to 1.0 (got {})",
                java_double(self.crc_check_chance)
            ));
        }
        if self.min_index_interval < 1 {
            return fail(format!(
                "min_index_interval must be greater than or equal to 1 (got {})",
                self.min_index_interval
            ));
        }
        if self.max_index_interval < self.min_index_interval {
            return fail(format!(
                "max_index_interval must be greater than or equal to min_index_interval ({}) (got {})",
                self.min_index_interval, self.max_index_interval
            ));
        }
        if self.memtable_flush_period_in_ms < 0 {
            return fail(format!(
                "memtable_flush_period_in_ms must be greater than or equal to 0 (got {})",
                self.memtable_flush_period_in_ms
            ));
        }
        Ok(())
    }
}

/// Java's `Double.toString`: `0.0`, `1.5`, `6.71E-5`.
pub fn java_double(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let a = v.abs();
    if (1e-3..1e7).contains(&a) {
        let s = format!("{v}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = format!("{v:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = if m.contains('.') {
            m.to_string()
        } else {
            format!("{m}.0")
        };
        format!("{m}E{e}")
    }
}

/// Cassandra's speculative retry option (also read for
/// `additional_write_policy`, whose messages name 'speculative_retry').
fn parse_speculative_retry(v: &str) -> Result<String> {
    if let Some(r) = SpeculativeRetry::parse(v) {
        return Ok(r.to_string());
    }
    let t = v.trim().to_ascii_lowercase();
    let pct = t
        .strip_suffix("percentile")
        .or_else(|| t.strip_suffix('p'))
        .and_then(|x| x.parse::<f64>().ok());
    if pct.is_some() && !t.starts_with("min(") && !t.starts_with("max(") {
        return Err(Error::Config(format!(
            "Invalid value {v} for PERCENTILE option 'speculative_retry': must be between (0.0 and 100.0)"
        )));
    }
    Err(Error::Config(format!(
        "Invalid value {v} for option 'speculative_retry'"
    )))
}

/// Java's `Long.parseLong`/`Integer.parseInt` of a compaction sub-option,
/// with the compaction strategies' message.
fn compaction_long(key: &str, v: &str) -> Result<i64> {
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Config(format!(
            "{v} is not a parsable int (base10) for {key}"
        )));
    }
    v.parse::<i64>()
        .map_err(|_| Error::Config(format!("{v} is not a parsable int (base10) for {key}")))
}

fn compaction_float(key: &str, v: &str, what: &str) -> Result<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|_| !v.trim().is_empty())
        .ok_or_else(|| Error::Config(format!("{v} is not a parsable {what} for {key}")))
}

/// Cassandra's compaction strategies' `validateOptions` and
/// `CompactionParams.validate`, with their messages and order.
fn validate_compaction_options(class: &str, m: &BTreeMap<String, String>) -> Result<()> {
    let short = class.rsplit('.').next().unwrap_or(class);
    let cfg = |s: String| Error::Config(s);
    let mut known: Vec<&str> = vec![
        "tombstone_threshold",
        "tombstone_compaction_interval",
        "unchecked_tombstone_compaction",
        "only_purge_repaired_tombstones",
        "log_all",
        "enabled",
        "provide_overlapping_tombstones",
        "min_threshold",
        "max_threshold",
    ];
    // AbstractCompactionStrategy.validateOptions
    if let Some(v) = m.get("tombstone_threshold") {
        let t = v.trim().parse::<f32>().map_err(|_| {
            cfg(format!(
                "{v} is not a parsable int (base10) for tombstone_threshold"
            ))
        })?;
        if t < 0.0 {
            return Err(cfg(format!(
                "tombstone_threshold must be greater than 0, but was {t:.6}"
            )));
        }
    }
    if let Some(v) = m.get("tombstone_compaction_interval") {
        let i = compaction_long("tombstone_compaction_interval", v)?;
        if i < 0 {
            return Err(cfg(format!(
                "tombstone_compaction_interval must be greater than 0, but was {i}"
            )));
        }
    }
    let is_bool = |v: &str| v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false");
    if let Some(v) = m
        .get("unchecked_tombstone_compaction")
        .filter(|v| !is_bool(v))
    {
        return Err(cfg(format!(
            "'unchecked_tombstone_compaction' should be either 'true' or 'false', not '{v}'"
        )));
    }
    if let Some(v) = m.get("log_all").filter(|v| !is_bool(v)) {
        return Err(cfg(format!(
            "'log_all' should either be 'true' or 'false', not {v}"
        )));
    }
    if let Some(v) = m.get("enabled").filter(|v| !is_bool(v)) {
        return Err(cfg(format!(
            "enabled should either be 'true' or 'false', not {v}"
        )));
    }
    if let Some(v) = m.get("provide_overlapping_tombstones") {
        let up = v.to_uppercase();
        if !matches!(up.as_str(), "NONE" | "ROW" | "CELL") {
            return Err(cfg(format!("Invalid value {up} for 'provide_overlapping_tombstones' compaction sub-option - must be one of the following [NONE, ROW, CELL].")));
        }
    }
    let stcs = |known: &mut Vec<&str>| -> Result<()> {
        known.extend(["min_sstable_size", "bucket_low", "bucket_high"]);
        if let Some(v) = m.get("min_sstable_size") {
            let n = compaction_long("min_sstable_size", v)?;
            if n < 0 {
                return Err(cfg(format!("min_sstable_size must be non negative: {n}")));
            }
        }
        let low = match m.get("bucket_low") {
            Some(v) => compaction_float("bucket_low", v, "float")?,
            None => 0.5,
        };
        let high = match m.get("bucket_high") {
            Some(v) => compaction_float("bucket_high", v, "float")?,
            None => 1.5,
        };
        if high <= low {
            return Err(cfg(format!(
                "bucket_high value ({}) is less than or equal to the bucket_low value ({})",
                java_double(high),
                java_double(low)
            )));
        }
        Ok(())
    };
    match short {
        "SizeTieredCompactionStrategy" => stcs(&mut known)?,
        "LeveledCompactionStrategy" => {
            for (key, default) in [("sstable_size_in_mb", "1"), ("fanout_size", "10")] {
                let v = m.get(key).map(String::as_str).unwrap_or(default);
                let n = compaction_long(key, v)?;
                if n < 1 {
                    return Err(cfg(format!("{key} must be larger than 0, but was {n}")));
                }
            }
            known.extend([
                "sstable_size_in_mb",
                "fanout_size",
                "single_sstable_uplevel",
            ]);
            stcs(&mut known)?;
        }
        "TimeWindowCompactionStrategy" => {
            if let Some(v) = m.get("timestamp_resolution") {
                if !matches!(
                    v.as_str(),
                    "SECONDS" | "MILLISECONDS" | "MICROSECONDS" | "NANOSECONDS"
                ) {
                    return Err(cfg(format!("{v} is not valid for timestamp_resolution")));
                }
            }
            if let Some(v) = m.get("compaction_window_unit") {
                if !matches!(v.as_str(), "MINUTES" | "HOURS" | "DAYS") {
                    return Err(cfg(format!("{v} is not valid for compaction_window_unit")));
                }
            }
            if let Some(v) = m.get("compaction_window_size") {
                let n = compaction_long("compaction_window_size", v)?;
                if n < 1 {
                    return Err(cfg(format!(
                        "{n} must be greater than 1 for compaction_window_size"
                    )));
                }
            }
            if let Some(v) = m.get("expired_sstable_check_frequency_seconds") {
                let n = compaction_long("expired_sstable_check_frequency_seconds", v)?;
                if n < 0 {
                    return Err(cfg(format!(
                        "expired_sstable_check_frequency_seconds must not be negative, but was {n}"
                    )));
                }
            }
            if let Some(v) = m
                .get("unsafe_aggressive_sstable_expiration")
                .filter(|v| !is_bool(v))
            {
                return Err(cfg(format!(
                    "unsafe_aggressive_sstable_expiration is not 'true' or 'false' ({v})"
                )));
            }
            known.extend([
                "timestamp_resolution",
                "compaction_window_unit",
                "compaction_window_size",
                "expired_sstable_check_frequency_seconds",
                "unsafe_aggressive_sstable_expiration",
            ]);
            stcs(&mut known)?;
        }
        "UnifiedCompactionStrategy" => {
            if let Some(v) = m.get("scaling_parameters") {
                for p in v.split(',').map(str::trim) {
                    let ok = p == "N"
                        || ((p.starts_with('L') || p.starts_with('T'))
                            && p.len() > 1
                            && p[1..].bytes().all(|b| b.is_ascii_digit()))
                        || {
                            let d = p.strip_prefix(['+', '-']).unwrap_or(p);
                            !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
                        };
                    if !ok {
                        return Err(cfg(format!(
                            "Scaling parameter {p} must match N|L[0-9]+|T[0-9]+|[+-]?[0-9]+"
                        )));
                    }
                }
            }
            if let Some(v) = m.get("base_shard_count") {
                let n = compaction_long("base_shard_count", v)?;
                if n <= 0 {
                    return Err(cfg(format!(
                        "Invalid configuration, base_shard_count should be positive: {n}"
                    )));
                }
            }
            known.extend([
                "scaling_parameters",
                "base_shard_count",
                "target_sstable_size",
                "min_sstable_size",
                "flush_size_override",
                "max_sstables_to_compact",
                "sstable_growth",
                "expired_sstable_check_frequency_seconds",
                "unsafe_aggressive_sstable_expiration",
                "overlap_inclusion_method",
                "survival_factor",
                "static_scaling_factors",
            ]);
        }
        _ => return Ok(()),
    }
    let unknown: Vec<String> = m
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(cfg(format!(
            "Properties specified [{}] are not understood by {short}",
            sibyl_types::ident::java_hash_set(unknown).join(", ")
        )));
    }
    // CompactionParams.validate
    for key in ["min_threshold", "max_threshold"] {
        if let Some(v) = m.get(key) {
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(cfg(format!(
                    "Invalid value {v} for '{key}' compaction sub-option - must be an integer"
                )));
            }
        }
    }
    let threshold = |key: &str, default: i64| {
        m.get(key)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(default)
    };
    let (min, max) = (
        threshold("min_threshold", 4),
        threshold("max_threshold", 32),
    );
    if min <= 0 || max <= 0 {
        return Err(cfg("Disabling compaction by setting compaction thresholds to 0 has been removed, set the compaction option 'enabled' to false instead.".into()));
    }
    if min <= 1 {
        return Err(cfg(format!(
            "Min compaction threshold cannot be less than 2 (got {min})"
        )));
    }
    if min > max {
        return Err(cfg(format!("Min compaction threshold (got {min}) cannot be greater than max compaction threshold (got {max})")));
    }
    Ok(())
}

/// Cassandra's `CompressionParams` checks: the compressor's own options,
/// the chunk length, `min_compress_ratio`.
fn validate_compression_options(
    class: &str,
    chunk: &str,
    m: &BTreeMap<String, String>,
) -> Result<()> {
    let cfg = |s: String| Err(Error::Config(s));
    let chunk_kb: i64 = match chunk.parse::<i32>() {
        Ok(n) if n as i64 > (i32::MAX / 1024) as i64 => {
            return cfg(format!("Value of chunk_length_in_kb is too large ({n})"))
        }
        Ok(n) => n as i64,
        Err(_) => return cfg("Invalid value for chunk_length_in_kb".into()),
    };
    let ratio = match m.get("min_compress_ratio") {
        Some(v) => match v.trim().parse::<f64>() {
            Ok(r) => r,
            Err(_) => return cfg("Invalid value for min_compress_ratio".into()),
        },
        None => 0.0,
    };
    let short = class.rsplit('.').next().unwrap_or(class);
    let supported: &[&str] = match short {
        "LZ4Compressor" => &["lz4_compressor_type", "lz4_high_compressor_level"],
        "ZstdCompressor" => &["compression_level"],
        _ => &[],
    };
    if short == "ZstdCompressor" {
        if let Some(v) = m.get("compression_level") {
            match v.parse::<i32>() {
                Ok(l) if !(-131072..=22).contains(&l) => {
                    return cfg(format!("ZstdCompressor.create() threw an error: java.lang.IllegalArgumentException compression_level={l} is invalid"))
                }
                Ok(_) => {}
                Err(_) => {
                    return cfg(format!("ZstdCompressor.create() threw an error: java.lang.NumberFormatException For input string: \"{v}\""))
                }
            }
        }
    }
    if let Some(k) = m
        .keys()
        .find(|k| k.as_str() != "min_compress_ratio" && !supported.contains(&k.as_str()))
    {
        return cfg(format!("Unknown compression options {k}"));
    }
    let chunk_len = chunk_kb * 1024;
    if chunk_len <= 0 {
        return cfg("Invalid negative or null chunk_length_in_kb".into());
    }
    if chunk_len & (chunk_len - 1) != 0 {
        return cfg("chunk_length_in_kb must be a power of 2".into());
    }
    let max_compressed = (chunk_len as f64 / ratio).min(i32::MAX as f64).ceil();
    if max_compressed < 0.0 {
        return cfg("Invalid negative min_compress_ratio".into());
    }
    if max_compressed > chunk_len as f64 && max_compressed < i32::MAX as f64 {
        return cfg("min_compress_ratio can either be 0 or greater than or equal to 1".into());
    }
    Ok(())
}

/// A table's definition.
#[derive(Debug, Clone)]
pub struct TableMetadata {
    pub keyspace: String,
    pub name: String,
    pub id: uuid::Uuid,
    /// Partition key columns in order, clustering columns in order, then the
    /// others by name (static first), as Cassandra lists them.
    pub columns: Vec<ColumnMetadata>,
    pub partition_key_count: usize,
    pub clustering_count: usize,
    pub params: TableParams,
    pub comparator: Arc<ClusteringComparator>,
    /// Dropped columns: name → (type, drop time in micros).
    pub dropped: BTreeMap<String, (CqlType, i64)>,
    pub is_counter: bool,
    /// Secondary indexes, by name order.
    pub indexes: Vec<crate::index::IndexMetadata>,
    /// Rows made on read: the tables of `system_views`, and the computed
    /// tables of `system` (`IndexInfo`, the size estimates).
    pub is_virtual: bool,
    /// `WITH COMPACT STORAGE`: one of Cassandra's legacy layouts.
    pub compact: Option<CompactStorage>,
}

/// What makes a COMPACT STORAGE table (still created by Cassandra 5.0 while
/// `compact_tables_enabled`) differ from a CQL table. Its rows have no row
/// marker: a row lives only while one of its cells does.
///
/// A table declared without clustering columns is *static-compact*:
/// Cassandra makes its declared columns static and adds a hidden clustering
/// column (`column1 text`) and a hidden value column (`value blob`, or
/// `counter`). Sibyl keeps the declared columns as the regular columns of
/// the partition's one row (what a reader sees is the same) and the hidden
/// columns only as names, for `system_schema` and DESCRIBE.
///
/// A table with clustering columns is *dense*: at most one regular column,
/// the value. Declared without one, Cassandra adds a hidden `value` column
/// of type `empty`, always written empty; Sibyl writes a row marker in its
/// place (the row lives while it does, as the empty cell would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactStorage {
    /// A static-compact table's hidden clustering column (`column1`...).
    pub hidden_clustering: Option<String>,
    /// The hidden value column's name and type (`blob`, `counter`, `empty`).
    pub hidden_value: Option<(String, String)>,
}

impl TableMetadata {
    /// Builds a table from its columns (kinds and positions set).
    pub fn new(
        keyspace: &str,
        name: &str,
        id: uuid::Uuid,
        mut columns: Vec<ColumnMetadata>,
        params: TableParams,
    ) -> Self {
        columns.sort_by(|a, b| {
            a.kind.cmp(&b.kind).then_with(|| {
                if a.kind.is_primary_key() {
                    a.position.cmp(&b.position)
                } else {
                    a.name.cmp(&b.name)
                }
            })
        });
        let partition_key_count = columns
            .iter()
            .filter(|c| c.kind == ColumnKind::PartitionKey)
            .count();
        let clustering_count = columns
            .iter()
            .filter(|c| c.kind == ColumnKind::Clustering)
            .count();
        let comparator = ClusteringComparator::new(
            columns
                .iter()
                .filter(|c| c.kind == ColumnKind::Clustering)
                .map(|c| (c.typ.clone(), c.reversed))
                .collect(),
        );
        let is_counter = columns.iter().any(|c| c.typ.is_counter());
        TableMetadata {
            keyspace: keyspace.into(),
            name: name.into(),
            id,
            columns,
            partition_key_count,
            clustering_count,
            params,
            comparator,
            dropped: BTreeMap::new(),
            is_counter,
            indexes: Vec::new(),
            is_virtual: false,
            compact: None,
        }
    }

    /// A static-compact table (see [`CompactStorage`]).
    pub fn is_static_compact(&self) -> bool {
        self.compact
            .as_ref()
            .is_some_and(|c| c.hidden_clustering.is_some())
    }

    /// A dense COMPACT STORAGE table (see [`CompactStorage`]).
    pub fn is_dense(&self) -> bool {
        self.compact.is_some() && self.clustering_count > 0
    }

    /// `system_schema.tables.flags`, sorted: `compound` for CQL tables,
    /// `dense` (and `compound` with several clustering columns) for dense
    /// ones, none for static-compact ones; `counter` for counter tables.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = Vec::new();
        if self.compact.is_none() || self.clustering_count > 1 {
            f.push("compound");
        }
        if self.is_counter
            || self
                .compact
                .as_ref()
                .and_then(|c| c.hidden_value.as_ref())
                .is_some_and(|(_, t)| t == "counter")
        {
            f.push("counter");
        }
        if self.is_dense() {
            f.push("dense");
        }
        f
    }

    /// `ks.table`, each quoted when it needs to be: Cassandra's
    /// `TableMetadata.toString()`, as its messages print a table.
    pub fn display_name(&self) -> String {
        format!(
            "{}.{}",
            sibyl_types::ident::maybe_quote(&self.keyspace),
            sibyl_types::ident::maybe_quote(&self.name)
        )
    }

    pub fn column(&self, name: &str) -> Option<&ColumnMetadata> {
        self.columns.iter().find(|c| c.name == name)
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn partition_key(&self) -> &[ColumnMetadata] {
        &self.columns[..self.partition_key_count]
    }

    pub fn clustering(&self) -> &[ColumnMetadata] {
        &self.columns[self.partition_key_count..self.partition_key_count + self.clustering_count]
    }

    pub fn regular_and_static(&self) -> &[ColumnMetadata] {
        &self.columns[self.partition_key_count + self.clustering_count..]
    }

    pub fn has_static(&self) -> bool {
        self.columns.iter().any(|c| c.kind == ColumnKind::Static)
    }
}

impl TableMetadata {
    /// Where the table's SSTables live: `<data>/<keyspace>/<table>-<id>`.
    pub fn directory(&self, data_dir: &std::path::Path) -> std::path::PathBuf {
        table_directory(data_dir, &self.keyspace, &self.name, self.id)
    }
}

/// Where a table's SSTables live: `DATA/ks/name-<id without dashes>`, as
/// Cassandra lays them out.
pub fn table_directory(
    data_dir: &std::path::Path,
    keyspace: &str,
    name: &str,
    id: uuid::Uuid,
) -> std::path::PathBuf {
    data_dir
        .join(keyspace)
        .join(format!("{name}-{}", id.simple()))
}

/// A keyspace's definition.
#[derive(Debug, Clone)]
pub struct KeyspaceMetadata {
    pub name: String,
    pub replication: crate::replication::ReplicationParams,
    pub durable_writes: bool,
    pub tables: BTreeMap<String, Arc<TableMetadata>>,
    pub types: BTreeMap<String, Arc<UserType>>,
    /// Keyspaces whose schema is fixed by the node (system*).
    pub is_system: bool,
    pub is_virtual: bool,
}

impl KeyspaceMetadata {
    /// The total replication factor (sum over DCs for NetworkTopologyStrategy).
    pub fn replication_factor(&self) -> usize {
        self.replication.strategy.replication_factor(1)
    }
}

/// Java's `Integer.parseInt`: an optional sign and decimal digits within
/// 32 bits; anything else fails as Java's `NumberFormatException` reads.
pub fn java_parse_int(s: &str) -> std::result::Result<i32, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("For input string: \"{s}\""));
    }
    s.parse::<i32>()
        .map_err(|_| format!("For input string: \"{s}\""))
}

/// Java's `String.split` on one character: the pieces, without the empty
/// ones at the end.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// Cassandra's `ReplicationFactor.fromString` (`3`, or `3/1` with transient
/// replicas, which this node, like Cassandra's default configuration, does
/// not enable): the number of replicas.
pub fn parse_replication_factor(s: &str) -> Result<i32> {
    let (all, transient) = if s.contains('/') {
        let parts = java_split(s, '/');
        if parts.len() != 2 {
            return Err(Error::Config(
                "Replication factor format is <replicas> or <replicas>/<transient>".into(),
            ));
        }
        (
            java_parse_int(parts[0]).map_err(Error::Config)?,
            java_parse_int(parts[1]).map_err(Error::Config)?,
        )
    } else {
        (java_parse_int(s).map_err(Error::Config)?, 0)
    };
    if transient != 0 {
        return Err(Error::Config(
            "Transient replication is not enabled on this node".into(),
        ));
    }
    if all < 0 {
        return Err(Error::Config(format!(
            "Replication factor must be non-negative, found {all}"
        )));
    }
    Ok(all)
}

/// Cassandra's `NetworkTopologyStrategy.prepareOptions`: `replication_factor`
/// (given, or the previous one, or `default_keyspace_rf` when nothing is
/// given) stands for every known data center not named; an ALTER keeps the
/// factors of the data centers it does not name; factors of `0` drop their
/// data center. Cassandra calls it by reflection and ignores its failure,
/// keeping the options as they were when it failed.
fn prepare_nts_options(
    options: &mut BTreeMap<String, String>,
    previous: &BTreeMap<String, String>,
    datacenters: &[String],
) {
    if options.is_empty() {
        let rf = previous
            .get("replication_factor")
            .cloned()
            .unwrap_or_else(|| DEFAULT_KEYSPACE_RF.to_string());
        options.insert("replication_factor".into(), rf);
    }
    let mut replication = options.remove("replication_factor");
    if replication.is_none() && options.is_empty() {
        replication = previous.get("replication_factor").cloned();
    } else if replication.is_some() {
        for (k, v) in previous {
            if k != "replication_factor" && k != "class" {
                options.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    if let Some(rf) = replication {
        let Ok(rf) = parse_replication_factor(&rf) else {
            return;
        };
        for dc in datacenters {
            options.entry(dc.clone()).or_insert_with(|| rf.to_string());
        }
    }
    options.retain(|_, v| v != "0");
}

/// Cassandra's `default_keyspace_rf`.
pub const DEFAULT_KEYSPACE_RF: i32 = 1;

/// Validates `WITH replication = {...}` like Cassandra (`ReplicationParams.
/// fromMap`, then the strategy's construction and validation) and returns
/// the stored map. `previous` is the keyspace's replication before an ALTER
/// (empty for a new keyspace); `datacenters` the data centers the cluster
/// has (this node's and those of the ring).
pub fn validate_replication(
    keyspace: &str,
    m: &BTreeMap<String, String>,
    previous: &BTreeMap<String, String>,
    datacenters: &[String],
) -> Result<BTreeMap<String, String>> {
    let Some(class) = m.get("class") else {
        return Err(Error::Config("Missing replication strategy class".into()));
    };
    let class = full_class(class, "org.apache.cassandra.locator");
    let mut options: BTreeMap<String, String> = m
        .iter()
        .filter(|(k, _)| k.as_str() != "class")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    match class.as_str() {
        "org.apache.cassandra.locator.SimpleStrategy" => {
            let rf = previous
                .get("replication_factor")
                .cloned()
                .unwrap_or_else(|| DEFAULT_KEYSPACE_RF.to_string());
            options.entry("replication_factor".into()).or_insert(rf);
            parse_replication_factor(&options["replication_factor"])?;
            if let Some(k) = options.keys().find(|k| k.as_str() != "replication_factor") {
                return Err(Error::Config(format!(
                    "Unrecognized strategy option {{{k}}} passed to SimpleStrategy for keyspace {keyspace}"
                )));
            }
        }
        "org.apache.cassandra.locator.NetworkTopologyStrategy" => {
            prepare_nts_options(&mut options, previous, datacenters);
            for v in options.values() {
                parse_replication_factor(v)?;
            }
            if options.is_empty() {
                return Err(Error::Config(
                    "Configuration for at least one datacenter must be present".into(),
                ));
            }
            if let Some(dc) = options.keys().find(|k| !datacenters.contains(k)) {
                return Err(Error::Config(format!(
                    "Unrecognized strategy option {{{dc}}} passed to NetworkTopologyStrategy for keyspace {keyspace}"
                )));
            }
            if keyspace.eq_ignore_ascii_case("system_auth") {
                let missing: Vec<&str> = datacenters
                    .iter()
                    .filter(|dc| !options.contains_key(*dc))
                    .map(String::as_str)
                    .collect();
                if !missing.is_empty() {
                    return Err(Error::Config(format!(
                        "Following datacenters have active nodes and must be present in replication options for keyspace system_auth: [{}]",
                        missing.join(", ")
                    )));
                }
            }
        }
        "org.apache.cassandra.locator.LocalStrategy" => {
            return Err(Error::Invalid(
                "Unable to use given strategy class: LocalStrategy is reserved for internal use."
                    .into(),
            ))
        }
        _ => {
            return Err(Error::Config(format!(
                "Unable to find replication strategy class '{class}'"
            )))
        }
    }
    options.insert("class".into(), class);
    Ok(options)
}

/// Cassandra's rule for keyspace and table names.
pub fn validate_name(kind: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 48
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else if kind == "Keyspace" {
        Err(Error::Invalid(format!(
            "Keyspace name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got '{name}')"
        )))
    } else {
        Err(Error::Invalid(format!(
            "{kind} name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got '{name}')"
        )))
    }
}

/// The whole schema of the node. Immutable; replaced on every change.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    pub keyspaces: Keyspaces,
    pub version: uuid::Uuid,
}

/// The keyspaces of a schema by name, and their tables by id for
/// [`Schema::table_by_id`] (every write looks its table up by id, on the
/// coordinator and on each replica). Read as a map; changed only by
/// [`insert`](Self::insert) and [`remove`](Self::remove), which drop the
/// index: it is built again, on the next lookup, from what the map then holds.
#[derive(Debug, Clone, Default)]
pub struct Keyspaces {
    map: BTreeMap<String, Arc<KeyspaceMetadata>>,
    by_id: TableIndex,
}

impl Keyspaces {
    pub fn insert(
        &mut self,
        name: String,
        ks: Arc<KeyspaceMetadata>,
    ) -> Option<Arc<KeyspaceMetadata>> {
        self.by_id = TableIndex::default();
        self.map.insert(name, ks)
    }

    pub fn remove(&mut self, name: &str) -> Option<Arc<KeyspaceMetadata>> {
        self.by_id = TableIndex::default();
        self.map.remove(name)
    }
}

impl std::ops::Deref for Keyspaces {
    type Target = BTreeMap<String, Arc<KeyspaceMetadata>>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl<'a> IntoIterator for &'a Keyspaces {
    type Item = (&'a String, &'a Arc<KeyspaceMetadata>);
    type IntoIter = std::collections::btree_map::Iter<'a, String, Arc<KeyspaceMetadata>>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl FromIterator<(String, Arc<KeyspaceMetadata>)> for Keyspaces {
    fn from_iter<I: IntoIterator<Item = (String, Arc<KeyspaceMetadata>)>>(iter: I) -> Self {
        Keyspaces {
            map: iter.into_iter().collect(),
            by_id: TableIndex::default(),
        }
    }
}

/// The tables of a schema by id (old ids of system tables included), built
/// on the first lookup. A clone starts without one (clones are how a new
/// schema is made, and its keyspaces change before it is published), and
/// every change of the keyspaces drops it.
#[derive(Default)]
struct TableIndex(std::sync::OnceLock<FastHashMap<uuid::Uuid, Arc<TableMetadata>>>);

impl Clone for TableIndex {
    fn clone(&self) -> Self {
        TableIndex::default()
    }
}

impl std::fmt::Debug for TableIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TableIndex")
    }
}

impl Schema {
    pub fn keyspace(&self, name: &str) -> Option<&Arc<KeyspaceMetadata>> {
        self.keyspaces.get(name)
    }

    pub fn table(&self, ks: &str, name: &str) -> Option<&Arc<TableMetadata>> {
        self.keyspaces.get(ks).and_then(|k| k.tables.get(name))
    }

    pub fn table_by_id(&self, id: uuid::Uuid) -> Option<&Arc<TableMetadata>> {
        let index = self.keyspaces.by_id.0.get_or_init(|| {
            let mut m: FastHashMap<_, _> = self
                .keyspaces
                .values()
                .flat_map(|k| k.tables.values())
                .map(|t| (t.id, t.clone()))
                .collect();
            for (old, new) in sibyl_db::table_ids::aliases() {
                if let Some(t) = m.get(&new).cloned() {
                    m.insert(old, t);
                }
            }
            m
        });
        index.get(&id)
    }

    /// A digest of the user-visible schema, as `schema_version`.
    pub fn compute_version(&mut self) {
        // MD5 over the schema's parts, each followed by a zero: the same
        // schema gives the same version on every build (Rust's
        // DefaultHasher promises no such thing, and nodes compare versions)
        use md5::Digest;
        let mut h = md5::Md5::new();
        let mut put = |b: &[u8]| {
            h.update(b);
            h.update([0u8]);
        };
        for (name, ks) in &self.keyspaces {
            put(name.as_bytes());
            for (k, v) in ks.replication.iter() {
                put(k.as_bytes());
                put(v.as_bytes());
            }
            for (tn, t) in &ks.tables {
                put(tn.as_bytes());
                put(t.id.as_bytes());
                for c in &t.columns {
                    put(c.name.as_bytes());
                    put(c.typ.to_string().as_bytes());
                }
                put(format!("{:?}", t.params).as_bytes());
            }
            for tn in ks.types.keys() {
                put(tn.as_bytes());
            }
        }
        // version 3, like Cassandra's name-based UUIDs
        self.version = uuid::Builder::from_md5_bytes(h.finalize().into()).into_uuid();
    }
}

/// A system table's id, Cassandra's: `TableId.forSystemTable`, the name
/// based (version 3, MD5) UUID of the keyspace name followed by the table
/// name. The same on every build and every node, and in directory names
/// (`local-7ad54392bcdd35a684174e047860b377`) the same as Cassandra's.
pub fn system_table_id(ks: &str, table: &str) -> uuid::Uuid {
    use md5::Digest;
    let mut h = md5::Md5::new();
    h.update(ks.as_bytes());
    h.update(table.as_bytes());
    uuid::Builder::from_md5_bytes(h.finalize().into()).into_uuid()
}

/// The ids Sibyl builds before 2026-11-24 gave the stored system tables,
/// from Rust's `DefaultHasher`, which no release promises to keep: written
/// down here once, so that what those builds wrote (table directories,
/// commit log segments, hints) is found by every later build.
const LEGACY_SYSTEM_TABLE_IDS: &[(&str, &str, &str)] = &[
    ("system", "batches", "db5c36cc-51c0-30bb-a645-ede5289bf95b"),
    ("system", "local", "e853cce6-07a5-3c1a-ab0b-862c739ecdf7"),
    ("system", "paxos", "b8557730-7837-333d-ade0-dc2dcb7a17e5"),
    ("system", "peers", "ba14f292-eec2-3788-b55c-c5fce070b88e"),
    ("system", "peers_v2", "eeb6c3b4-b93d-3ad2-a711-2a24fb3f314a"),
    (
        "system_schema",
        "aggregates",
        "7c06041c-aa3f-39a5-a53f-90dae5425cf8",
    ),
    (
        "system_schema",
        "column_masks",
        "f6e970bc-26b3-3546-ac97-ab6b34a41710",
    ),
    (
        "system_schema",
        "columns",
        "371bf2e4-9d30-3f73-8ced-ff3f26a8b75c",
    ),
    (
        "system_schema",
        "dropped_columns",
        "9d5a3499-38f5-34bb-9fe0-2deee7e21c82",
    ),
    (
        "system_schema",
        "functions",
        "5ae20430-73a4-3daf-b1d3-ef8c265a478d",
    ),
    (
        "system_schema",
        "indexes",
        "fb4ab744-91ff-348e-acb1-c03811cf37dd",
    ),
    (
        "system_schema",
        "keyspaces",
        "34fbf45c-f5c9-30a8-8e0a-79c3c9791bc1",
    ),
    (
        "system_schema",
        "tables",
        "7537a37f-7006-3312-822d-b84b8ebaf5a6",
    ),
    (
        "system_schema",
        "triggers",
        "8e00bc76-a917-3650-b348-28a71b1a98c9",
    ),
    (
        "system_schema",
        "types",
        "491cd8a5-96b3-324a-a4ba-5edf8efc286a",
    ),
    (
        "system_schema",
        "views",
        "5d59efe2-f085-3800-ac99-88e02baea4d3",
    ),
    (
        "system_traces",
        "events",
        "02b81e07-905e-3d12-ac22-8211e70cff88",
    ),
    (
        "system_traces",
        "sessions",
        "031801f0-b005-3d0b-8b57-85701db64de2",
    ),
    (
        "system_virtual_schema",
        "columns",
        "cf1bb96d-c132-38f8-a486-13c560707cc4",
    ),
    (
        "system_virtual_schema",
        "keyspaces",
        "a2f4eea5-716d-309c-a853-fae3b0f64f56",
    ),
    (
        "system_virtual_schema",
        "tables",
        "94ab4fce-b6f8-33d7-ad10-6be73e3b99a8",
    ),
];

/// Every stored system table: (keyspace, table, old id, current id).
pub fn legacy_system_table_ids() -> Vec<(String, String, uuid::Uuid, uuid::Uuid)> {
    LEGACY_SYSTEM_TABLE_IDS
        .iter()
        .filter_map(|(k, t, old)| {
            Some((
                k.to_string(),
                t.to_string(),
                old.parse().ok()?,
                system_table_id(k, t),
            ))
        })
        .collect()
}

fn no_udt(_: &str) -> Option<Arc<UserType>> {
    None
}

/// Builds a system table from `(name, type, kind, position)` tuples.
fn sys_table(
    ks: &str,
    name: &str,
    cols: &[(&str, &str, ColumnKind, i32)],
    comment: &str,
) -> Arc<TableMetadata> {
    let columns = cols
        .iter()
        .map(|(n, t, k, p)| ColumnMetadata {
            name: n.to_string(),
            typ: CqlType::parse(t, &no_udt).unwrap_or(CqlType::Blob),
            kind: *k,
            position: *p,
            reversed: false,
        })
        .collect();
    let params = TableParams {
        comment: comment.to_string(),
        gc_grace_seconds: if ks == "system_schema" { 604800 } else { 0 },
        ..TableParams::default()
    };
    Arc::new(TableMetadata::new(
        ks,
        name,
        system_table_id(ks, name),
        columns,
        params,
    ))
}

use ColumnKind::{Clustering as C, PartitionKey as P, Regular as R};

/// A stored system table whose rows the node makes when it is read, from
/// what it knows now, instead of keeping them up to date in a store:
/// `system."IndexInfo"` (the indexes built), `system.size_estimates` and
/// `system.table_estimates` (Cassandra's `SizeEstimatesRecorder` writes
/// them every 5 minutes), and the materialized views' tables (Sibyl has no
/// views: no rows). Read like any system table (ALLOW FILTERING is needed
/// where Cassandra needs it); nobody writes them.
fn computed(t: Arc<TableMetadata>) -> Arc<TableMetadata> {
    let mut t = (*t).clone();
    t.is_virtual = true;
    Arc::new(t)
}

/// The layout of `system_schema.columns` and `system_virtual_schema.columns`.
const COLUMNS_TABLE: &[(&str, &str, ColumnKind, i32)] = &[
    ("keyspace_name", "text", P, 0),
    ("table_name", "text", C, 0),
    ("column_name", "text", C, 1),
    ("clustering_order", "text", R, -1),
    ("column_name_bytes", "blob", R, -1),
    ("kind", "text", R, -1),
    ("position", "int", R, -1),
    ("type", "text", R, -1),
];

/// The stored system keyspaces with their tables.
pub fn system_keyspaces() -> Vec<KeyspaceMetadata> {
    let local = |tables: Vec<Arc<TableMetadata>>, name: &str| KeyspaceMetadata {
        name: name.to_string(),
        replication: map(&[("class", "org.apache.cassandra.locator.LocalStrategy")]).into(),
        durable_writes: true,
        tables: tables.into_iter().map(|t| (t.name.clone(), t)).collect(),
        types: BTreeMap::new(),
        is_system: true,
        is_virtual: false,
    };
    let table_params_cols: Vec<(&str, &str, ColumnKind, i32)> = vec![
        ("additional_write_policy", "text", R, -1),
        ("allow_auto_snapshot", "boolean", R, -1),
        ("bloom_filter_fp_chance", "double", R, -1),
        ("caching", "frozen<map<text, text>>", R, -1),
        ("cdc", "boolean", R, -1),
        ("comment", "text", R, -1),
        ("compaction", "frozen<map<text, text>>", R, -1),
        ("compression", "frozen<map<text, text>>", R, -1),
        ("crc_check_chance", "double", R, -1),
        ("dclocal_read_repair_chance", "double", R, -1),
        ("default_time_to_live", "int", R, -1),
        ("extensions", "frozen<map<text, blob>>", R, -1),
        ("gc_grace_seconds", "int", R, -1),
        ("id", "uuid", R, -1),
        ("incremental_backups", "boolean", R, -1),
        ("max_index_interval", "int", R, -1),
        ("memtable", "text", R, -1),
        ("memtable_flush_period_in_ms", "int", R, -1),
        ("min_index_interval", "int", R, -1),
        ("read_repair", "text", R, -1),
        ("read_repair_chance", "double", R, -1),
        ("speculative_retry", "text", R, -1),
    ];
    let mut tables_cols = vec![
        ("keyspace_name", "text", P, 0),
        ("table_name", "text", C, 0),
        ("flags", "frozen<set<text>>", R, -1),
    ];
    tables_cols.extend(table_params_cols.iter().cloned());
    let mut views_cols = vec![
        ("keyspace_name", "text", P, 0),
        ("view_name", "text", C, 0),
        ("base_table_id", "uuid", R, -1),
        ("base_table_name", "text", R, -1),
        ("include_all_columns", "boolean", R, -1),
        ("where_clause", "text", R, -1),
    ];
    views_cols.extend(table_params_cols.iter().cloned());
    let schema = vec![
        sys_table(
            "system_schema",
            "keyspaces",
            &[
                ("keyspace_name", "text", P, 0),
                ("durable_writes", "boolean", R, -1),
                ("replication", "frozen<map<text, text>>", R, -1),
            ],
            "keyspace definitions",
        ),
        sys_table("system_schema", "tables", &tables_cols, "table definitions"),
        sys_table(
            "system_schema",
            "columns",
            COLUMNS_TABLE,
            "column definitions",
        ),
        sys_table(
            "system_schema",
            "column_masks",
            &[
                ("keyspace_name", "text", P, 0),
                ("table_name", "text", C, 0),
                ("column_name", "text", C, 1),
                ("function_keyspace", "text", R, -1),
                ("function_name", "text", R, -1),
                ("function_argument_types", "frozen<list<text>>", R, -1),
                ("function_argument_values", "frozen<list<text>>", R, -1),
                ("function_argument_nulls", "frozen<list<boolean>>", R, -1),
            ],
            "column dynamic data masks",
        ),
        sys_table(
            "system_schema",
            "dropped_columns",
            &[
                ("keyspace_name", "text", P, 0),
                ("table_name", "text", C, 0),
                ("column_name", "text", C, 1),
                ("dropped_time", "timestamp", R, -1),
                ("kind", "text", R, -1),
                ("type", "text", R, -1),
            ],
            "dropped column registry",
        ),
        sys_table(
            "system_schema",
            "triggers",
            &[
                ("keyspace_name", "text", P, 0),
                ("table_name", "text", C, 0),
                ("trigger_name", "text", C, 1),
                ("options", "frozen<map<text, text>>", R, -1),
            ],
            "trigger definitions",
        ),
        sys_table("system_schema", "views", &views_cols, "view definitions"),
        sys_table(
            "system_schema",
            "types",
            &[
                ("keyspace_name", "text", P, 0),
                ("type_name", "text", C, 0),
                ("field_names", "frozen<list<text>>", R, -1),
                ("field_types", "frozen<list<text>>", R, -1),
            ],
            "user defined type definitions",
        ),
        sys_table(
            "system_schema",
            "functions",
            &[
                ("keyspace_name", "text", P, 0),
                ("function_name", "text", C, 0),
                ("argument_types", "frozen<list<text>>", C, 1),
                ("argument_names", "frozen<list<text>>", R, -1),
                ("body", "text", R, -1),
                ("called_on_null_input", "boolean", R, -1),
                ("language", "text", R, -1),
                ("return_type", "text", R, -1),
            ],
            "user defined function definitions",
        ),
        sys_table(
            "system_schema",
            "aggregates",
            &[
                ("keyspace_name", "text", P, 0),
                ("aggregate_name", "text", C, 0),
                ("argument_types", "frozen<list<text>>", C, 1),
                ("final_func", "text", R, -1),
                ("initcond", "text", R, -1),
                ("return_type", "text", R, -1),
                ("state_func", "text", R, -1),
                ("state_type", "text", R, -1),
            ],
            "user defined aggregate definitions",
        ),
        sys_table(
            "system_schema",
            "indexes",
            &[
                ("keyspace_name", "text", P, 0),
                ("table_name", "text", C, 0),
                ("index_name", "text", C, 1),
                ("kind", "text", R, -1),
                ("options", "frozen<map<text, text>>", R, -1),
            ],
            "secondary index definitions",
        ),
    ];
    let system = vec![
        sys_table(
            "system",
            "local",
            &[
                ("key", "text", P, 0),
                ("bootstrapped", "text", R, -1),
                ("broadcast_address", "inet", R, -1),
                ("broadcast_port", "int", R, -1),
                ("cluster_name", "text", R, -1),
                ("cql_version", "text", R, -1),
                ("data_center", "text", R, -1),
                ("gossip_generation", "int", R, -1),
                ("host_id", "uuid", R, -1),
                ("listen_address", "inet", R, -1),
                ("listen_port", "int", R, -1),
                ("native_protocol_version", "text", R, -1),
                ("partitioner", "text", R, -1),
                ("rack", "text", R, -1),
                ("release_version", "text", R, -1),
                ("rpc_address", "inet", R, -1),
                ("rpc_port", "int", R, -1),
                ("schema_version", "uuid", R, -1),
                ("tokens", "set<text>", R, -1),
                ("truncated_at", "map<uuid, blob>", R, -1),
            ],
            "information about the local node",
        ),
        sys_table(
            "system",
            "peers",
            &[
                ("peer", "inet", P, 0),
                ("data_center", "text", R, -1),
                ("host_id", "uuid", R, -1),
                ("preferred_ip", "inet", R, -1),
                ("rack", "text", R, -1),
                ("release_version", "text", R, -1),
                ("rpc_address", "inet", R, -1),
                ("schema_version", "uuid", R, -1),
                ("tokens", "set<text>", R, -1),
            ],
            "information about known peers in the cluster",
        ),
        sys_table(
            "system",
            "peers_v2",
            &[
                ("peer", "inet", P, 0),
                ("peer_port", "int", C, 0),
                ("data_center", "text", R, -1),
                ("host_id", "uuid", R, -1),
                ("native_address", "inet", R, -1),
                ("native_port", "int", R, -1),
                ("preferred_ip", "inet", R, -1),
                ("preferred_port", "int", R, -1),
                ("rack", "text", R, -1),
                ("release_version", "text", R, -1),
                ("schema_version", "uuid", R, -1),
                ("tokens", "set<text>", R, -1),
            ],
            "information about known peers in the cluster",
        ),
        sys_table(
            "system",
            "paxos",
            &[
                ("row_key", "blob", P, 0),
                ("cf_id", "uuid", C, 0),
                ("in_progress_ballot", "timeuuid", R, -1),
                ("in_progress_read_ballot", "timeuuid", R, -1),
                ("most_recent_commit", "blob", R, -1),
                ("most_recent_commit_at", "timeuuid", R, -1),
                ("most_recent_commit_version", "int", R, -1),
                ("proposal", "blob", R, -1),
                ("proposal_ballot", "timeuuid", R, -1),
                ("proposal_version", "int", R, -1),
            ],
            "in-progress paxos proposals",
        ),
        sys_table(
            "system",
            "batches",
            &[
                ("id", "timeuuid", P, 0),
                ("mutations", "list<blob>", R, -1),
                ("version", "int", R, -1),
            ],
            "batches awaiting replay",
        ),
        computed(sys_table(
            "system",
            "IndexInfo",
            &[
                ("table_name", "text", P, 0),
                ("index_name", "text", C, 0),
                ("value", "blob", R, -1),
            ],
            "built column indexes",
        )),
        computed(sys_table(
            "system",
            "size_estimates",
            &[
                ("keyspace_name", "text", P, 0),
                ("table_name", "text", C, 0),
                ("range_start", "text", C, 1),
                ("range_end", "text", C, 2),
                ("mean_partition_size", "bigint", R, -1),
                ("partitions_count", "bigint", R, -1),
            ],
            "per-table primary range size estimates, table is deprecated in favor of table_estimates",
        )),
        computed(sys_table(
            "system",
            "table_estimates",
            &[
                ("keyspace_name", "text", P, 0),
                ("table_name", "text", C, 0),
                ("range_type", "text", C, 1),
                ("range_start", "text", C, 2),
                ("range_end", "text", C, 3),
                ("mean_partition_size", "bigint", R, -1),
                ("partitions_count", "bigint", R, -1),
            ],
            "per-table range size estimates",
        )),
        computed(sys_table(
            "system",
            "built_views",
            &[
                ("keyspace_name", "text", P, 0),
                ("view_name", "text", C, 0),
                ("status_replicated", "boolean", R, -1),
            ],
            "built views",
        )),
        computed(sys_table(
            "system",
            "view_builds_in_progress",
            &[
                ("keyspace_name", "text", P, 0),
                ("view_name", "text", C, 0),
                ("start_token", "text", C, 1),
                ("end_token", "text", C, 2),
                ("keys_built", "bigint", R, -1),
                ("last_token", "text", R, -1),
            ],
            "views builds current progress",
        )),
    ];
    let traces = vec![
        sys_table(
            "system_traces",
            "sessions",
            &[
                ("session_id", "uuid", P, 0),
                ("client", "inet", R, -1),
                ("command", "text", R, -1),
                ("coordinator", "inet", R, -1),
                ("coordinator_port", "int", R, -1),
                ("duration", "int", R, -1),
                ("parameters", "map<text, text>", R, -1),
                ("request", "text", R, -1),
                ("started_at", "timestamp", R, -1),
            ],
            "tracing sessions",
        ),
        sys_table(
            "system_traces",
            "events",
            &[
                ("session_id", "uuid", P, 0),
                ("event_id", "timeuuid", C, 0),
                ("activity", "text", R, -1),
                ("source", "inet", R, -1),
                ("source_elapsed", "int", R, -1),
                ("source_port", "int", R, -1),
                ("thread", "text", R, -1),
            ],
            "tracing events",
        ),
    ];
    let virtual_schema = vec![
        sys_table(
            "system_virtual_schema",
            "keyspaces",
            &[("keyspace_name", "text", P, 0)],
            "virtual keyspace definitions",
        ),
        sys_table(
            "system_virtual_schema",
            "tables",
            &[
                ("keyspace_name", "text", P, 0),
                ("table_name", "text", C, 0),
                ("comment", "text", R, -1),
            ],
            "virtual table definitions",
        ),
        sys_table(
            "system_virtual_schema",
            "columns",
            COLUMNS_TABLE,
            "virtual column definitions",
        ),
    ];
    let mut traces_ks = local(traces, "system_traces");
    traces_ks.replication = map(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "2"),
    ])
    .into();
    let mut vks = local(virtual_schema, "system_virtual_schema");
    vks.is_virtual = true;
    let views_tables = crate::system_views::TABLES
        .iter()
        .map(|(name, comment, cols)| {
            let mut t = (*sys_table("system_views", name, cols, comment)).clone();
            t.is_virtual = true;
            Arc::new(t)
        })
        .collect();
    let mut views = local(views_tables, "system_views");
    views.is_virtual = true;
    let mut auth = local(Vec::new(), "system_auth");
    auth.replication = map(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "1"),
    ])
    .into();
    let mut dist = local(distributed_tables(), "system_distributed");
    dist.replication = map(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "3"),
    ])
    .into();
    vec![
        local(system, "system"),
        local(schema, "system_schema"),
        traces_ks,
        auth,
        dist,
        vks,
        views,
    ]
}

/// `system_distributed`'s tables, as Cassandra 5.0's
/// `SystemDistributedKeyspace` (generation 6): the repair history tables
/// keep 30 days (TTL) under time-window compaction by day; every table keeps
/// tombstones 10 days.
fn distributed_tables() -> Vec<Arc<TableMetadata>> {
    let with = |t: Arc<TableMetadata>, repair: bool| {
        let mut t = (*t).clone();
        t.params.gc_grace_seconds = 864000;
        if repair {
            t.params.default_time_to_live = 30 * 86400;
            t.params.compaction = map(&[
                (
                    "class",
                    "org.apache.cassandra.db.compaction.TimeWindowCompactionStrategy",
                ),
                ("compaction_window_size", "1"),
                ("compaction_window_unit", "DAYS"),
                ("max_threshold", "32"),
                ("min_threshold", "4"),
            ]);
        }
        Arc::new(t)
    };
    const KS: &str = "system_distributed";
    vec![
        with(
            sys_table(
                KS,
                "repair_history",
                &[
                    ("keyspace_name", "text", P, 0),
                    ("columnfamily_name", "text", P, 1),
                    ("id", "timeuuid", C, 0),
                    ("coordinator", "inet", R, -1),
                    ("coordinator_port", "int", R, -1),
                    ("exception_message", "text", R, -1),
                    ("exception_stacktrace", "text", R, -1),
                    ("finished_at", "timestamp", R, -1),
                    ("parent_id", "timeuuid", R, -1),
                    ("participants", "set<inet>", R, -1),
                    ("participants_v2", "set<text>", R, -1),
                    ("range_begin", "text", R, -1),
                    ("range_end", "text", R, -1),
                    ("started_at", "timestamp", R, -1),
                    ("status", "text", R, -1),
                ],
                "Repair history",
            ),
            true,
        ),
        with(
            sys_table(
                KS,
                "parent_repair_history",
                &[
                    ("parent_id", "timeuuid", P, 0),
                    ("columnfamily_names", "set<text>", R, -1),
                    ("exception_message", "text", R, -1),
                    ("exception_stacktrace", "text", R, -1),
                    ("finished_at", "timestamp", R, -1),
                    ("keyspace_name", "text", R, -1),
                    ("options", "map<text, text>", R, -1),
                    ("requested_ranges", "set<text>", R, -1),
                    ("started_at", "timestamp", R, -1),
                    ("successful_ranges", "set<text>", R, -1),
                ],
                "Repair history",
            ),
            true,
        ),
        with(
            sys_table(
                KS,
                "view_build_status",
                &[
                    ("keyspace_name", "text", P, 0),
                    ("view_name", "text", P, 1),
                    ("host_id", "uuid", C, 0),
                    ("status", "text", R, -1),
                ],
                "Materialized View build status",
            ),
            false,
        ),
        with(
            sys_table(
                KS,
                "partition_denylist",
                &[
                    ("ks_name", "text", P, 0),
                    ("table_name", "text", P, 1),
                    ("key", "blob", C, 0),
                ],
                "Partition keys which have been denied access",
            ),
            false,
        ),
    ]
}

/// Names of keyspaces whose schema the node owns.
pub fn is_system_keyspace(name: &str) -> bool {
    matches!(
        name,
        "system"
            | "system_schema"
            | "system_traces"
            | "system_auth"
            | "system_distributed"
            | "system_virtual_schema"
            | "system_views"
    )
}

/// Keyspaces of virtual tables (Cassandra's `VirtualKeyspaceRegistry`).
pub fn is_virtual_keyspace(name: &str) -> bool {
    matches!(name, "system_views" | "system_virtual_schema")
}

/// A table's `speculative_retry` (Cassandra's `SpeculativeRetryPolicy`):
/// when a read asks one more replica than it needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpeculativeRetry {
    /// Never.
    None,
    /// At once: every read asks the extra replica.
    Always,
    /// After the table's reads' latency at this percentile.
    Percentile(f64),
    /// After this many milliseconds.
    Fixed(u64),
    /// The earlier of a percentile and a fixed time.
    Min(f64, u64),
    /// The later of a percentile and a fixed time.
    Max(f64, u64),
}

impl SpeculativeRetry {
    /// Parses the option as Cassandra does (`99p`, `99PERCENTILE`, `50ms`,
    /// `ALWAYS`, `NONE`, `MIN(99p,50ms)`, `MAX(...)`, any case).
    pub fn parse(s: &str) -> Option<SpeculativeRetry> {
        let t = s.trim().to_ascii_lowercase();
        let percentile = |x: &str| -> Option<f64> {
            let v = x
                .strip_suffix("percentile")
                .or_else(|| x.strip_suffix('p'))?;
            let p: f64 = v.parse().ok()?;
            (p > 0.0 && p < 100.0 + f64::EPSILON && !v.is_empty()).then_some(p)
        };
        let fixed = |x: &str| -> Option<u64> {
            let v: f64 = x.strip_suffix("ms")?.parse().ok()?;
            (v >= 0.0).then_some(v as u64)
        };
        match t.as_str() {
            "none" | "never" => return Some(SpeculativeRetry::None),
            "always" => return Some(SpeculativeRetry::Always),
            _ => {}
        }
        for (name, min) in [("min(", true), ("max(", false)] {
            if let Some(inner) = t.strip_prefix(name).and_then(|r| r.strip_suffix(')')) {
                let (a, b) = inner.split_once(',')?;
                let (a, b) = (a.trim(), b.trim());
                let (p, f) = match (percentile(a), fixed(b)) {
                    (Some(p), Some(f)) => (p, f),
                    _ => (percentile(b)?, fixed(a)?),
                };
                return Some(if min {
                    SpeculativeRetry::Min(p, f)
                } else {
                    SpeculativeRetry::Max(p, f)
                });
            }
        }
        if let Some(p) = percentile(&t) {
            return Some(SpeculativeRetry::Percentile(p));
        }
        fixed(&t).map(SpeculativeRetry::Fixed)
    }
}

impl std::fmt::Display for SpeculativeRetry {
    /// Cassandra's normal form, as `system_schema.tables` keeps it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = |x: f64| {
            let s = format!("{x:.4}");
            let s = s.trim_end_matches('0').trim_end_matches('.').to_string();
            format!("{s}p")
        };
        match self {
            SpeculativeRetry::None => f.write_str("NEVER"),
            SpeculativeRetry::Always => f.write_str("ALWAYS"),
            SpeculativeRetry::Percentile(x) => f.write_str(&p(*x)),
            SpeculativeRetry::Fixed(ms) => write!(f, "{ms}ms"),
            SpeculativeRetry::Min(x, ms) => write!(f, "MIN({},{ms}ms)", p(*x)),
            SpeculativeRetry::Max(x, ms) => write!(f, "MAX({},{ms}ms)", p(*x)),
        }
    }
}

#[cfg(test)]
mod speculative_retry_tests {
    use super::SpeculativeRetry as S;

    #[test]
    fn the_option_parses_as_cassandra_parses_it() {
        for (input, normal) in [
            ("99p", "99p"),
            ("99PERCENTILE", "99p"),
            ("99.5p", "99.5p"),
            ("50ms", "50ms"),
            ("50MS", "50ms"),
            ("ALWAYS", "ALWAYS"),
            ("none", "NEVER"),
            ("NEVER", "NEVER"),
            ("MIN(99p,50ms)", "MIN(99p,50ms)"),
            ("max(50ms, 90p)", "MAX(90p,50ms)"),
        ] {
            assert_eq!(
                S::parse(input).map(|s| s.to_string()).as_deref(),
                Some(normal),
                "{input}"
            );
        }
        for bad in ["", "p", "101p", "0p", "fast", "MIN(99p)", "-5ms"] {
            assert_eq!(S::parse(bad), None, "{bad}");
        }
    }
}

#[cfg(test)]
mod system_table_ids {
    use super::*;

    /// Directory names of Cassandra 5.0.4's data directory.
    #[test]
    fn system_table_ids_are_cassandras() {
        for (ks, t, id) in [
            ("system", "local", "7ad54392bcdd35a684174e047860b377"),
            ("system", "peers_v2", "c4325fbb8e5e3bafbd070f9250ed818e"),
            ("system", "peers", "37f71aca7dc2383ba70672528af04d4f"),
            ("system", "batches", "919a4bc57a333573b03e13fc3f68b465"),
            ("system", "paxos", "b7b7f0c2fd0a34108c053ef614bb7c2d"),
            (
                "system",
                "compaction_history",
                "b4dbb7b4dc493fb5b3bfce6e434832ca",
            ),
        ] {
            assert_eq!(system_table_id(ks, t).simple().to_string(), id, "{ks}.{t}");
        }
        // the stored system keyspaces use it
        let local = system_keyspaces()
            .into_iter()
            .find(|k| k.name == "system")
            .and_then(|k| k.tables.get("local").cloned())
            .expect("system.local");
        assert_eq!(local.id, system_table_id("system", "local"));
    }

    /// Lookups by id follow the schema they are made on: a table added, or
    /// replaced under the same id, after the index was built is found as it
    /// is now, and a dropped one is not.
    #[test]
    fn tables_by_id_follow_the_schema() {
        let mut s = Schema::default();
        for ks in system_keyspaces() {
            s.keyspaces.insert(ks.name.clone(), Arc::new(ks));
        }
        let id = system_table_id("system", "local");
        let local = s.table_by_id(id).cloned().expect("system.local");
        assert_eq!(
            (local.keyspace.as_str(), local.name.as_str()),
            ("system", "local")
        );
        assert!(s.table_by_id(uuid::Uuid::from_u128(7)).is_none());
        // changed in place after the index was built
        let mut ks = (**s.keyspaces.get("system").expect("system")).clone();
        let mut t = (*local).clone();
        t.params.comment = "replaced".into();
        ks.tables.insert("local".into(), Arc::new(t));
        let mut extra = (*local).clone();
        extra.name = "extra".into();
        extra.id = uuid::Uuid::from_u128(7);
        ks.tables.insert("extra".into(), Arc::new(extra));
        s.keyspaces.insert("system".into(), Arc::new(ks.clone()));
        assert_eq!(
            s.table_by_id(id).map(|t| t.params.comment.as_str()),
            Some("replaced")
        );
        assert_eq!(
            s.table_by_id(uuid::Uuid::from_u128(7))
                .map(|t| t.name.as_str()),
            Some("extra")
        );
        // a clone builds its own index
        let mut next = s.clone();
        ks.tables.remove("local");
        next.keyspaces.insert("system".into(), Arc::new(ks));
        assert!(next.table_by_id(id).is_none());
        assert!(s.table_by_id(id).is_some());
    }

    /// Every table the old builds stored still exists, under its new id
    /// (a system table added later never had an old one).
    #[test]
    fn every_old_id_names_a_stored_system_table() {
        let legacy = legacy_system_table_ids();
        assert_eq!(legacy.len(), 21);
        let keyspaces = system_keyspaces();
        for (k, t, old, new) in legacy {
            let table = keyspaces
                .iter()
                .find(|ks| ks.name == k)
                .and_then(|ks| ks.tables.get(&t))
                .unwrap_or_else(|| panic!("{k}.{t} is gone"));
            assert_eq!(table.id, new);
            assert_ne!(old, new);
        }
    }
}

#[cfg(test)]
mod replication_validation {
    use super::*;

    fn m(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn err(r: Result<BTreeMap<String, String>>) -> String {
        r.expect_err("refused").to_string()
    }

    #[test]
    fn factors_parse_as_javas_integers() {
        let dcs = ["datacenter1".to_string()];
        let simple = |rf: &str| {
            validate_replication(
                "ks",
                &m(&[("class", "SimpleStrategy"), ("replication_factor", rf)]),
                &BTreeMap::new(),
                &dcs,
            )
        };
        assert_eq!(err(simple("abc")), "For input string: \"abc\"");
        assert_eq!(err(simple("")), "For input string: \"\"");
        assert_eq!(
            err(simple("99999999999")),
            "For input string: \"99999999999\""
        );
        assert_eq!(
            err(simple("2/1")),
            "Transient replication is not enabled on this node"
        );
        assert_eq!(
            err(simple("2/")),
            "Replication factor format is <replicas> or <replicas>/<transient>"
        );
        assert_eq!(
            err(simple("-1")),
            "Replication factor must be non-negative, found -1"
        );
        assert_eq!(simple("+2").unwrap()["replication_factor"], "+2");
        assert!(simple("1/0").is_ok());
    }

    #[test]
    fn strategies_as_cassandra_prepares_them() {
        let dcs = ["datacenter1".to_string()];
        let nts = |opts: &[(&str, &str)], prev: &[(&str, &str)]| {
            let mut o = m(opts);
            o.insert("class".into(), "NetworkTopologyStrategy".into());
            validate_replication("ks", &o, &m(prev), &dcs)
        };
        // no data center: default_keyspace_rf, or what the keyspace had
        assert_eq!(
            nts(&[], &[])
                .unwrap()
                .get("datacenter1")
                .map(String::as_str),
            Some("1")
        );
        assert_eq!(
            nts(&[], &[("datacenter1", "3")]).unwrap()["datacenter1"],
            "3"
        );
        assert_eq!(
            nts(
                &[("replication_factor", "2")],
                &[("replication_factor", "1")]
            )
            .unwrap()["datacenter1"],
            "2"
        );
        assert_eq!(
            err(nts(&[("datacenter1", "0")], &[])),
            "Configuration for at least one datacenter must be present"
        );
        assert_eq!(
            err(nts(&[("dc9", "1")], &[])),
            "Unrecognized strategy option {dc9} passed to NetworkTopologyStrategy for keyspace ks"
        );
        for class in [
            "LocalStrategy",
            "org.apache.cassandra.locator.LocalStrategy",
        ] {
            assert!(matches!(
                validate_replication("ks", &m(&[("class", class)]), &BTreeMap::new(), &dcs),
                Err(Error::Invalid(_))
            ));
        }
        assert_eq!(
            err(validate_replication(
                "ks",
                &m(&[("class", "EverywhereStrategy")]),
                &BTreeMap::new(),
                &dcs
            )),
            "Unable to find replication strategy class 'org.apache.cassandra.locator.EverywhereStrategy'"
        );
    }
}
