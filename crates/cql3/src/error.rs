//! The node's error type. Every failure a client can see is one of these, and
//! `transport::error_response` maps them to CQL error codes in one place.

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
    /// The coordinator's errors: UNAVAILABLE, WRITE_TIMEOUT, READ_TIMEOUT,
    /// OVERLOADED, TRUNCATE_ERROR, INVALID, SERVER_ERROR.
    #[error(transparent)]
    Service(#[from] sibyl_service::ServiceError),
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

impl From<sibyl_schema::SchemaError> for Error {
    fn from(e: sibyl_schema::SchemaError) -> Self {
        use sibyl_schema::SchemaError as S;
        match e {
            S::Syntax(m) => Error::Syntax(m),
            S::Invalid(m) => Error::Invalid(m),
            S::Config(m) => Error::Config(m),
        }
    }
}

impl From<sibyl_cql::ParseError> for Error {
    fn from(e: sibyl_cql::ParseError) -> Self {
        Error::Syntax(e.message)
    }
}
