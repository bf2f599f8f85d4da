//! The cluster (Cassandra's `locator`, `net` and `gms` packages): token
//! metadata and the replication strategies that place data, the snitch, the
//! clock, and the messaging interface between nodes, with an in-process
//! implementation for tests and simulation.

pub mod clock;
pub mod endpoint_state;
pub mod failure_detector;
pub mod gossiper;
pub mod messaging;
pub mod net;
pub mod snitch;
pub mod token_allocator;
pub mod token_metadata;

pub use clock::{Clock, ManualClock, SystemClock};
pub use token_metadata::{Endpoint, Replicas, TokenMetadata};
