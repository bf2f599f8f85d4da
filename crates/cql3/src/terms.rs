//! Evaluating terms (literals, bind markers, collection literals, function
//! calls) into serialized values of a receiver's type.

use crate::error::{Error, Result};
use crate::operations::Fit;
use bytes::Bytes;
use sibyl_cql::{BindMarker, Term};
use sibyl_protocol::Value;
use sibyl_types::{value, Constant, CqlType};

/// A value ready to write: a serialized value, null, or unset (leave as is).
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Unset,
    Set(Bytes),
}

impl Val {
    pub fn bytes(&self) -> Option<&Bytes> {
        match self {
            Val::Set(b) => Some(b),
            _ => None,
        }
    }
}

/// Bound values of one execution, by marker index.
pub struct Bindings<'a> {
    pub values: &'a [Value],
}

impl<'a> Bindings<'a> {
    pub fn get(&self, m: &BindMarker) -> Result<Val> {
        match self.values.get(m.index) {
            Some(Value::Set(b)) => Ok(Val::Set(b.clone())),
            Some(Value::Null) => Ok(Val::Null),
            Some(Value::Unset) => Ok(Val::Unset),
            None => Err(Error::Invalid(format!(
                "There were {} markers(?) in CQL but {} bound variables",
                m.index + 1,
                self.values.len()
            ))),
        }
    }
}

fn constant_kind(c: &Constant) -> (&'static str, String) {
    match c {
        Constant::String(s) => ("STRING", s.clone()),
        Constant::Integer(s) => ("INTEGER", s.clone()),
        Constant::Float(s) => ("FLOAT", s.clone()),
        Constant::Boolean(b) => ("BOOLEAN", b.to_string()),
        Constant::Hex(_) => ("HEX", sibyl_cql::constant_text(c)),
        Constant::Uuid(s) => ("UUID", s.clone()),
        Constant::Duration(s) => ("DURATION", s.clone()),
    }
}

/// Whether a constant of this kind can be assigned to the type at all
/// (Cassandra's "Invalid X constant (v) for "c" of type t").
fn kind_fits(c: &Constant, t: &CqlType) -> bool {
    use CqlType::*;
    let t = t.unfrozen();
    match c {
        Constant::String(_) => {
            matches!(
                t,
                Ascii
                    | Text
                    | Timestamp
                    | Date
                    | Time
                    | Inet
                    | Custom(_)
                    | Blob
                    | Uuid
                    | Timeuuid
                    | Varint
                    | Decimal
                    | Bigint
                    | Int
                    | Smallint
                    | Tinyint
                    | Double
                    | Float
                    | Boolean
                    | Counter
            ) && !matches!(
                t,
                Blob | Uuid
                    | Timeuuid
                    | Varint
                    | Decimal
                    | Bigint
                    | Int
                    | Smallint
                    | Tinyint
                    | Double
                    | Float
                    | Boolean
                    | Counter
            )
        }
        Constant::Integer(_) => matches!(
            t,
            Bigint
                | Int
                | Smallint
                | Tinyint
                | Varint
                | Decimal
                | Double
                | Float
                | Counter
                | Timestamp
                | Date
                | Time
                | Duration
        ),
        Constant::Float(_) => matches!(t, Decimal | Double | Float),
        Constant::Boolean(_) => matches!(t, Boolean),
        Constant::Hex(_) => matches!(t, Blob | Custom(_)),
        Constant::Uuid(_) => matches!(t, Uuid | Timeuuid),
        Constant::Duration(_) => matches!(t, Duration),
    }
}

/// Converts a constant for a receiver named `receiver`.
pub fn constant_value(c: &Constant, t: &CqlType, receiver: &str) -> Result<Bytes> {
    let (kind, text) = constant_kind(c);
    if !kind_fits(c, t) {
        return Err(Error::Invalid(format!(
            "Invalid {kind} constant ({text}) for \"{receiver}\" of type {t}"
        )));
    }
    t.unfrozen().from_constant(c).map_err(|e| {
        let m = e.to_string();
        Error::Invalid(
            m.replace("for  of type", &format!("for \"{receiver}\" of type"))
                .replace("for of type", &format!("for \"{receiver}\" of type")),
        )
    })
}

/// Evaluation context: bound values and the receiver's name for messages.
pub struct Eval<'a> {
    pub bindings: &'a Bindings<'a>,
}

