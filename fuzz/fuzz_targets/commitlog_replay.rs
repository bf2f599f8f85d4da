//! A commit log segment of arbitrary bytes: replay (strict and with the
//! operator's override) and the mutations in it must give errors, never
//! panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sibyl_storage::commitlog::{replay, Entry};

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("tmp");
    // a valid header in front half the time, so the entries get exercised
    let mut seg = Vec::new();
    if data.first().is_some_and(|b| b % 2 == 0) {
        let mut h = Vec::new();
        h.extend_from_slice(b"SBCL");
        h.extend_from_slice(&1u32.to_be_bytes());
        h.extend_from_slice(&1u64.to_be_bytes());
        let crc = crc32fast::hash(&h);
        h.extend_from_slice(&crc.to_be_bytes());
        seg.extend_from_slice(&h);
        seg.extend_from_slice(&data[1..]);
    } else {
        seg.extend_from_slice(data);
    }
    std::fs::write(dir.path().join("CommitLog-1-1.log"), &seg).expect("write");
    let cmp = sibyl_db::data::no_clustering();
    for ignore in [false, true] {
        let _ = replay(dir.path(), ignore, |_, e| {
            if let Entry::Mutation(m) = e {
                let _ = sibyl_db::serde::decode_mutation(&m, &|_| Some(cmp.clone()));
            }
            Ok(())
        });
    }
});
