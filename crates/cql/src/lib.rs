//! CQL: lexer, parser and the statement AST. Counterpart of Cassandra's `cql3`
//! grammar (`Parser.g`, `Lexer.g`). Preparation and execution live in `node`.

pub mod ast;
pub mod lexer;
pub mod parser;

pub use ast::*;
pub use parser::{parse_statement, parse_statements, ParseError, MAX_NESTING};
