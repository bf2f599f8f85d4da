//! Hash maps for the lookups every request makes (tables by id, metrics by
//! table): foldhash, seeded per process, instead of std's SipHash, which
//! cost about 300 instructions per lookup of a UUID key on the write path.

/// A `HashMap` with a fast, randomly seeded hasher.
pub type FastHashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
