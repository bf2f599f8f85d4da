//! Replica placement against a real Apache Cassandra 5.0.4 cluster: the
//! tokens, racks and `nodetool getendpoints` answers recorded by
//! tests/python/capture_cassandra_placement.py from three Cassandra nodes
//! (dc1: rack1, rack2, rack1). The same tokens must give the same replicas,
//! in the same order, under SimpleStrategy and NetworkTopologyStrategy, and
//! the keys must hash to the tokens Cassandra computed.

use sibyl_cluster::{Endpoint, TokenMetadata};
use sibyl_schema::ReplicationStrategy;
use std::collections::BTreeMap;
use std::net::IpAddr;

#[test]
fn replicas_match_a_real_cassandra_cluster() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/cassandra_placement.json"
    );
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("golden file")).expect("json");
    let mut ring = TokenMetadata::new();
    for (i, n) in golden["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .enumerate()
    {
        let address: IpAddr = n["address"].as_str().expect("address").parse().expect("ip");
        let tokens: Vec<i64> = n["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .map(|t| t.as_i64().expect("token"))
            .collect();
        ring.add(
            Endpoint {
                host_id: uuid::Uuid::from_u128(i as u128 + 1),
                address,
                datacenter: n["datacenter"].as_str().expect("dc").into(),
                rack: n["rack"].as_str().expect("rack").into(),
            },
            &tokens,
        );
    }
    let mut checked = 0;
    for (ks, params) in golden["replication"].as_object().expect("replication") {
        let map: BTreeMap<String, String> = params
            .as_object()
            .expect("params")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().expect("value").to_string()))
            .collect();
        let strategy = ReplicationStrategy::parse(&map);
        for k in golden["keys"].as_array().expect("keys") {
            let key = k["key"].as_str().expect("key");
            let token = k["token"].as_i64().expect("token");
            assert_eq!(sibyl_types::murmur3::token(key.as_bytes()), token, "{key}");
            let ours: Vec<String> = ring
                .replicas(token, &strategy)
                .into_iter()
                .map(|i| ring.endpoints[i].address.to_string())
                .collect();
            let theirs: Vec<String> = golden["endpoints"][ks][key]
                .as_array()
                .expect("endpoints")
                .iter()
                .map(|e| e.as_str().expect("ip").to_string())
                .collect();
            assert_eq!(ours, theirs, "{ks} {key} (token {token})");
            checked += 1;
        }
    }
    assert_eq!(checked, 80);
}
