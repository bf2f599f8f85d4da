//! CQL statements (Cassandra's `cql3` package): the query processor, the
//! statements and their restrictions, selections, modifications, functions,
//! batches and DESCRIBE. Statements build read commands and mutations and
//! hand them to the coordinator; results are post-processed here (filtering,
//! aggregates, paging, JSON).

pub mod aggregates;
pub mod describe;
pub mod error;
pub mod functions;
pub mod modification;
pub mod operations;
pub mod prepared_cache;
pub mod query;
pub mod restrictions;
pub mod select;
pub mod terms;
pub mod virtual_table;
