//! Internode bytes from a peer: a frame, then its body as a request of the
//! frame's verb and as a response. Must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sibyl_cluster::net::codec::{decode_any, Handshake};
use sibyl_db::clustering::ClusteringComparator;
use sibyl_types::CqlType;

fuzz_target!(|data: &[u8]| {
    let cmp = ClusteringComparator::new(vec![(CqlType::Int, false), (CqlType::Text, true)]);
    let _ = decode_any(data, &|_| Some(cmp.clone()));
    let _ = Handshake::decode_body(data);
});
