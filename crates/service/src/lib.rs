//! The service layer (Cassandra's `service` package): the coordinator
//! (`StorageProxy`) that every read and write goes through, and the replica
//! side that serves the coordinator's verbs from local storage.

pub mod auto_repair;
pub mod batch;
pub mod batchlog;
pub mod cas;
pub mod client_warn;
pub mod consistency;
pub mod error;
pub mod hints;
pub mod index;
pub mod metrics;
pub mod paxos;
pub mod proxy;
pub mod repair;
pub mod replica;
pub mod stores;
pub mod streaming;
pub mod topology;
pub mod trace_keyspace;

pub use error::ServiceError;
pub use proxy::StorageProxy;