impl<'a> Eval<'a> {
    /// Evaluates `term` as a value of type `t` for the receiver `receiver`.
    pub fn value(&self, term: &Term, t: &CqlType, receiver: &str) -> Result<Val> {
        match term {
            Term::Null => Ok(Val::Null),
            Term::Bind(m) => {
                let v = self.bindings.get(m)?;
                if let Val::Set(b) = &v {
                    t.validate(b).map_err(|e| {
                        Error::Invalid(format!("Exception while binding column {receiver}: {e}"))
                    })?;
                }
                Ok(v)
            }
            Term::Constant(c) => Ok(Val::Set(constant_value(c, t, receiver)?)),
            Term::Negate(inner) => {
                let nt = self.resolve_negation(inner, Some(t))?;
                match self.value(inner, &nt, receiver)? {
                    Val::Set(b) if b.is_empty() => Ok(Val::Set(b)),
                    Val::Set(b) => {
                        crate::functions::negate(&nt, &b)
                            .map(Val::Set)
                            .ok_or_else(|| {
                                Error::Invalid(format!("Cannot negate a value of type {nt}"))
                            })
                    }
                    other => Ok(other),
                }
            }
            Term::Arith { op, lhs, rhs } => {
                let (lt, rt, _) = self.resolve_operation(*op, lhs, rhs, Some(t))?;
                let a = self.value(lhs, &lt, receiver)?;
                let b = self.value(rhs, &rt, receiver)?;
                Ok(
                    match crate::functions::arithmetic(*op, &lt, a.bytes(), &rt, b.bytes())? {
                        Some(v) => Val::Set(v),
                        None => Val::Null,
                    },
                )
            }
            // a single term between parentheses, not a tuple of one element
            Term::Tuple(items)
                if items.len() == 1 && !matches!(t.unfrozen(), CqlType::Tuple(_)) =>
            {
                self.value(&items[0], t, receiver)
            }
            // a list literal is for lists and vectors only (Cassandra's
            // `ArrayLiteral`), a set literal never for them
            Term::List(_) if !matches!(t.unfrozen(), CqlType::List(_) | CqlType::Vector(..)) => {
                Err(Error::Invalid(format!(
                    "Unexpected receiver type '{t}'; only list and vector are expected"
                )))
            }
            Term::Set(_) if matches!(t.unfrozen(), CqlType::List(_) | CqlType::Vector(..)) => Err(
                Error::Invalid(format!("Invalid set literal for {receiver} of type {t}")),
            ),
            Term::List(items) | Term::Set(items) => {
                // Cassandra's ArrayLiteral (lists and vectors) and Sets.Literal
                match (term, t.unfrozen()) {
                    (Term::List(_), CqlType::List(_) | CqlType::Vector(..))
                    | (Term::Set(_), CqlType::Set(_)) => {}
                    (Term::Set(_), CqlType::Map(..)) if items.is_empty() => {}
                    (Term::List(_), _) => {
                        return Err(Error::Invalid(format!(
                            "Unexpected receiver type '{t}'; only list and vector are expected"
                        )))
                    }
                    _ => {
                        return Err(Error::Invalid(format!(
                            "Invalid set literal for {receiver} of type {t}"
                        )))
                    }
                }
                let (elem_t, is_set) = match t.unfrozen() {
                    CqlType::List(e) if matches!(term, Term::List(_)) => {
                        (e.as_ref().clone(), false)
                    }
                    CqlType::Set(e) => (e.as_ref().clone(), true),
                    CqlType::Vector(e, n) => {
                        if items.len() != *n as usize {
                            return Err(Error::Invalid(format!(
                                "Invalid vector literal for {receiver} of type {t}; expected {n} elements, but given {}",
                                items.len()
                            )));
                        }
                        let mut out = Vec::new();
                        for it in items {
                            let v = self.value(it, e, receiver).map_err(|err| match it {
                                Term::Constant(c) => Error::Invalid(format!(
                                    "Invalid vector literal for {receiver}: value {} is not of type {e}",
                                    match c {
                                        sibyl_types::Constant::String(s) => format!("'{s}'"),
                                        c => sibyl_cql::constant_text(c),
                                    }
                                )),
                                _ => err,
                            })?;
                            match v {
                                // an empty value of a fixed-length type is a null
                                Val::Set(b)
                                    if !b.is_empty() || sibyl_types::fixed_len(e).is_none() =>
                                {
                                    out.push(b)
                                }
                                _ => {
                                    return Err(Error::Invalid(
                                        "null is not supported inside vectors".into(),
                                    ))
                                }
                            }
                        }
                        return Ok(Val::Set(sibyl_types::serialize_vector(e, &out)));
                    }
                    CqlType::Map(_, _) if items.is_empty() => {
                        return Ok(Val::Set(value::serialize_map(&[])))
                    }
                    _ => {
                        let what = if matches!(term, Term::List(_)) {
                            "list"
                        } else {
                            "set"
                        };
                        return Err(Error::Invalid(format!(
                            "Invalid {what} literal for {receiver} of type {t}"
                        )));
                    }
                };
                let mut out: Vec<Bytes> = Vec::with_capacity(items.len());
                let what = if is_set { "set" } else { "list" };
                for it in items {
                    match literal_element(
                        self.value(it, &elem_t, receiver),
                        it,
                        what,
                        "value",
                        receiver,
                        &elem_t,
                    )? {
                        Val::Set(b) => out.push(b),
                        Val::Null => {
                            return Err(Error::Invalid(
                                "null is not supported inside collections".into(),
                            ))
                        }
                        Val::Unset => {
                            return Err(Error::Invalid(
                                "unset value is not supported inside collections".into(),
                            ))
                        }
                    }
                }
                if is_set {
                    out.sort_by(|a, b| elem_t.compare(a, b));
                    out.dedup();
                }
                Ok(Val::Set(value::serialize_collection(&out)))
            }
            Term::Map(pairs) => {
                let (kt, vt) = match t.unfrozen() {
                    CqlType::Map(k, v) => (k.as_ref().clone(), v.as_ref().clone()),
                    CqlType::Set(_) if pairs.is_empty() => {
                        return Ok(Val::Set(value::serialize_collection(&[])))
                    }
                    CqlType::Udt(_) if pairs.is_empty() => {
                        return Ok(Val::Set(value::serialize_tuple(&[])))
                    }
                    // `{}` is an empty set literal (`Sets.Literal`)
                    _ if pairs.is_empty() => {
                        return Err(Error::Invalid(format!(
                            "Invalid set literal for {receiver} of type {t}"
                        )))
                    }
                    _ => {
                        let what = if pairs.is_empty() { "set" } else { "map" };
                        return Err(Error::Invalid(format!(
                            "Invalid {what} literal for {receiver} of type {t}"
                        )));
                    }
                };
                let mut out: Vec<(Bytes, Bytes)> = Vec::with_capacity(pairs.len());
                for (k, v) in pairs {
                    let kb = match literal_element(
                        self.value(k, &kt, receiver),
                        k,
                        "map",
                        "key",
                        receiver,
                        &kt,
                    )? {
                        Val::Set(b) => b,
                        _ => {
                            return Err(Error::Invalid(
                                "null is not supported inside collections".into(),
                            ))
                        }
                    };
                    let vb = match literal_element(
                        self.value(v, &vt, receiver),
                        v,
                        "map",
                        "value",
                        receiver,
                        &vt,
                    )? {
                        Val::Set(b) => b,
                        _ => {
                            return Err(Error::Invalid(
                                "null is not supported inside collections".into(),
                            ))
                        }
                    };
                    out.retain(|(ek, _)| kt.compare(ek, &kb) != std::cmp::Ordering::Equal);
                    out.push((kb, vb));
                }
                out.sort_by(|a, b| kt.compare(&a.0, &b.0));
                Ok(Val::Set(value::serialize_map(&out)))
            }
            Term::Tuple(items) => {
                let types = match t.unfrozen() {
                    CqlType::Tuple(ts) => ts.clone(),
                    _ => {
                        return Err(Error::Invalid(format!(
                            "Invalid tuple type literal for {receiver} of type {t}"
                        )))
                    }
                };
                if items.len() > types.len() {
                    return Err(Error::Invalid(format!(
                        "Invalid tuple literal for {receiver}: too many elements. Type {t} expects {} but got {}",
                        types.len(),
                        items.len()
                    )));
                }
                let mut out = Vec::new();
                for (i, (it, ty)) in items.iter().zip(types.iter()).enumerate() {
                    let v = self.value(it, ty, receiver).map_err(|e| match it {
                        Term::Constant(_) => Error::Invalid(format!("Invalid tuple literal for {receiver}: component {i} is not of type {ty}")),
                        _ => e,
                    })?;
                    out.push(v.bytes().cloned());
                }
                Ok(Val::Set(value::serialize_tuple(&out)))
            }
            Term::UserType(fields) => {
                let u = match t.unfrozen() {
                    CqlType::Udt(u) => u.clone(),
                    _ => {
                        return Err(Error::Invalid(format!(
                            "Invalid user type literal for {receiver} of type {t}"
                        )))
                    }
                };
                for (f, _) in fields {
                    if !u.fields.iter().any(|(n, _)| n == f) {
                        return Err(Error::Invalid(format!(
                            "Unknown field '{f}' in value of user defined type {}",
                            u.name
                        )));
                    }
                }
                let mut out = Vec::new();
                for (fname, ftype) in &u.fields {
                    match fields.iter().find(|(n, _)| n == fname) {
                        Some((_, term)) => {
                            let v = self.value(term, ftype, &format!("{receiver}.{fname}")).map_err(|e| match term {
                                Term::Constant(_) => Error::Invalid(format!("Invalid user type literal for {receiver}: field {fname} is not of type {ftype}")),
                                _ => e,
                            })?;
                            out.push(v.bytes().cloned())
                        }
                        None => out.push(None),
                    }
                }
                Ok(Val::Set(value::serialize_tuple(&out)))
            }
            Term::Function { name, args }
                if name.to_lowercase().trim_start_matches("system.") == "fromjson" =>
            {
                if args.len() != 1 {
                    return Err(Error::Invalid(
                        "Invalid number of arguments for function system.fromjson(text)".into(),
                    ));
                }
                let failure = |message: String| Error::FunctionFailure {
                    keyspace: "system".into(),
                    function: "fromjson".into(),
                    arg_types: vec!["text".into()],
                    message,
                };
                match self.value(&args[0], &CqlType::Text, receiver)? {
                    Val::Set(b) => {
                        let text = String::from_utf8_lossy(&b).into_owned();
                        let j = sibyl_types::json::Json::parse(&text)
                            .map_err(|e| failure(format!("execution of 'system.fromjson[text]' failed: Could not decode JSON string '{text}': {e}")))?;
                        if j == sibyl_types::json::Json::Null {
                            return Ok(Val::Null);
                        }
                        let v = t.from_json(&j).map_err(|e| {
                            failure(format!(
                                "org.apache.cassandra.serializers.MarshalException: {e}"
                            ))
                        })?;
                        if t.validate(&v).is_err() {
                            // `""` makes an empty value that some types refuse
                            let hex: String = v.iter().map(|x| format!("{x:02x}")).collect();
                            return Err(Error::Server(format!(
                                "java.lang.RuntimeException: Return of function system.fromjson : (text) -> {t} ({hex}) is not a valid value for its declared return type {t}"
                            )));
                        }
                        Ok(Val::Set(v))
                    }
                    other => Ok(if other == Val::Unset {
                        Val::Unset
                    } else {
                        Val::Null
                    }),
                }
            }
            Term::Function { name, args } if cast_target(name).is_some() => {
                Ok(self.cast_call(name, args, Some(t))?.1)
            }
            Term::Function { name, args } => {
                let (rt, v) = self.call(name, args)?;
                if !compatible(&rt, t) {
                    return Err(Error::Invalid(format!(
                        "Type error: cannot assign result of function system.{} (type {rt}) to {receiver} (type {t})",
                        name.to_lowercase()
                    )));
                }
                Ok(v)
            }
            Term::Cast { typ, term } => {
                let ct =
                    CqlType::parse(typ, &|_| None).map_err(|e| Error::Invalid(e.to_string()))?;
                self.value(term, &ct, receiver)
            }
        }
    }

