//! An SSTable whose components are arbitrary bytes: opening, scanning and
//! reading must give errors, never panic. The input is split into Data,
//! Index, Filter and Statistics by its first three bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sibyl_storage::sstable::{component_path, ChunkCache, SSTableReader};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (cuts, rest) = data.split_at(3);
    let mut parts = Vec::new();
    let mut at = 0usize;
    for c in cuts {
        let end = (at + (*c as usize * rest.len()) / 255).min(rest.len());
        parts.push(&rest[at..end]);
        at = end;
    }
    parts.push(&rest[at..]);
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    for (c, bytes) in ["Data.db", "Index.db", "Filter.db", "Statistics.db"].iter().zip(&parts) {
        std::fs::write(component_path(d, 1, c), bytes).expect("write");
    }
    std::fs::write(component_path(d, 1, "TOC.txt"), b"Data.db\nIndex.db\nFilter.db\nStatistics.db\nTOC.txt\n").expect("write");
    let cmp = sibyl_db::data::no_clustering();
    if let Ok(r) = SSTableReader::open(d, 1, cmp, ChunkCache::new(1 << 20)) {
        if let Ok(all) = r.scan() {
            for (k, _) in all.iter().take(4) {
                let _ = r.read(k, None);
            }
        }
        let _ = r.keys(None, i64::MIN, i64::MAX, 16);
    }
});
