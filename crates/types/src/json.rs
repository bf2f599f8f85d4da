//! JSON values for `INSERT JSON` and `fromJson()`: a small parser that keeps
//! numbers as written (a varint or decimal must not pass through a double),
//! and `CqlType::from_json`, Cassandra's `AbstractType.fromJSONObject`.

use crate::{value, Constant, CqlType, TypeError};
use bytes::Bytes;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// A number as written.
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Members in document order (duplicates kept; the caller decides).
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Result<Json, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            pos: 0,
            depth: 0,
        };
        p.ws();
        let v = p.value()?;
        p.ws();
        if p.pos != p.s.len() {
            return Err(format!("Unexpected character at position {}", p.pos));
        }
        Ok(v)
    }

    /// Jackson's name for the kind of value, as Cassandra's messages use it.
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "Boolean",
            Json::Number(n) if n.contains(['.', 'e', 'E']) => "Double",
            Json::Number(n) => {
                if n.parse::<i32>().is_ok() {
                    "Integer"
                } else if n.parse::<i64>().is_ok() {
                    "Long"
                } else {
                    "BigInteger"
                }
            }
            Json::String(_) => "String",
            Json::Array(_) => "ArrayList",
            Json::Object(_) => "LinkedHashMap",
        }
    }

    /// The value as Jackson's `toString` shows it in messages.
    pub fn show(&self) -> String {
        match self {
            Json::Null => "null".into(),
            Json::Bool(b) => b.to_string(),
            Json::Number(n) => n.clone(),
            Json::String(s) => s.clone(),
            Json::Array(xs) => format!(
                "[{}]",
                xs.iter().map(|x| x.show()).collect::<Vec<_>>().join(", ")
            ),
            Json::Object(m) => format!(
                "{{{}}}",
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.show()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at position {}", self.pos))
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.pos..].starts_with(lit.as_bytes()) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        if self.depth > 256 {
            return self.err("Nesting too deep");
        }
        match self.s.get(self.pos) {
            None => self.err("Unexpected end-of-input"),
            Some(b'{') => {
                self.pos += 1;
                self.depth += 1;
                let mut members = Vec::new();
                self.ws();
                if self.eat("}") {
                    self.depth -= 1;
                    return Ok(Json::Object(members));
                }
                loop {
                    self.ws();
                    if self.s.get(self.pos) != Some(&b'"') {
                        return self.err("Expected a field name");
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(":") {
                        return self.err("Expected ':'");
                    }
                    self.ws();
                    let v = self.value()?;
                    members.push((k, v));
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("}") {
                        break;
                    }
                    return self.err("Expected ',' or '}'");
                }
                self.depth -= 1;
                Ok(Json::Object(members))
            }
            Some(b'[') => {
                self.pos += 1;
                self.depth += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat("]") {
                    self.depth -= 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    self.ws();
                    items.push(self.value()?);
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("]") {
                        break;
                    }
                    return self.err("Expected ',' or ']'");
                }
                self.depth -= 1;
                Ok(Json::Array(items))
            }
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b't') if self.eat("true") => Ok(Json::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Json::Bool(false)),
            Some(b'n') if self.eat("null") => Ok(Json::Null),
            // Jackson with ALLOW_NON_NUMERIC_NUMBERS, as Cassandra configures it
            Some(b'N') if self.eat("NaN") => Ok(Json::Number("NaN".into())),
            Some(b'I') if self.eat("Infinity") => Ok(Json::Number("Infinity".into())),
            Some(b'-') if self.s[self.pos..].starts_with(b"-Infinity") => {
                self.pos += 9;
                Ok(Json::Number("-Infinity".into()))
            }
            Some(c) if *c == b'-' || c.is_ascii_digit() => self.number(),
            Some(_) => self.err("Unexpected character"),
        }
    }

    /// A character as Jackson names it in its messages.
    fn desc(&self, at: usize) -> String {
        match self.s.get(at) {
            None => "end-of-input".into(),
            Some(&c) if c < 0x20 => format!("(CTRL-CHAR, code {c})"),
            Some(&c) => format!("'{}' (code {c})", c as char),
        }
    }

    /// A number by JSON's grammar, `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`,
    /// refused where JSON refuses it (`01`, `1.`, `-.5`, `1e`) with
    /// Jackson's words, as Cassandra's parser is Jackson.
    fn number(&mut self) -> Result<Json, String> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.s.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos - from
        };
        if self.s.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        if digits(self) == 0 {
            return self.err(&format!(
                "Unexpected character ({}) in numeric value: expected digit (0-9) to follow minus sign, for valid numeric value",
                self.desc(self.pos)
            ));
        }
        if self.s[int_start] == b'0' && self.pos - int_start > 1 {
            return self.err("Invalid numeric value: Leading zeroes not allowed");
        }
        if self.s.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return self.err(&format!(
                    "Unexpected character ({}) in numeric value: Decimal point not followed by a digit",
                    self.desc(self.pos)
                ));
            }
        }
        if matches!(self.s.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.s.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return self.err(&format!(
                    "Unexpected character ({}) in numeric value: Exponent indicator not followed by a digit",
                    self.desc(self.pos)
                ));
            }
        }
        let n = std::str::from_utf8(&self.s[start..self.pos])
            .unwrap_or_default()
            .to_string();
        Ok(Json::Number(n))
    }

    fn string(&mut self) -> Result<String, String> {
        self.pos += 1; // opening quote
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return self.err("Unexpected end-of-input in a string");
            };
            self.pos += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        return self.err("Unexpected end-of-input in a string");
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp) && self.eat("\\u") {
                                let lo = self.hex4()?;
                                cp = 0x10000
                                    + ((cp - 0xD800) << 10)
                                    + (lo.wrapping_sub(0xDC00) & 0x3ff);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return self.err("Unrecognized character escape"),
                    }
                }
                c if c < 0x20 => {
                    return self.err(&format!(
                        "Illegal unquoted character ({}): has to be escaped using backslash to be included in string value",
                        self.desc(self.pos - 1)
                    ))
                }
                c => out.push(c),
            }
        }
        String::from_utf8(out).or_else(|_| self.err("Invalid UTF-8"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self
            .s
            .get(self.pos..self.pos + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok());
        match h {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => self.err("Invalid \\u escape"),
        }
    }
}

