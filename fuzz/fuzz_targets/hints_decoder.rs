//! A hints file of arbitrary bytes: decoding reports a torn or corrupt
//! tail and keeps what precedes it, never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (hints, _error) = sibyl_service::hints::decode_hints(data);
    let cmp = sibyl_db::data::no_clustering();
    for (_, m) in hints.iter().take(8) {
        let _ = sibyl_db::serde::decode_mutation(m, &|_| Some(cmp.clone()));
    }
});