    /// How well `term` fits a receiver of type `t` (Cassandra's `testAssignment`).
    pub fn fit(&self, term: &Term, t: &CqlType) -> Fit {
        use crate::operations::{literal_fit, null_fit, type_fit};
        match term {
            Term::Constant(c) => literal_fit(c, t),
            Term::Null => null_fit(t),
            Term::Bind(_) => Fit::Weak,
            // FunctionCall.Raw.testAssignment: the function resolved for the
            // receiver, weakly assignable when it cannot be
            Term::Function { name, args } => remembered_fit(term, t, || {
                let resolved = match cast_target(name) {
                    Some(_) => self.cast_call(name, args, Some(t)),
                    None => self.call(name, args),
                };
                match resolved {
                    Ok((rt, _)) if rt == *t => Fit::Exact,
                    Ok((rt, _)) if !crate::operations::value_compatible(t, &rt) => Fit::No,
                    _ => Fit::Weak,
                }
            }),
            Term::Cast { typ, .. } => match CqlType::parse(typ, &|_| None) {
                Ok(ct) => type_fit(&ct, t),
                Err(_) => Fit::No,
            },
            Term::Arith { .. } | Term::Negate(_) => remembered_fit(term, t, || match term {
                Term::Arith { op, lhs, rhs } => {
                    match self.resolve_operation(*op, lhs, rhs, Some(t)) {
                        Ok((_, _, rt)) => type_fit(&rt, t),
                        Err(_) => Fit::Weak,
                    }
                }
                Term::Negate(x) => match self.resolve_negation(x, Some(t)) {
                    Ok(nt) => type_fit(&nt, t),
                    Err(_) => Fit::Weak,
                },
                _ => Fit::Weak,
            }),
            Term::Tuple(items)
                if items.len() == 1 && !matches!(t.unfrozen(), CqlType::Tuple(_)) =>
            {
                self.fit(&items[0], t)
            }
            Term::List(_) | Term::Set(_) | Term::Map(_) | Term::Tuple(_) | Term::UserType(_) => {
                let kind_matches = matches!(
                    (term, t.unfrozen()),
                    (Term::List(_), CqlType::List(_) | CqlType::Vector(..))
                        | (Term::Set(_), CqlType::Set(_))
                        | (
                            Term::Map(_),
                            CqlType::Map(..) | CqlType::Set(_) | CqlType::Udt(_)
                        )
                        | (Term::Tuple(_), CqlType::Tuple(_))
                        | (Term::UserType(_), CqlType::Udt(_))
                );
                if kind_matches {
                    Fit::Weak
                } else {
                    Fit::No
                }
            }
        }
    }