fn bad(m: String) -> TypeError {
    TypeError::InvalidValue(m)
}

/// A JSON member name as a CQL identifier: `"\"Name\""` is case-sensitive,
/// anything else is folded to lower case.
pub fn unquote_identifier(name: &str) -> String {
    match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(inner) => inner.replace("\"\"", "\""),
        None => name.to_lowercase(),
    }
}

fn parse_hex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| h.get(i..i + 2).and_then(|x| u8::from_str_radix(x, 16).ok()))
        .collect()
}

impl CqlType {
    /// A JSON value as a value of this type (Cassandra's `fromJSONObject`).
    /// `Json::Null` is the caller's business (it means null).
    pub fn from_json(&self, j: &Json) -> Result<Bytes, TypeError> {
        let t = self.unfrozen();
        let expected = |what: &str| {
            bad(format!(
                "Expected {what}, but got a {}: {}",
                j.kind(),
                j.show()
            ))
        };
        // `fromString("")` of most types is the empty value (false for a
        // boolean)
        if matches!(j, Json::String(s) if s.is_empty()) {
            match t {
                CqlType::Int
                | CqlType::Bigint
                | CqlType::Smallint
                | CqlType::Tinyint
                | CqlType::Counter
                | CqlType::Float
                | CqlType::Double
                | CqlType::Decimal
                | CqlType::Inet
                | CqlType::Timestamp
                | CqlType::Uuid
                | CqlType::Timeuuid
                | CqlType::Duration => return Ok(Bytes::new()),
                CqlType::Boolean => return Ok(Bytes::copy_from_slice(&[0])),
                CqlType::Varint => {
                    return Err(bad(
                        "Value '' is not a valid representation of a varint value".into(),
                    ))
                }
                _ => {}
            }
        }
        match t {
            CqlType::Ascii | CqlType::Text => match j {
                Json::String(s) => self.from_constant(&Constant::String(s.clone())),
                _ => Err(expected(if matches!(t, CqlType::Ascii) { "an ascii string" } else { "a UTF-8 string" })),
            },
            CqlType::Boolean => match j {
                Json::Bool(b) => Ok(Bytes::copy_from_slice(&[*b as u8])),
                Json::String(s) if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") => {
                    Ok(Bytes::copy_from_slice(&[s.eq_ignore_ascii_case("true") as u8]))
                }
                _ => Err(expected("a boolean value")),
            },
            CqlType::Int | CqlType::Bigint | CqlType::Smallint | CqlType::Tinyint | CqlType::Varint | CqlType::Counter => match j {
                Json::Number(n) | Json::String(n) => {
                    let too_wide = matches!(
                        (j.kind(), t),
                        ("Long" | "BigInteger", CqlType::Int)
                            | ("BigInteger", CqlType::Bigint | CqlType::Counter)
                    );
                    // IntegerType.fromJSONObject: new BigInteger(parsed.toString())
                    if matches!(t, CqlType::Varint) && matches!(j, Json::Number(_)) && n.contains(['.', 'e', 'E']) {
                        let f: f64 = n.parse().unwrap_or(f64::NAN);
                        return Err(bad(format!("Value '{}' is not a valid representation of a varint value", crate::marshal::java_double(f))));
                    }
                    if matches!(j, Json::Number(_)) && (too_wide || n.contains(['.', 'e', 'E'])) {
                        return Err(bad(format!("Expected an {} value, but got a {}: {}", int_word(t), j.kind(), j.show())));
                    }
                    self.from_constant(&Constant::Integer(n.clone()))
                }
                _ => Err(bad(format!("Expected an {} value, but got a {}: {}", int_word(t), j.kind(), j.show()))),
            },
            CqlType::Float | CqlType::Double | CqlType::Decimal => match j {
                // Jackson reads a JSON number with a fraction or an exponent
                // as a Java double: a decimal gets that double's digits
                Json::Number(n) if matches!(t, CqlType::Decimal) && n.contains(['.', 'e', 'E']) => {
                    let f: f64 = n.parse().unwrap_or(f64::NAN);
                    let text = crate::marshal::java_double(f);
                    if !f.is_finite() {
                        return Err(bad(format!("Value '{text}' is not a valid representation of a decimal value")));
                    }
                    self.from_constant(&Constant::Float(text))
                }
                Json::Number(n) | Json::String(n) => {
                    let c = if n.contains(['.', 'e', 'E', 'N', 'I']) { Constant::Float(n.clone()) } else { Constant::Integer(n.clone()) };
                    self.from_constant(&c)
                }
                _ => Err(bad(format!("Expected a {} value, but got a {}: {}", float_word(t), j.kind(), j.show()))),
            },
            CqlType::Blob => match j {
                Json::String(s) => {
                    let not_blob = |why: String| bad(format!("Value '{s}' is not a valid blob representation: {why}"));
                    let h = s.strip_prefix("0x").ok_or_else(|| not_blob(format!("String representation of blob is missing 0x prefix: {s}")))?;
                    let bytes = parse_hex(h).ok_or_else(|| not_blob(format!("cannot parse '{h}' as hex bytes")))?;
                    Ok(Bytes::from(bytes))
                }
                _ => {
                    let k = j.kind();
                    Err(bad(format!(
                        "Value '{}' is not a valid blob representation: class java.lang.{k} cannot be cast to class java.lang.String (java.lang.{k} and java.lang.String are in module java.base of loader 'bootstrap')",
                        j.show()
                    )))
                }
            },
            CqlType::Timestamp => match j {
                Json::String(s) => self.from_constant(&Constant::String(s.clone())),
                Json::Number(n) if !n.contains(['.', 'e', 'E']) => self.from_constant(&Constant::Integer(n.clone())),
                _ => Err(bad(format!("Expected a long or a datestring representation of a timestamp value, but got a {}: {}", j.kind(), j.show()))),
            },
            CqlType::Date | CqlType::Time => match j {
                Json::String(s) => self.from_constant(&Constant::String(s.clone())).map_err(|e| match t {
                    CqlType::Time if e.to_string().starts_with("Unable to coerce") => {
                        bad(format!("(TimeType) {e}"))
                    }
                    _ => e,
                }),
                _ => Err(bad(format!("Expected a string representation of a {t} value, but got a {}: {}", j.kind(), j.show()))),
            },
            CqlType::Uuid | CqlType::Timeuuid => match j {
                Json::String(s) => self.from_constant(&Constant::Uuid(s.clone())).map_err(|_| bad(format!("Unable to make {} from '{s}'", if matches!(t, CqlType::Uuid) { "UUID" } else { "timeuuid" }))),
                _ => Err(bad(format!("Expected a string representation of a uuid, but got a {}: {}", j.kind(), j.show()))),
            },
            CqlType::Inet => match j {
                Json::String(s) => self.from_constant(&Constant::String(s.clone())),
                _ => Err(bad(format!("Expected a string representation of an inet value, but got a {}: {}", j.kind(), j.show()))),
            },
            CqlType::Duration => match j {
                Json::String(s) => self.from_constant(&Constant::Duration(s.clone())),
                _ => Err(bad(format!("Expected a string representation of a duration, but got a {}: {}", j.kind(), j.show()))),
            },
            CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) => {
                let Json::Array(items) = j else {
                    return Err(bad(format!("Expected a list, but got a {}: {}", j.kind(), j.show())));
                };
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    if *it == Json::Null {
                        return Err(bad(format!("Invalid null element in {}", if matches!(t, CqlType::Set(_)) { "set" } else { "list" })));
                    }
                    out.push(e.from_json(it)?);
                }
                match t {
                    CqlType::Set(_) => {
                        out.sort_by(|a, b| e.compare(a, b));
                        out.dedup_by(|a, b| e.compare(a, b) == std::cmp::Ordering::Equal);
                        Ok(value::serialize_collection(&out))
                    }
                    CqlType::Vector(_, n) => {
                        if out.len() != *n as usize {
                            return Err(bad(format!("Invalid vector literal for {t}: expected {n} elements but got {}", out.len())));
                        }
                        Ok(crate::serialize_vector(e, &out))
                    }
                    _ => Ok(value::serialize_collection(&out)),
                }
            }
            CqlType::Map(k, v) => {
                let Json::Object(members) = j else {
                    return Err(bad(format!("Expected a map, but got a {}: {}", j.kind(), j.show())));
                };
                let mut pairs = Vec::with_capacity(members.len());
                for (ks, vj) in members {
                    let key = match k.unfrozen() {
                        CqlType::Ascii | CqlType::Text => k.from_json(&Json::String(ks.clone()))?,
                        _ => {
                            let kj = Json::parse(ks).unwrap_or_else(|_| Json::String(ks.clone()));
                            k.from_json(&kj)?
                        }
                    };
                    if *vj == Json::Null {
                        return Err(bad("Invalid null value in map".into()));
                    }
                    pairs.push((key, v.from_json(vj)?));
                }
                pairs.sort_by(|a, b| k.compare(&a.0, &b.0));
                pairs.dedup_by(|a, b| k.compare(&a.0, &b.0) == std::cmp::Ordering::Equal);
                Ok(value::serialize_map(&pairs))
            }
            CqlType::Tuple(types) => {
                let Json::Array(items) = j else {
                    return Err(bad(format!("Expected a list representation of a tuple, but got a {}: {}", j.kind(), j.show())));
                };
                if items.len() > types.len() {
                    return Err(bad(format!("Tuple contains extra items (expected {}): {}", types.len(), j.show())));
                }
                if items.len() < types.len() {
                    return Err(bad(format!("Tuple is missing items (expected {}): {}", types.len(), j.show())));
                }
                let mut out = Vec::with_capacity(items.len());
                for (it, ty) in items.iter().zip(types) {
                    out.push(if *it == Json::Null { None } else { Some(ty.from_json(it)?) });
                }
                Ok(value::serialize_tuple(&out))
            }
            CqlType::Udt(u) => {
                let Json::Object(members) = j else {
                    return Err(bad(format!("Expected a map, but got a {}: {}", j.kind(), j.show())));
                };
                let mut out: Vec<Option<Bytes>> = vec![None; u.fields.len()];
                for (name, vj) in members {
                    let field = unquote_identifier(name);
                    let Some(i) = u.fields.iter().position(|(n, _)| *n == field) else {
                        return Err(bad(format!("Unknown field '{field}' in value of user defined type {}", u.name)));
                    };
                    if *vj != Json::Null {
                        out[i] = Some(u.fields[i].1.from_json(vj)?);
                    }
                }
                Ok(value::serialize_tuple(&out))
            }
            _ => Err(bad(format!("Cannot read {t} from JSON"))),
        }
    }
}

