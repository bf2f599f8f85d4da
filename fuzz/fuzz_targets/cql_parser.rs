//! The CQL lexer and parser must never panic, whatever the text.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = sibyl_cql::parse_statement(s);
        let _ = sibyl_cql::parse_statements(s);
    }
});