    /// The signature of `lhs op rhs` assigned to a receiver of type `receiver`.
    pub fn resolve_operation(
        &self,
        op: char,
        lhs: &Term,
        rhs: &Term,
        receiver: Option<&CqlType>,
    ) -> Result<(CqlType, CqlType, CqlType)> {
        let names = (sibyl_cql::term_text(lhs), sibyl_cql::term_text(rhs));
        let markers = matches!(lhs, Term::Bind(_)) || matches!(rhs, Term::Bind(_));
        crate::operations::resolve_operation(
            op,
            &mut |i, ty| Ok(self.fit(if i == 0 { lhs } else { rhs }, ty)),
            receiver,
            (&names.0, &names.1),
            markers,
        )
    }

    /// The type `-x` negates in, assigned to a receiver of type `receiver`.
    pub fn resolve_negation(&self, x: &Term, receiver: Option<&CqlType>) -> Result<CqlType> {
        crate::operations::resolve_numeric(
            &mut |ty| Ok(self.fit(x, ty)),
            receiver,
            "\"_negate\"",
            "system._negate",
        )
    }

    /// Evaluates a function call, returning its result type and value.
    pub fn call(&self, name: &str, args: &[Term]) -> Result<(CqlType, Val)> {
        if cast_target(name).is_some() {
            return self.cast_call(name, args, None);
        }
        let written = name.to_lowercase();
        let written = written.strip_prefix("system.").unwrap_or(&written);
        let canonical = crate::functions::canonical_name(written);
        self.call_canonical(&canonical, args)
            .map_err(|e| crate::functions::as_written(e, &canonical, written))
    }

