//! The local stores of the schema's tables: opening a table's store (and its
//! indexes' stores) with the engine options its parameters give, dropping
//! them, and reading the stored schema at startup.

use sibyl_db::{DecoratedKey, Partition};
use sibyl_schema::schema::TableMetadata;
use sibyl_schema::schema_tables::SchemaSource;
use sibyl_storage::store::TableOptions;
use sibyl_storage::{ColumnFamilyStore, StorageEngine, StorageError};
use std::sync::Arc;

/// Opens the stores of the system keyspaces' tables, and gives the schema
/// they make (no user keyspace yet).
pub fn open_system_keyspaces(
    storage: &StorageEngine,
) -> Result<sibyl_schema::schema::Schema, StorageError> {
    let mut schema = sibyl_schema::schema::Schema::default();
    for ks in sibyl_schema::schema::system_keyspaces() {
        for t in ks.tables.values() {
            open_store(storage, t)?;
        }
        schema.keyspaces.insert(ks.name.clone(), Arc::new(ks));
    }
    Ok(schema)
}

/// Registers a table's store with the engine, with its options.
pub fn open_store(
    storage: &sibyl_storage::StorageEngine,
    t: &TableMetadata,
) -> Result<Arc<ColumnFamilyStore>, StorageError> {
    let cfs = storage.add_table(
        t.id,
        t.comparator.clone(),
        t.directory(storage.data_directory()),
    )?;
    *cfs.options.write() = table_options(t);
    for ix in &t.indexes {
        let store = storage.add_table(
            ix.store_id(t),
            ix.comparator(t),
            ix.directory(t, storage.data_directory()),
        )?;
        let mut o = table_options(t);
        o.header.table = format!("{}.{}", t.name, ix.name);
        o.header.partition_key_types = vec!["blob".into()];
        o.header.clustering_types = ix
            .comparator(t)
            .types
            .iter()
            .map(|(t, _)| t.to_string())
            .collect();
        o.header.clustering_reversed = ix.comparator(t).types.iter().map(|(_, r)| *r).collect();
        o.header.columns = Default::default();
        // an index partition lists many base rows: it stays out of the row cache
        o.rows_per_partition = None;
        *store.options.write() = o;
    }
    Ok(cfs)
}

/// The storage engine's options from a table's parameters.
pub fn table_options(t: &TableMetadata) -> TableOptions {
    let this = t;
    let p = &this.params;
    use sibyl_storage::sstable::Compression;
    let enabled = p
        .compression
        .get("enabled")
        .map(|v| v != "false")
        .unwrap_or(true);
    let class = p
        .compression
        .get("class")
        .map(|c| c.rsplit('.').next().unwrap_or(c))
        .unwrap_or("LZ4Compressor");
    let compression = match class {
        _ if !enabled => Compression::None,
        "NoopCompressor" => Compression::None,
        "ZstdCompressor" => Compression::Zstd(
            p.compression
                .get("compression_level")
                .and_then(|v| v.parse().ok())
                .unwrap_or(3),
        ),
        "SnappyCompressor" => Compression::Snappy,
        "DeflateCompressor" => Compression::Deflate,
        _ => Compression::Lz4,
    };
    let chunk_kb: usize = p
        .compression
        .get("chunk_length_in_kb")
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    TableOptions {
        tombstone_gc: sibyl_storage::repaired::TombstoneGc::parse(&p.tombstone_gc())
            .unwrap_or_default(),
        compression,
        chunk_length_bytes: chunk_kb.clamp(1, 64 * 1024) * 1024,
        bloom_filter_fp_chance: p.bloom_filter_fp_chance,
        gc_grace_seconds: p.gc_grace_seconds,
        // leveled and time-window selection are not built yet: their tables compact size-tiered
        strategy: sibyl_storage::compaction::Strategy::from_map(&p.compaction).unwrap_or_default(),
        auto_compaction: p
            .compaction
            .get("enabled")
            .map(|v| v != "false")
            .unwrap_or(true),
        cache_keys: p
            .caching
            .get("keys")
            .map(|v| v.eq_ignore_ascii_case("ALL"))
            .unwrap_or(true),
        timestamp_ordered: (!this.has_static()
            && this.compact.is_none()
            && this
                .regular_and_static()
                .iter()
                .all(|c| !c.typ.is_multi_cell() && !c.typ.is_counter()))
        .then(|| {
            this.regular_and_static()
                .iter()
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
                .into()
        }),
        rows_per_partition: match p
            .caching
            .get("rows_per_partition")
            .map(|v| v.to_uppercase())
        {
            None => None,
            Some(v) if v == "NONE" => None,
            Some(v) if v == "ALL" => Some(u64::MAX),
            Some(v) => v.parse().ok().filter(|n: &u64| *n > 0),
        },
        header: sibyl_storage::sstable::SerializationHeader {
            keyspace: this.keyspace.clone(),
            table: this.name.clone(),
            partition_key_types: this
                .partition_key()
                .iter()
                .map(|c| c.typ.to_string())
                .collect(),
            clustering_types: this
                .clustering()
                .iter()
                .map(|c| c.typ.to_string())
                .collect(),
            clustering_reversed: this.clustering().iter().map(|c| c.reversed).collect(),
            columns: this
                .regular_and_static()
                .iter()
                .map(|c| (c.name.clone(), c.typ.to_string()))
                .collect(),
        },
        dropped_columns: this
            .dropped
            .iter()
            .map(|(n, (_, at))| (n.clone(), *at))
            .collect(),
    }
}

/// Drops a table's store and its indexes' stores.
pub fn drop_stores(storage: &StorageEngine, t: &TableMetadata) {
    for ix in &t.indexes {
        storage.drop_table(ix.store_id(t));
    }
    storage.drop_table(t.id);
}

/// The local `system_schema` tables, as the schema is loaded from at startup.
pub struct LocalSchema<'a>(pub &'a StorageEngine);

impl SchemaSource for LocalSchema<'_> {
    fn keys(&self, table_id: uuid::Uuid) -> Result<Vec<DecoratedKey>, String> {
        match self.0.table(table_id) {
            Some(cfs) => cfs
                .keys(None, i64::MIN, i64::MAX, usize::MAX)
                .map_err(|e| e.to_string()),
            None => Ok(Vec::new()),
        }
    }

    fn read(&self, table_id: uuid::Uuid, key: &DecoratedKey) -> Result<Option<Partition>, String> {
        match self.0.table(table_id) {
            Some(cfs) => cfs.read(key, None).map_err(|e| e.to_string()),
            None => Ok(None),
        }
    }
}
