//! Schema (Cassandra's `schema` package): keyspaces with their replication,
//! tables, columns, user types and secondary indexes; their validation with
//! Cassandra's messages; the definitions of the system tables; and the
//! `system_schema` tables that store the schema as mutations.

pub mod error;
pub mod index;
pub mod replication;
pub mod schema;
pub mod schema_tables;
pub mod system_views;

pub use error::SchemaError;
pub use replication::ReplicationStrategy;