    /// A call of `system.cast_as_<to>` (what `CAST(x AS to)` is in a term):
    /// the argument's type is picked among the function's signatures as
    /// Cassandra's `FunctionResolver` does, skipping them all when the
    /// result does not fit the receiver.
    fn cast_call(
        &self,
        written: &str,
        args: &[Term],
        receiver: Option<&CqlType>,
    ) -> Result<(CqlType, Val)> {
        let to_name = cast_target(written).unwrap_or_default();
        let written = written.to_lowercase();
        let Some((to, sources)) = crate::functions::cast_function(&to_name) else {
            return Err(unknown_function(&written));
        };
        let signatures = |of: &[CqlType]| {
            crate::functions::signature_list(&format!("cast_as_{to_name}"), of, &to)
        };
        let fits_receiver = args.len() == 1
            && receiver.is_none_or(|r| crate::operations::type_fit(&to, r).assignable());
        let mut exact = None;
        let mut compatibles = Vec::new();
        for s in sources.iter().filter(|_| fits_receiver) {
            match self.fit(&args[0], s) {
                Fit::Exact => {
                    exact = Some(s.clone());
                    break;
                }
                Fit::Weak => compatibles.push(s.clone()),
                Fit::No => {}
            }
        }
        let from = match (exact, compatibles.len()) {
            (Some(s), _) => s,
            (None, 1) => compatibles.remove(0),
            (None, 0) => {
                return Err(Error::Invalid(format!(
                    "Invalid call to function {written}, none of its type signatures match (known type signatures: {})",
                    signatures(&sources)
                )))
            }
            // Cassandra lists them in its hash set's order, which changes
            // from one start to the next
            (None, _) => {
                return Err(Error::Invalid(format!(
                    "Ambiguous call to function {written} (can be matched by following signatures: {}): use type casts to disambiguate",
                    signatures(&compatibles)
                )))
            }
        };
        let v = match self.value(&args[0], &from, &format!("arg0(system.cast_as_{to_name})"))? {
            Val::Set(b) => Val::Set(crate::functions::cast(&from, &to, &b)?),
            other => other,
        };
        Ok((to, v))
    }