fn int_word(t: &CqlType) -> &'static str {
    match t {
        CqlType::Bigint | CqlType::Counter => "bigint",
        CqlType::Smallint => "smallint",
        CqlType::Tinyint => "tinyint",
        CqlType::Varint => "varint",
        _ => "int",
    }
}

fn float_word(t: &CqlType) -> &'static str {
    match t {
        CqlType::Float => "float",
        CqlType::Decimal => "decimal",
        _ => "double",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_json_forbids_as_jackson_does() {
        for (doc, msg) in [
            ("01", "Leading zeroes not allowed"),
            ("-01", "Leading zeroes not allowed"),
            ("1.", "Decimal point not followed by a digit"),
            ("[1.]", "Decimal point not followed by a digit"),
            ("-.5", "expected digit (0-9) to follow minus sign"),
            ("-", "expected digit (0-9) to follow minus sign"),
            ("1e", "Exponent indicator not followed by a digit"),
            ("1e+", "Exponent indicator not followed by a digit"),
            (
                "\"a\nb\"",
                "Illegal unquoted character ((CTRL-CHAR, code 10))",
            ),
            (
                "\"a\tb\"",
                "Illegal unquoted character ((CTRL-CHAR, code 9))",
            ),
            (".5", "Unexpected character"),
        ] {
            let e = Json::parse(doc).expect_err(doc);
            assert!(e.contains(msg), "{doc}: {e}");
        }
        for ok in ["0", "-0", "1.5e+3", "10", "0.25", "-1E-2", "\"a\\nb\""] {
            Json::parse(ok).expect(ok);
        }
    }

    #[test]
    fn parses_documents_and_keeps_numbers_as_written() {
        let j = Json::parse(r#" {"a": [1, -2.5e3, 123456789012345678901234567890], "b\"": {"c": null, "d": true}, "e": "\u00e9\ud83d\ude00"} "#).unwrap();
        let Json::Object(m) = j else { panic!() };
        assert_eq!(
            m[0].1,
            Json::Array(vec![
                Json::Number("1".into()),
                Json::Number("-2.5e3".into()),
                Json::Number("123456789012345678901234567890".into())
            ])
        );
        assert_eq!(m[1].0, "b\"");
        assert_eq!(m[2].1, Json::String("é😀".into()));
        for bad in ["{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "1 2", "["] {
            assert!(Json::parse(bad).is_err(), "{bad}");
        }
        assert!(
            Json::parse(&"[".repeat(10_000)).is_err(),
            "deep nesting is refused, not a stack overflow"
        );
    }

    #[test]
    fn typed_values_round_trip_through_json() {
        let t = CqlType::Map(
            Box::new(CqlType::Int),
            Box::new(CqlType::List(Box::new(CqlType::Text))),
        );
        let v = t
            .from_json(&Json::parse(r#"{"2": ["b"], "1": ["a", "c"]}"#).unwrap())
            .unwrap();
        assert_eq!(t.to_json(&v), r#"{"1": ["a", "c"], "2": ["b"]}"#);
        let big = CqlType::Varint
            .from_json(&Json::parse("123456789012345678901234567890").unwrap())
            .unwrap();
        assert_eq!(
            CqlType::Varint.to_json(&big),
            "123456789012345678901234567890"
        );
        assert!(CqlType::Int.from_json(&Json::Number("1.5".into())).is_err());
        assert!(CqlType::Text.from_json(&Json::Number("1".into())).is_err());
    }
}
