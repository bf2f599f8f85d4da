//! Cassandra's operation functions (`system._add`, `_substract`,
//! `_multiply`, `_divide`, `_modulo`, `_negate`) and how a call picks one of
//! their signatures (`FunctionResolver`): each argument is tested against
//! each signature (exact match, weakly assignable, not assignable), an exact
//! match wins, a single compatible signature is taken, several are
//! ambiguous.

use crate::error::{Error, Result};
use sibyl_types::{Constant, CqlType};

/// Cassandra's `AssignmentTestable.TestResult`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    Exact,
    Weak,
    No,
}

impl Fit {
    pub fn assignable(self) -> bool {
        self != Fit::No
    }
}

/// `receiver.isValueCompatibleWith(t)`: a receiver of the first type reads
/// values serialized as the second (text reads ascii, bigint and varint read
/// timestamps, ...).
pub fn value_compatible(receiver: &CqlType, t: &CqlType) -> bool {
    use CqlType::*;
    let (r, t) = (receiver.unfrozen(), t.unfrozen());
    r == t
        || matches!(
            (r, t),
            (Blob, _)
                | (Text, Ascii)
                | (Date, Int)
                | (Bigint, Timestamp)
                | (Timestamp, Bigint)
                | (Varint, Int | Bigint | Timestamp)
        )
}

/// `AbstractType.testAssignment(receiver)` for a value of a known type.
pub fn type_fit(t: &CqlType, receiver: &CqlType) -> Fit {
    if t.unfrozen() == receiver.unfrozen() {
        Fit::Exact
    } else if value_compatible(receiver, t) {
        Fit::Weak
    } else {
        Fit::No
    }
}

/// The type a literal prefers (`Constants.Literal.preferedType`): integers
/// as int, bigint or varint by size, floats as double, strings as ascii when
/// they are.
pub fn preferred_type(c: &Constant) -> CqlType {
    match c {
        Constant::Integer(s) => match s.parse::<i64>() {
            Ok(v) if i32::try_from(v).is_ok() => CqlType::Int,
            Ok(_) => CqlType::Bigint,
            Err(_) => CqlType::Varint,
        },
        Constant::Float(s) => float_preferred_type(s),
        Constant::String(s) if s.is_ascii() => CqlType::Ascii,
        Constant::String(_) => CqlType::Text,
        Constant::Boolean(_) => CqlType::Boolean,
        Constant::Uuid(_) => CqlType::Uuid,
        Constant::Hex(_) => CqlType::Blob,
        Constant::Duration(_) => CqlType::Duration,
    }
}

/// Cassandra's `Constants.Type.FLOAT.getPreferedTypeFor`: a double when
/// the literal's value is the decimal the nearest double prints as (`1.50`,
/// `0.1`, `1e20`), else a decimal (`12345678901234567890.123456789`).
fn float_preferred_type(text: &str) -> CqlType {
    let t = text.trim_start_matches('-');
    if t == "NaN" || t == "Infinity" {
        return CqlType::Double;
    }
    let (Ok(exact), Ok(f)) = (text.parse::<bigdecimal::BigDecimal>(), text.parse::<f64>()) else {
        return CqlType::Double;
    };
    let as_double = crate::functions::java_double_decimal(f);
    if f.is_finite() && exact == as_double {
        CqlType::Double
    } else {
        CqlType::Decimal
    }
}