    /// `call` of a function by its old name.
    fn call_canonical(&self, lname: &str, args: &[Term]) -> Result<(CqlType, Val)> {
        let lname = lname.to_string();
        let now_millis = || sibyl_types::timeuuid::timestamp_micros_now() / 1000;
        let arity = |n: usize| -> Result<()> {
            if args.len() != n {
                Err(Error::Invalid(format!("Invalid number of arguments in call to function system.{lname}: {n} required but {} provided", args.len())))
            } else {
                Ok(())
            }
        };
        match lname.as_str() {
            "now" | "currenttimeuuid" => {
                arity(0)?;
                Ok((
                    CqlType::Timeuuid,
                    Val::Set(Bytes::copy_from_slice(
                        sibyl_types::timeuuid::now_timeuuid().as_bytes(),
                    )),
                ))
            }
            "uuid" => {
                arity(0)?;
                Ok((
                    CqlType::Uuid,
                    Val::Set(Bytes::copy_from_slice(uuid::Uuid::new_v4().as_bytes())),
                ))
            }
            "currenttimestamp" => {
                arity(0)?;
                Ok((
                    CqlType::Timestamp,
                    Val::Set(Bytes::copy_from_slice(&now_millis().to_be_bytes())),
                ))
            }
            "currentdate" => {
                arity(0)?;
                let days = now_millis().div_euclid(86_400_000) + (1i64 << 31);
                Ok((
                    CqlType::Date,
                    Val::Set(Bytes::copy_from_slice(&(days as u32).to_be_bytes())),
                ))
            }
            "currenttime" => {
                arity(0)?;
                let nanos = now_millis().rem_euclid(86_400_000) * 1_000_000;
                Ok((
                    CqlType::Time,
                    Val::Set(Bytes::copy_from_slice(&nanos.to_be_bytes())),
                ))
            }
            "totimestamp" | "tounixtimestamp" | "todate" => {
                arity(1)?;
                let (at, av) = self.untyped(
                    &args[0],
                    &[CqlType::Timeuuid, CqlType::Timestamp, CqlType::Date],
                )?;
                let Val::Set(b) = av else {
                    return Ok((result_type(&lname), Val::Null));
                };
                let millis = match at {
                    CqlType::Timeuuid => {
                        let a: [u8; 16] = b
                            .as_ref()
                            .try_into()
                            .map_err(|_| Error::Invalid("invalid timeuuid".into()))?;
                        sibyl_types::timeuuid::timeuuid_timestamp_millis(&a)
                    }
                    CqlType::Timestamp => i64::from_be_bytes(
                        b.as_ref()
                            .try_into()
                            .map_err(|_| Error::Invalid("invalid timestamp".into()))?,
                    ),
                    CqlType::Date => {
                        let d = u32::from_be_bytes(
                            b.as_ref()
                                .try_into()
                                .map_err(|_| Error::Invalid("invalid date".into()))?,
                        );
                        (d as i64 - (1i64 << 31)) * 86_400_000
                    }
                    _ => return Err(Error::Invalid(format!("Invalid argument to {lname}"))),
                };
                let rt = result_type(&lname);
                let out = match lname.as_str() {
                    "totimestamp" => Bytes::copy_from_slice(&millis.to_be_bytes()),
                    "tounixtimestamp" => Bytes::copy_from_slice(&millis.to_be_bytes()),
                    _ => Bytes::copy_from_slice(
                        &((millis.div_euclid(86_400_000) + (1i64 << 31)) as u32).to_be_bytes(),
                    ),
                };
                Ok((rt, Val::Set(out)))
            }
            "token" => {
                let Some(types) = TOKEN_TYPES.with(|t| t.borrow().clone()) else {
                    return Err(unknown_function(&lname));
                };
                arity(types.len())?;
                let mut parts = Vec::with_capacity(types.len());
                for (i, (a, t)) in args.iter().zip(&types).enumerate() {
                    let v = self.value(a, t, "token").map_err(|_| {
                        Error::Invalid(format!(
                            "Type error: {} cannot be passed as argument {i} of function system.token of type {t}",
                            sibyl_cql::term_text(a)
                        ))
                    })?;
                    match v {
                        Val::Set(b) => parts.push(b),
                        _ => return Ok((CqlType::Bigint, Val::Null)),
                    }
                }
                let key = sibyl_db::cells::make_partition_key(&parts);
                let tok = sibyl_types::murmur3::token(&key);
                Ok((
                    CqlType::Bigint,
                    Val::Set(Bytes::copy_from_slice(&tok.to_be_bytes())),
                ))
            }
            "mintimeuuid" | "maxtimeuuid" => {
                arity(1)?;
                let v = self.value(&args[0], &CqlType::Timestamp, "arg0")?;
                let Val::Set(b) = v else {
                    return Ok((CqlType::Timeuuid, Val::Null));
                };
                let millis = i64::from_be_bytes(
                    b.as_ref()
                        .try_into()
                        .map_err(|_| Error::Invalid("invalid timestamp".into()))?,
                );
                let u = if lname == "mintimeuuid" {
                    sibyl_types::timeuuid::min_timeuuid(millis)
                } else {
                    sibyl_types::timeuuid::max_timeuuid(millis)
                };
                Ok((
                    CqlType::Timeuuid,
                    Val::Set(Bytes::copy_from_slice(u.as_bytes())),
                ))
            }
            _ => {
                // typeAsBlob / blobAsType (BytesConversionFcts: none for blob)
                if lname == "blobasblob" {
                    return Err(unknown_function(&lname));
                }
                if let Some(tname) = lname.strip_suffix("asblob") {
                    arity(1)?;
                    let t =
                        CqlType::parse(tname, &|_| None).map_err(|_| unknown_function(&lname))?;
                    let v = self.value(&args[0], &t, "arg0")?;
                    return Ok((CqlType::Blob, v));
                }
                if let Some(tname) = lname.strip_prefix("blobas") {
                    arity(1)?;
                    let t =
                        CqlType::parse(tname, &|_| None).map_err(|_| unknown_function(&lname))?;
                    let v = self.value(&args[0], &CqlType::Blob, "arg0")?;
                    if let Val::Set(b) = &v {
                        t.validate(b).map_err(|_| invalid_blob_as(tname, b))?;
                    }
                    return Ok((t, v));
                }
                Err(unknown_function(&lname))
            }
        }
    }

