//! Snitches: where an endpoint is (data center and rack), which
//! `NetworkTopologyStrategy` and `LOCAL_*` consistency levels depend on.

use std::net::IpAddr;

/// Cassandra's default data center and rack names (`SimpleSnitch`).
pub const DEFAULT_DATACENTER: &str = "datacenter1";
pub const DEFAULT_RACK: &str = "rack1";

/// Where endpoints are.
pub trait Snitch: Send + Sync {
    fn datacenter(&self, endpoint: IpAddr) -> String;
    fn rack(&self, endpoint: IpAddr) -> String;
    /// The class name `DESCRIBE CLUSTER` and `nodetool describecluster` show.
    fn name(&self) -> &'static str;
}

/// Every endpoint in `datacenter1`, `rack1` (Cassandra's `SimpleSnitch`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SimpleSnitch;

impl Snitch for SimpleSnitch {
    fn datacenter(&self, _: IpAddr) -> String {
        DEFAULT_DATACENTER.into()
    }
    fn rack(&self, _: IpAddr) -> String {
        DEFAULT_RACK.into()
    }
    fn name(&self) -> &'static str {
        "org.apache.cassandra.locator.SimpleSnitch"
    }
}
