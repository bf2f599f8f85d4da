//! Value deserialisers and JSON: every type's validate, comparison, CQL
//! literal and JSON rendering over arbitrary bytes, and the JSON parser with
//! `fromJson` over arbitrary text, must return an error, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sibyl_types::json::Json;
use sibyl_types::CqlType;

fn types() -> Vec<CqlType> {
    let none = |_: &str| None;
    [
        "ascii", "bigint", "blob", "boolean", "counter", "date", "decimal", "double", "duration",
        "float", "inet", "int", "smallint", "text", "time", "timestamp", "timeuuid", "tinyint",
        "uuid", "varint", "list<int>", "set<text>", "map<text, bigint>", "tuple<int, text>",
        "frozen<list<frozen<map<int, frozen<set<text>>>>>>", "vector<float, 3>",
        "tuple<int, tuple<text, list<double>>>",
    ]
    .iter()
    .filter_map(|t| CqlType::parse(t, &none).ok())
    .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let ts = types();
    let t = &ts[which as usize % ts.len()];
    if t.validate(rest).is_ok() {
        let _ = t.to_cql_literal(rest);
        let _ = t.to_json(rest);
        let _ = t.to_text(rest);
    }
    let (a, b) = rest.split_at(rest.len() / 2);
    if t.validate(a).is_ok() && t.validate(b).is_ok() {
        let _ = t.compare(a, b);
    }
    let _ = sibyl_types::value::deserialize_collection(rest);
    let _ = sibyl_types::value::deserialize_map(rest);
    let _ = sibyl_types::value::deserialize_tuple(rest);
    let _ = sibyl_types::value::read_unsigned_vint(rest);
    let _ = sibyl_types::value::read_signed_vint(rest);
    if let Ok(text) = std::str::from_utf8(rest) {
        if let Ok(j) = Json::parse(text) {
            let _ = t.from_json(&j);
        }
        let _ = CqlType::parse(text, &|_| None);
        let _ = sibyl_types::from_marshal_class(text);
    }
});