    /// Evaluates a term whose type is not given by a receiver: functions give
    /// their own type; other terms take the first of `candidates`.
    fn untyped(&self, term: &Term, candidates: &[CqlType]) -> Result<(CqlType, Val)> {
        match term {
            Term::Function { name, args } => self.call(name, args),
            Term::Constant(Constant::Uuid(_)) if candidates.contains(&CqlType::Timeuuid) => Ok((
                CqlType::Timeuuid,
                self.value(term, &CqlType::Timeuuid, "arg0")?,
            )),
            _ => {
                let t = candidates.first().cloned().unwrap_or(CqlType::Blob);
                Ok((t.clone(), self.value(term, &t, "arg0")?))
            }
        }
    }
}

/// Cassandra's error for a constant inside a collection literal that does not fit
/// the element type: "Invalid map literal for m: value 'b' is not of type int".
fn literal_element(
    r: Result<Val>,
    term: &Term,
    what: &str,
    part: &str,
    receiver: &str,
    t: &CqlType,
) -> Result<Val> {
    match (r, term) {
        (Err(_), Term::Constant(c)) => {
            let lit = match c {
                Constant::String(s) => format!("'{s}'"),
                other => sibyl_cql::constant_text(other),
            };
            Err(Error::Invalid(format!(
                "Invalid {what} literal for {receiver}: {part} {lit} is not of type {t}"
            )))
        }
        (r, _) => r,
    }
}