/// `Constants.Literal.testAssignment`.
pub fn literal_fit(c: &Constant, receiver: &CqlType) -> Fit {
    use CqlType::*;
    let r = receiver.unfrozen();
    if r.is_collection() || matches!(r, Udt(_)) {
        return Fit::No;
    }
    if matches!(r, Tuple(_) | Vector(..) | Custom(_)) {
        return Fit::Weak;
    }
    if *r == preferred_type(c) {
        return Fit::Exact;
    }
    let weak = match c {
        Constant::String(_) => matches!(r, Ascii | Text | Inet | Date | Time | Timestamp),
        Constant::Integer(_) => matches!(
            r,
            Bigint
                | Counter
                | Date
                | Decimal
                | Double
                | Duration
                | Float
                | Int
                | Smallint
                | Time
                | Timestamp
                | Tinyint
                | Varint
        ),
        Constant::Uuid(_) => matches!(r, Uuid | Timeuuid),
        Constant::Float(_) => matches!(r, Decimal | Double | Float),
        Constant::Boolean(_) => matches!(r, Boolean),
        Constant::Hex(_) => matches!(r, Blob),
        Constant::Duration(_) => matches!(r, Duration),
    };
    if weak {
        Fit::Weak
    } else {
        Fit::No
    }
}

/// `null` fits anything but a counter.
pub fn null_fit(receiver: &CqlType) -> Fit {
    if receiver.unfrozen().is_counter() {
        Fit::No
    } else {
        Fit::Weak
    }
}

/// The numeric types in the order Cassandra declares their functions.
const NUMERIC: [CqlType; 9] = [
    CqlType::Tinyint,
    CqlType::Smallint,
    CqlType::Int,
    CqlType::Bigint,
    CqlType::Float,
    CqlType::Double,
    CqlType::Decimal,
    CqlType::Varint,
    CqlType::Counter,
];

/// The signatures `(left, right) -> result` of an operator.
pub fn signatures(op: char) -> Vec<(CqlType, CqlType, CqlType)> {
    let mut out = Vec::new();
    for l in &NUMERIC {
        for r in &NUMERIC {
            if let Some(t) = crate::functions::arithmetic_type(l, r) {
                out.push((l.clone(), r.clone(), t));
            }
        }
    }
    if matches!(op, '+' | '-') {
        for t in [CqlType::Timestamp, CqlType::Date] {
            out.push((t.clone(), CqlType::Duration, t));
        }
    }
    if op == '+' {
        for (l, r) in [
            (CqlType::Ascii, CqlType::Ascii),
            (CqlType::Ascii, CqlType::Text),
            (CqlType::Text, CqlType::Ascii),
            (CqlType::Text, CqlType::Text),
        ] {
            let t = if l == CqlType::Ascii && r == CqlType::Ascii {
                CqlType::Ascii
            } else {
                CqlType::Text
            };
            out.push((l, r, t));
        }
    }
    out
}

/// Picks the signature of `left op right` (Cassandra's `FunctionResolver.get`
/// for an operation): `fit(i, t)` tests argument `i` against type `t`;
/// `receiver` is the type the result is assigned to, if known; `names` are
/// the arguments as Cassandra prints them.
pub fn resolve_operation(
    op: char,
    fit: &mut dyn FnMut(usize, &CqlType) -> Result<Fit>,
    receiver: Option<&CqlType>,
    names: (&str, &str),
    has_markers: bool,
) -> Result<(CqlType, CqlType, CqlType)> {
    let mut compatibles = Vec::new();
    for (l, r, t) in signatures(op) {
        if let Some(rt) = receiver {
            if !type_fit(&t, rt).assignable() {
                continue;
            }
        }
        let a = fit(0, &l)?;
        if a == Fit::No {
            continue;
        }
        let b = fit(1, &r)?;
        match (a, b) {
            (_, Fit::No) => {}
            (Fit::Exact, Fit::Exact) => return Ok((l, r, t)),
            _ => compatibles.push((l, r, t)),
        }
    }
    match compatibles.len() {
        0 => Err(Error::Invalid(format!(
            "the '{op}' operation is not supported between {} and {}",
            names.0, names.1
        ))),
        1 => Ok(compatibles.remove(0)),
        _ => {
            if let Some(rt) = receiver {
                if !has_markers {
                    if let Some(s) = compatibles
                        .iter()
                        .find(|(l, r, _)| l == rt.unfrozen() && r == rt.unfrozen())
                    {
                        return Ok(s.clone());
                    }
                }
            }
            Err(Error::Invalid(format!(
                "Ambiguous '{op}' operation with args {} and {}: use type hint to disambiguate, example '(int) ?'",
                names.0, names.1
            )))
        }
    }
}

