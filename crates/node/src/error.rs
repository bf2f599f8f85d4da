//! The node's error type. Every failure a client can see is one of these, and
//! `transport::error_response` maps them to CQL error codes in one place.

use sibyl_protocol::Consistency;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// SYNTAX_ERROR (0x2000)
    #[error("{0}")]
    Syntax(String),
    /// INVALID (0x2200)
    #[error("{0}")]
    Invalid(String),
    /// CONFIG_ERROR (0x2300)
    #[error("{0}")]
    Config(String),
    /// ALREADY_EXISTS (0x2400)
    #[error("{message}")]
    AlreadyExists {
        keyspace: String,
        table: String,
        message: String,
    },
    /// UNPREPARED (0x2500)
    #[error("Prepared query with ID {} not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)", hex(.0))]
    Unprepared(bytes::Bytes),
    /// UNAVAILABLE (0x1000)
    #[error("Cannot achieve consistency level {consistency}")]
    Unavailable {
        consistency: Consistency,
        required: i32,
        alive: i32,
    },
    /// WRITE_TIMEOUT (0x1100)
    #[error("Operation timed out - received only {received} responses.")]
    WriteTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        write_type: String,
    },
    /// READ_TIMEOUT (0x1200)
    #[error("Operation timed out - received only {received} responses.")]
    ReadTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    /// OVERLOADED (0x1001)
    #[error("{0}")]
    Overloaded(String),
    /// TRUNCATE_ERROR (0x1003)
    #[error("{0}")]
    Truncate(String),
    /// PROTOCOL_ERROR (0x000A)
    #[error("{0}")]
    Protocol(String),
    /// UNAUTHORIZED (0x2100)
    #[error("{0}")]
    Unauthorized(String),
    /// FUNCTION_FAILURE (0x1400): a function threw while executing.
    #[error("{message}")]
    FunctionFailure {
        keyspace: String,
        function: String,
        arg_types: Vec<String>,
        message: String,
    },
    /// SERVER_ERROR (0x0000)
    #[error("{0}")]
    Server(String),
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<sibyl_storage::StorageError> for Error {
    fn from(e: sibyl_storage::StorageError) -> Self {
        Error::Server(e.to_string())
    }
}

impl From<sibyl_cql::ParseError> for Error {
    fn from(e: sibyl_cql::ParseError) -> Self {
        Error::Syntax(e.message)
    }
}
