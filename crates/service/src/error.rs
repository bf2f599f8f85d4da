//! The coordinator's errors: each is one of the protocol's request errors
//! (the transport maps them to codes, in one place).

use sibyl_protocol::Consistency;

/// Cassandra's `WriteType`: what kind of write timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteType {
    Simple,
    Batch,
    UnloggedBatch,
    Counter,
    BatchLog,
    Cas,
}

impl WriteType {
    /// The name the protocol carries.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::BatchLog => "BATCH_LOG",
            WriteType::Cas => "CAS",
        }
    }
}

/// Why the coordinator could not complete a request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServiceError {
    /// Fewer live replicas than the consistency level needs (UNAVAILABLE).
    #[error("Cannot achieve consistency level {consistency}")]
    Unavailable {
        consistency: Consistency,
        required: usize,
        alive: usize,
    },
    /// EACH_QUORUM: one data center has fewer live replicas than its
    /// quorum (UNAVAILABLE, with that data center's figures).
    #[error("Cannot achieve consistency level {consistency} in DC {datacenter}")]
    UnavailableInDatacenter {
        consistency: Consistency,
        datacenter: String,
        required: usize,
        alive: usize,
    },
    /// Too few replicas acknowledged in time (WRITE_TIMEOUT).
    #[error("Operation timed out - received only {received} responses.")]
    WriteTimeout {
        consistency: Consistency,
        received: usize,
        block_for: usize,
        write_type: WriteType,
    },
    /// Too few replicas answered in time (READ_TIMEOUT).
    #[error("Operation timed out - received only {received} responses.")]
    ReadTimeout {
        consistency: Consistency,
        received: usize,
        block_for: usize,
        data_present: bool,
    },
    /// A replica failed the read (a corrupt SSTable, an I/O error) so that
    /// too few answers can come (READ_FAILURE), in Cassandra's words.
    #[error(
        "Operation failed - received {received} responses and {} failures: {}",
        failures.len(),
        failures.iter().map(|(a, _)| format!("UNKNOWN from /{a}")).collect::<Vec<_>>().join(", ")
    )]
    ReadFailure {
        consistency: Consistency,
        received: usize,
        block_for: usize,
        /// Each failed replica with its reason code (0: UNKNOWN).
        failures: Vec<(std::net::IpAddr, u16)>,
        data_present: bool,
    },
    /// Writes held back past their timeout (OVERLOADED).
    #[error("{0}")]
    Overloaded(String),
    /// A truncate that did not complete on every node (TRUNCATE_ERROR).
    #[error("{0}")]
    Truncate(String),
    /// A request the coordinator refuses as asked (INVALID).
    #[error("{0}")]
    Invalid(String),
    /// A replica failed the request (SERVER_ERROR, with the replica's reason).
    #[error("{0}")]
    Replica(String),
    /// A schema change planned against a schema that another change
    /// replaced first; the statement layer plans it again.
    #[error("the schema changed while this change was planned")]
    SchemaConflict,
    /// The cluster metadata log could not commit a change (no majority of
    /// its voters reachable in time); SERVER_ERROR with the reason.
    #[error("{0}")]
    Metadata(String),
}

pub type Result<T> = std::result::Result<T, ServiceError>;

impl From<sibyl_storage::StorageError> for ServiceError {
    fn from(e: sibyl_storage::StorageError) -> Self {
        ServiceError::Replica(e.to_string())
    }
}