thread_local! {
    /// The partition key types `token(...)` takes while a token relation's
    /// value is evaluated (see [`with_token_types`]).
    static TOKEN_TYPES: std::cell::RefCell<Option<Vec<CqlType>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `token(...)` callable in terms, its arguments typed as
/// `types` (a table's partition key): `token(k) > token(1) + 10`.
pub fn with_token_types<R>(types: Vec<CqlType>, f: impl FnOnce() -> R) -> R {
    let before = TOKEN_TYPES.with(|t| t.replace(Some(types)));
    let r = f();
    TOKEN_TYPES.with(|t| *t.borrow_mut() = before);
    r
}

thread_local! {
    /// How operations fit receiver types, by the operation's text and the
    /// type: resolving `((a + b) + c) ...` asks each operand's fit for every
    /// candidate type, at every level, which without a memo costs time
    /// exponential in the nesting. The fit depends only on the text.
    static FITS: std::cell::RefCell<std::collections::HashMap<(String, String), Fit>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

fn remembered_fit(term: &Term, t: &CqlType, fit: impl FnOnce() -> Fit) -> Fit {
    let key = (sibyl_cql::term_text(term), t.to_string());
    if let Some(f) = FITS.with(|m| m.borrow().get(&key).copied()) {
        return f;
    }
    let f = fit();
    FITS.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() > 10_000 {
            m.clear();
        }
        m.insert(key, f);
    });
    f
}

/// The type `name` casts to when it is one of the `system.cast_as_<type>`
/// functions (it allocates only then: every function call asks).
pub(crate) fn cast_target(name: &str) -> Option<String> {
    let strip = |s: &'_ str, prefix: &str| -> Option<usize> {
        s.get(..prefix.len())
            .filter(|p| p.eq_ignore_ascii_case(prefix))
            .map(|_| prefix.len())
    };
    let rest = &name[strip(name, "system.").unwrap_or(0)..];
    let to = &rest[strip(rest, "cast_as_")?..];
    Some(to.to_lowercase())
}

/// `FunctionCall.Raw.prepare`'s error for a function no keyspace has
/// (the name as written, identifiers case-folded).
fn unknown_function(name: &str) -> Error {
    Error::Invalid(format!("Unknown function {} called", name.to_lowercase()))
}

/// `BytesConversionFcts.makeFromBlobFunction`'s error for bytes that are
/// not a value of the type (named as the function names it).
pub fn invalid_blob_as(tname: &str, b: &[u8]) -> Error {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Error::Invalid(format!(
        "In call to function system.blobas{tname}, value 0x{hex} is not a valid binary representation for type {tname}"
    ))
}

fn result_type(f: &str) -> CqlType {
    match f {
        "totimestamp" => CqlType::Timestamp,
        "tounixtimestamp" => CqlType::Bigint,
        _ => CqlType::Date,
    }
}

/// Whether a value of type `from` can be stored in a receiver of type `to`.
fn compatible(from: &CqlType, to: &CqlType) -> bool {
    let (f, t) = (from.unfrozen(), to.unfrozen());
    f == t
        || matches!(
            (f, t),
            (CqlType::Timeuuid, CqlType::Uuid) | (CqlType::Ascii, CqlType::Text)
        )
}
