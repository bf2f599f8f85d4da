//! CQL identifiers: Cassandra's reserved keywords and its quoting rule, the
//! one list and the one function every crate of the workspace uses (the
//! parser, DESCRIBE, type names, the stress tool).

/// Cassandra 5.0's reserved keywords (`cql3/reserved_keywords.txt`): they
/// cannot be used as unquoted identifiers.
pub const RESERVED_KEYWORDS: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "delete",
    "desc",
    "describe",
    "drop",
    "entries",
    "execute",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "limit",
    "materialized",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "truncate",
    "unlogged",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// Whether `word` (any case) is a reserved keyword.
pub fn is_reserved(word: &str) -> bool {
    RESERVED_KEYWORDS
        .iter()
        .any(|k| k.eq_ignore_ascii_case(word))
}

/// Cassandra's `ColumnIdentifier.maybeQuote`: an identifier is written as it
/// is when it matches `[a-z][a-z0-9_]*` and is not reserved, otherwise in
/// double quotes with inner quotes doubled.
pub fn maybe_quote(name: &str) -> String {
    let mut chars = name.chars();
    let plain = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain && !is_reserved(name) {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// The native types' names, which Cassandra's lexer reads as keywords: a
/// user type cannot take them.
pub const NATIVE_TYPE_NAMES: [&str; 21] = [
    "ascii",
    "bigint",
    "blob",
    "boolean",
    "counter",
    "date",
    "decimal",
    "double",
    "duration",
    "float",
    "inet",
    "int",
    "smallint",
    "text",
    "time",
    "timestamp",
    "timeuuid",
    "tinyint",
    "uuid",
    "varchar",
    "varint",
];

/// The elements of a Java `HashSet<String>` in its iteration order, as
/// Cassandra's messages print them: distinct, by bucket of `String.hashCode`
/// (spread as `HashMap.hash`) in a table of 16 slots doubled until the set
/// fits under its 0.75 load factor, in insertion order within a bucket.
pub fn java_hash_set(items: Vec<String>) -> Vec<String> {
    let mut distinct: Vec<String> = Vec::new();
    for i in items {
        if !distinct.contains(&i) {
            distinct.push(i);
        }
    }
    let mut capacity = 16usize;
    while distinct.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let bucket = |s: &String| {
        let h = s
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
        let spread = h ^ ((h as u32) >> 16) as i32;
        (spread as u32 as usize) & (capacity - 1)
    };
    let mut order: Vec<(usize, usize)> = distinct
        .iter()
        .enumerate()
        .map(|(i, s)| (bucket(s), i))
        .collect();
    order.sort_unstable();
    order
        .into_iter()
        .map(|(_, i)| distinct[i].clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_cassandra_does() {
        assert_eq!(maybe_quote("abc_1"), "abc_1");
        assert_eq!(maybe_quote("Abc"), "\"Abc\"");
        assert_eq!(maybe_quote("1abc"), "\"1abc\"");
        assert_eq!(maybe_quote("select"), "\"select\"");
        assert_eq!(maybe_quote("a\"b"), "\"a\"\"b\"");
        assert_eq!(maybe_quote(""), "\"\"");
        assert_eq!(maybe_quote("ttl"), "ttl");
        assert!(is_reserved("SELECT") && is_reserved("view") && !is_reserved("ttl"));
    }
}
