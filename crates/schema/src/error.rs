//! The schema's errors: what a CQL client sees when a definition is refused.

/// A refused schema definition or option.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    /// SYNTAX_ERROR: an option value that does not parse.
    #[error("{0}")]
    Syntax(String),
    /// INVALID: a definition Cassandra refuses.
    #[error("{0}")]
    Invalid(String),
    /// CONFIG_ERROR: an option Cassandra refuses.
    #[error("{0}")]
    Config(String),
}

pub type Result<T> = std::result::Result<T, SchemaError>;