/// Cassandra's list of the signatures of a one-argument numeric function
/// (`system."_negate" : (int) -> int, ...`).
pub fn numeric_signatures(name: &str) -> String {
    NUMERIC
        .iter()
        .map(|t| format!("system.{name} : ({t}) -> {t}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Picks the type of a one-argument numeric function (`_negate`, `abs`):
/// `shown` is the function's name in messages.
pub fn resolve_numeric(
    fit: &mut dyn FnMut(&CqlType) -> Result<Fit>,
    receiver: Option<&CqlType>,
    quoted: &str,
    shown: &str,
) -> Result<CqlType> {
    let mut compatibles = Vec::new();
    for t in &NUMERIC {
        if let Some(rt) = receiver {
            if !type_fit(t, rt).assignable() {
                continue;
            }
        }
        match fit(t)? {
            Fit::Exact => return Ok(t.clone()),
            Fit::Weak => compatibles.push(t.clone()),
            Fit::No => {}
        }
    }
    match compatibles.len() {
        0 => Err(Error::Invalid(format!(
            "Invalid call to function {shown}, none of its type signatures match (known type signatures: {})",
            numeric_signatures(quoted)
        ))),
        1 => Ok(compatibles.remove(0)),
        _ if quoted == "\"_negate\"" => Err(Error::Invalid(
            "Ambiguous negation: use type casts to disambiguate".into(),
        )),
        _ => Err(Error::Invalid(format!(
            "Ambiguous call to function {shown} (can be matched by following signatures: {}): use type casts to disambiguate",
            compatibles
                .iter()
                .map(|t| format!("system.{quoted} : ({t}) -> {t}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Constant {
        Constant::Integer(s.into())
    }

    #[test]
    fn literals_prefer_their_narrowest_type() {
        assert_eq!(literal_fit(&lit("1"), &CqlType::Int), Fit::Exact);
        assert_eq!(literal_fit(&lit("1"), &CqlType::Tinyint), Fit::Weak);
        assert_eq!(
            literal_fit(&lit("9223372036854775807"), &CqlType::Bigint),
            Fit::Exact
        );
        assert_eq!(
            literal_fit(&Constant::String("a".into()), &CqlType::Ascii),
            Fit::Exact
        );
        assert_eq!(
            literal_fit(&Constant::String("a".into()), &CqlType::Int),
            Fit::No
        );
    }

    #[test]
    fn operations_resolve_like_cassandra() {
        // c8 + 1 is tinyint + int -> int
        let mut fit = |i: usize, t: &CqlType| -> Result<Fit> {
            Ok(if i == 0 {
                type_fit(&CqlType::Tinyint, t)
            } else {
                literal_fit(&lit("1"), t)
            })
        };
        let (l, r, t) = resolve_operation('+', &mut fit, None, ("c8", "1"), false).unwrap();
        assert_eq!((l, r, t), (CqlType::Tinyint, CqlType::Int, CqlType::Int));
        // ts + 1 is ambiguous (timestamp + duration, bigint + int, ...)
        let mut fit = |i: usize, t: &CqlType| -> Result<Fit> {
            Ok(if i == 0 {
                type_fit(&CqlType::Timestamp, t)
            } else {
                literal_fit(&lit("1"), t)
            })
        };
        let e = resolve_operation('+', &mut fit, None, ("ts", "1"), false).unwrap_err();
        assert!(e.to_string().contains("Ambiguous '+' operation"));
        // 7 - 10 into a decimal picks decimal - decimal
        let mut fit = |_: usize, t: &CqlType| -> Result<Fit> { Ok(literal_fit(&lit("7"), t)) };
        let (_, _, t) =
            resolve_operation('-', &mut fit, Some(&CqlType::Decimal), ("7", "10"), false).unwrap();
        assert_eq!(t, CqlType::Decimal);
    }
}
