//! Round trips, exact-byte fixtures and malformed-input checks for the codec.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sibyl_protocol::segment::{self, FrameReassembler, SegmentDecoder, MAX_PAYLOAD};
use sibyl_protocol::*;
use sibyl_types::{CqlType, UserType};

const VERSIONS: [u8; 3] = [3, 4, 5];

fn b(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}

fn col(name: &str, typ: CqlType) -> ColumnSpec {
    ColumnSpec {
        keyspace: "ks".into(),
        table: "t".into(),
        name: name.into(),
        typ,
    }
}

// ------------------------------------------------------------ headers

#[test]
fn options_request_frame_exact_bytes() {
    let mut out = Vec::new();
    encode_request_frame(4, 1, &Request::Options, None, &mut out);
    assert_eq!(out, [0x04, 0x00, 0x00, 0x01, 0x05, 0, 0, 0, 0]);
    let h = FrameHeader::parse(&out).unwrap().unwrap();
    assert_eq!(
        h,
        FrameHeader {
            version: 4,
            is_response: false,
            flags: 0,
            stream: 1,
            opcode: 5,
            length: 0
        }
    );
    let env = decode_request_frame(&h, &Bytes::copy_from_slice(&out[HEADER_LEN..]), None).unwrap();
    assert_eq!(env.request, Request::Options);
}

#[test]
fn ready_response_frame_exact_bytes() {
    let mut out = Vec::new();
    encode_response_frame(4, 1, &Response::Ready, None, &[], None, &mut out);
    assert_eq!(out, [0x84, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0]);
    let mut out5 = Vec::new();
    encode_response_frame(5, -1, &Response::Ready, None, &[], None, &mut out5);
    assert_eq!(out5, [0x85, 0x00, 0xFF, 0xFF, 0x02, 0, 0, 0, 0]);
}

#[test]
fn protocol_error_frame_exact_bytes() {
    let err = ProtocolError::UnsupportedVersion(6);
    let resp = Response::Error(ErrorResponse::from(&err));
    let mut out = Vec::new();
    encode_response_frame(4, 0x0102, &resp, None, &[], None, &mut out);
    let msg =
        b"Invalid or unsupported protocol version (6); supported versions are (3/v3, 4/v4, 5/v5)";
    let mut expected = vec![0x84, 0x00, 0x01, 0x02, 0x00];
    expected.extend_from_slice(&((4 + 2 + msg.len()) as u32).to_be_bytes());
    expected.extend_from_slice(&[0, 0, 0, 0x0A]);
    expected.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    expected.extend_from_slice(msg);
    assert_eq!(out, expected);
}

#[test]
fn startup_request_exact_bytes() {
    let mut m = HashMap::new();
    m.insert("CQL_VERSION".to_string(), "3.0.0".to_string());
    let mut out = Vec::new();
    encode_request_frame(
        4,
        0,
        &Request::Startup(m.clone()),
        Some(Compression::Lz4),
        &mut out,
    );
    let mut expected = vec![0x04, 0, 0, 0, 0x01, 0, 0, 0, 22, 0, 1, 0, 11];
    expected.extend_from_slice(b"CQL_VERSION");
    expected.extend_from_slice(&[0, 5]);
    expected.extend_from_slice(b"3.0.0");
    // STARTUP is never compressed.
    assert_eq!(out, expected);
    assert_eq!(
        Request::decode(4, 1, &out[9..]).unwrap(),
        Request::Startup(m)
    );
}

#[test]
fn query_request_exact_bytes_v4_and_v5() {
    let body4: &[u8] = &[
        0, 0, 0, 8, b'S', b'E', b'L', b'E', b'C', b'T', b' ', b'1', 0, 1, 0,
    ];
    let r = Request::decode(4, 7, body4).unwrap();
    let Request::Query { query, params } = &r else {
        panic!("not a query")
    };
    assert_eq!(query, "SELECT 1");
    assert_eq!(params, &QueryParameters::default());
    let mut enc = Vec::new();
    r.encode(4, &mut enc);
    assert_eq!(enc, body4);
    // v5: flags are an int
    let mut enc5 = Vec::new();
    r.encode(5, &mut enc5);
    let body5: &[u8] = &[
        0, 0, 0, 8, b'S', b'E', b'L', b'E', b'C', b'T', b' ', b'1', 0, 1, 0, 0, 0, 0,
    ];
    assert_eq!(enc5, body5);
}

#[test]
fn unsupported_versions_are_rejected() {
    for v in [0u8, 1, 2, 6, 7, 0x7F] {
        for first in [v, v | 0x80] {
            let buf = [first, 0, 0, 1, 5, 0, 0, 0, 0];
            assert_eq!(
                FrameHeader::parse(&buf),
                Err(ProtocolError::UnsupportedVersion(v))
            );
            // checked on the first byte, before a whole header arrived (v1/v2 headers are 8 bytes)
            assert_eq!(
                FrameHeader::parse(&buf[..3]),
                Err(ProtocolError::UnsupportedVersion(v))
            );
        }
    }
    assert_eq!(
        ProtocolError::UnsupportedVersion(2).to_string(),
        "Invalid or unsupported protocol version (2); supported versions are (3/v3, 4/v4, 5/v5)"
    );
    for v in VERSIONS {
        assert!(FrameHeader::parse(&[v, 0, 0, 1, 5, 0, 0, 0, 0])
            .unwrap()
            .is_some());
        assert_eq!(FrameHeader::parse(&[v, 0, 0, 1]).unwrap(), None);
    }
    assert_eq!(FrameHeader::parse(&[]).unwrap(), None);
}

#[test]
fn header_round_trip_and_length_check() {
    let h = FrameHeader {
        version: 5,
        is_response: true,
        flags: 0x0F,
        stream: -2,
        opcode: 8,
        length: 0xDEAD_BEEF,
    };
    let mut out = Vec::new();
    h.encode(&mut out);
    assert_eq!(out.len(), HEADER_LEN);
    assert_eq!(FrameHeader::parse(&out).unwrap(), Some(h));
    let e = h.check_length(256 * 1024 * 1024).unwrap_err();
    assert!(matches!(e, ProtocolError::FrameTooLarge { .. }));
    assert!(e.to_string().starts_with("Request is too big: length"));
    assert_eq!(ErrorResponse::from(&e).code(), 0x2200);
}

#[test]
fn unknown_and_response_opcodes_are_errors() {
    assert_eq!(
        Request::decode(4, 0x04, &[]),
        Err(ProtocolError::UnknownOpcode(4))
    );
    assert_eq!(
        Request::decode(4, 0x42, &[]),
        Err(ProtocolError::UnknownOpcode(0x42))
    );
    assert!(matches!(
        Request::decode(4, 0x02, &[]),
        Err(ProtocolError::Malformed(_))
    ));
    assert!(matches!(
        Response::decode(4, 0x07, &[]),
        Err(ProtocolError::Malformed(_))
    ));
}

// ------------------------------------------------------------ consistency

#[test]
fn consistency_names_and_codes() {
    assert_eq!(Consistency::LocalQuorum.to_string(), "LOCAL_QUORUM");
    assert_eq!(Consistency::One.to_string(), "ONE");
    assert_eq!(Consistency::try_from(10).unwrap(), Consistency::LocalOne);
    assert!(Consistency::try_from(11).is_err());
    assert_eq!(
        "local_serial".parse::<Consistency>().unwrap(),
        Consistency::LocalSerial
    );
    for c in Consistency::ALL {
        assert_eq!(Consistency::try_from(c as u16).unwrap(), c);
    }
}

// ------------------------------------------------------------ requests

fn sample_params(version: u8) -> QueryParameters {
    QueryParameters {
        consistency: Consistency::LocalQuorum,
        values: Values::Positional(vec![
            Value::Set(b(b"\x00\x00\x00\x01")),
            Value::Null,
            if version >= 4 {
                Value::Unset
            } else {
                Value::Null
            },
            Value::Set(Bytes::new()),
        ]),
        skip_metadata: true,
        page_size: Some(5000),
        paging_state: Some(b(b"page")),
        serial_consistency: Some(Consistency::LocalSerial),
        timestamp: Some(1_700_000_000_000_000),
        keyspace: (version >= 5).then(|| "ks".to_string()),
        now_in_seconds: (version >= 5).then_some(1_700_000_000),
    }
}

fn sample_requests(version: u8) -> Vec<Request> {
    let mut startup = HashMap::new();
    startup.insert("CQL_VERSION".into(), "3.0.0".into());
    startup.insert("COMPRESSION".into(), "lz4".into());
    let named = QueryParameters {
        values: Values::Named(vec![
            ("a".into(), Value::Set(b(b"x"))),
            ("b".into(), Value::Null),
        ]),
        ..QueryParameters::default()
    };
    vec![
        Request::Startup(startup),
        Request::Options,
        Request::Query {
            query: "SELECT * FROM ks.t WHERE k = ?".into(),
            params: sample_params(version),
        },
        Request::Query {
            query: "SELECT * FROM t WHERE a = :a".into(),
            params: named.clone(),
        },
        Request::Query {
            query: "ünïcode".into(),
            params: QueryParameters::default(),
        },
        Request::Prepare {
            query: "SELECT * FROM t".into(),
            keyspace: (version >= 5).then(|| "ks".into()),
        },
        Request::Prepare {
            query: "SELECT * FROM t".into(),
            keyspace: None,
        },
        Request::Execute {
            id: b(&[1, 2, 3, 4]),
            result_metadata_id: (version >= 5).then(|| b(&[9, 9])),
            params: sample_params(version),
        },
        Request::Execute {
            id: b(&[1]),
            result_metadata_id: (version >= 5).then(Bytes::new),
            params: named,
        },
        Request::Batch(Batch {
            batch_type: 1,
            statements: vec![
                BatchStatement {
                    kind: BatchQueryKind::Query("INSERT INTO t (k) VALUES (?)".into()),
                    values: vec![Value::Set(b(b"k1"))],
                },
                BatchStatement {
                    kind: BatchQueryKind::Prepared(b(&[7; 16])),
                    values: vec![Value::Null],
                },
            ],
            consistency: Consistency::Quorum,
            serial_consistency: Some(Consistency::Serial),
            timestamp: Some(42),
            keyspace: (version >= 5).then(|| "ks".into()),
            now_in_seconds: (version >= 5).then_some(7),
        }),
        Request::Batch(Batch {
            batch_type: 2,
            statements: vec![],
            consistency: Consistency::One,
            serial_consistency: None,
            timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        }),
        Request::Register(vec![
            "TOPOLOGY_CHANGE".into(),
            "STATUS_CHANGE".into(),
            "SCHEMA_CHANGE".into(),
        ]),
        Request::AuthResponse(Some(b(b"\0cassandra\0cassandra"))),
        Request::AuthResponse(None),
    ]
}

#[test]
fn every_request_round_trips_in_every_version() {
    for v in VERSIONS {
        for req in sample_requests(v) {
            let mut body = Vec::new();
            req.encode(v, &mut body);
            assert_eq!(
                Request::decode(v, req.opcode(), &body).unwrap(),
                req,
                "v{v} {req:?}"
            );
            assert_eq!(
                Request::decode_bytes(v, req.opcode(), &Bytes::from(body)).unwrap(),
                req
            );
        }
    }
}

#[test]
fn request_frames_round_trip_with_compression_and_custom_payload() {
    for v in [3u8, 4] {
        for c in [Compression::Lz4, Compression::Snappy] {
            for req in sample_requests(v) {
                let mut frame = Vec::new();
                encode_request_frame(v, 3, &req, Some(c), &mut frame);
                let h = FrameHeader::parse(&frame).unwrap().unwrap();
                assert_eq!(h.frame_len(), frame.len());
                let compressed = !matches!(req, Request::Startup(_) | Request::Options);
                assert_eq!(h.has_flag(flags::COMPRESSION), compressed);
                let env = decode_request_frame(
                    &h,
                    &Bytes::copy_from_slice(&frame[HEADER_LEN..]),
                    Some(c),
                )
                .unwrap();
                assert_eq!(env.request, req);
            }
        }
    }
    // custom payload prefix (v4+)
    let mut body = Vec::new();
    wire::put_u16(&mut body, 1);
    wire::put_string(&mut body, "key");
    wire::put_bytes(&mut body, Some(b"val"));
    Request::Options.encode(4, &mut body);
    let h = FrameHeader {
        version: 4,
        is_response: false,
        flags: flags::CUSTOM_PAYLOAD | flags::TRACING,
        stream: 0,
        opcode: 5,
        length: body.len() as u32,
    };
    let env = decode_request_frame(&h, &Bytes::from(body.clone()), None).unwrap();
    assert!(env.tracing);
    assert_eq!(
        env.custom_payload.unwrap().get("key").unwrap().as_deref(),
        Some(&b"val"[..])
    );
    // COMPRESSION flag without negotiated compression
    let h = FrameHeader {
        flags: flags::COMPRESSION,
        ..h
    };
    assert!(matches!(
        decode_request_frame(&h, &Bytes::from(body.clone()), None),
        Err(ProtocolError::Malformed(_))
    ));
}

#[test]
fn v4_query_flags_are_a_byte_and_v5_an_int() {
    let params = QueryParameters {
        page_size: Some(100),
        ..QueryParameters::default()
    };
    let mut b4 = Vec::new();
    params.encode(4, &mut b4);
    assert_eq!(b4, [0, 1, 0x04, 0, 0, 0, 100]);
    let mut b5 = Vec::new();
    params.encode(5, &mut b5);
    assert_eq!(b5, [0, 1, 0, 0, 0, 0x04, 0, 0, 0, 100]);
}

#[test]
fn v3_negative_value_lengths_are_null_and_v4_rejects_unknown() {
    // consistency ONE, flags VALUES, 1 value of length -2
    let mut body = Vec::new();
    wire::put_long_string(&mut body, "q");
    body.extend_from_slice(&[0, 1, 0x01, 0, 1, 0xFF, 0xFF, 0xFF, 0xFE]);
    let v3 = Request::decode(3, 7, &body).unwrap();
    let v4 = Request::decode(4, 7, &body).unwrap();
    let vals = |r: &Request| match r {
        Request::Query { params, .. } => params.values.clone(),
        _ => panic!(),
    };
    assert_eq!(vals(&v3), Values::Positional(vec![Value::Null]));
    assert_eq!(vals(&v4), Values::Positional(vec![Value::Unset]));
    let last = body.len() - 1;
    body[last] = 0xF0;
    assert!(matches!(
        Request::decode(4, 7, &body),
        Err(ProtocolError::Malformed(_))
    ));
}

#[test]
fn invalid_utf8_query_is_malformed() {
    let body = [0, 0, 0, 2, 0xC3, 0x28, 0, 1, 0];
    assert!(matches!(
        Request::decode(4, 7, &body),
        Err(ProtocolError::Malformed(_))
    ));
    assert!(matches!(
        Request::decode(4, 9, &body[..6]),
        Err(ProtocolError::Malformed(_))
    ));
}

#[test]
fn bad_batch_kind_and_consistency_are_malformed() {
    let mut body = vec![0, 0, 1, 5];
    assert!(matches!(
        Request::decode(4, 0x0D, &body),
        Err(ProtocolError::Malformed(_))
    ));
    body = vec![0, 0, 0, 0, 99, 0];
    let e = Request::decode(4, 0x0D, &body).unwrap_err();
    assert_eq!(e.to_string(), "Unknown code 99 for a consistency level");
}

#[test]
fn truncated_requests_are_malformed_not_panics() {
    for v in VERSIONS {
        for req in sample_requests(v) {
            let mut body = Vec::new();
            req.encode(v, &mut body);
            for cut in 0..body.len() {
                let r = Request::decode(v, req.opcode(), &body[..cut]);
                assert!(
                    matches!(r, Err(ProtocolError::Malformed(_))),
                    "v{v} cut {cut} of {req:?}: {r:?}"
                );
            }
        }
    }
}

// ------------------------------------------------------------ types

fn all_types() -> Vec<CqlType> {
    use CqlType::*;
    let udt = Udt(Arc::new(UserType {
        keyspace: "ks".into(),
        name: "address".into(),
        fields: vec![
            ("street".into(), Text),
            ("zip".into(), Int),
            ("tags".into(), Set(Box::new(Text))),
        ],
    }));
    vec![
        Ascii,
        Bigint,
        Blob,
        Boolean,
        Counter,
        Date,
        Decimal,
        Double,
        Duration,
        Float,
        Inet,
        Int,
        Smallint,
        Text,
        Time,
        Timestamp,
        Timeuuid,
        Tinyint,
        Uuid,
        Varint,
        List(Box::new(Int)),
        Set(Box::new(Timeuuid)),
        Map(Box::new(Text), Box::new(List(Box::new(Double)))),
        Tuple(vec![Int, Text, Map(Box::new(Uuid), Box::new(Blob))]),
        udt.clone(),
        List(Box::new(udt)),
        Vector(Box::new(Float), 3),
        Vector(Box::new(Text), 2),
        Custom("com.example.MyType".into()),
    ]
}

#[test]
fn type_options_round_trip() {
    for v in VERSIONS {
        for t in all_types() {
            let mut out = Vec::new();
            encode_type_option(&t, v, &mut out);
            let (d, used) = decode_type_option(&out).unwrap();
            assert_eq!(used, out.len());
            assert_eq!(d, t, "v{v}");
        }
    }
}

#[test]
fn type_option_exact_bytes() {
    let mut out = Vec::new();
    encode_type_option(
        &CqlType::Map(Box::new(CqlType::Text), Box::new(CqlType::Int)),
        4,
        &mut out,
    );
    assert_eq!(out, [0, 0x21, 0, 0x0D, 0, 0x09]);
    out.clear();
    encode_type_option(
        &CqlType::Frozen(Box::new(CqlType::List(Box::new(CqlType::Bigint)))),
        4,
        &mut out,
    );
    assert_eq!(out, [0, 0x20, 0, 0x02]);
    out.clear();
    encode_type_option(&CqlType::Vector(Box::new(CqlType::Float), 3), 5, &mut out);
    let name =
        "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType,3)";
    let mut expected = vec![0, 0, 0, name.len() as u8];
    expected.extend_from_slice(name.as_bytes());
    assert_eq!(out, expected);
    // duration: id 0x15 in v5, a custom type before
    out.clear();
    encode_type_option(&CqlType::Duration, 5, &mut out);
    assert_eq!(out, [0, 0x15]);
    out.clear();
    encode_type_option(&CqlType::Duration, 4, &mut out);
    assert_eq!(&out[..2], [0, 0]);
    assert!(out.ends_with(b"org.apache.cassandra.db.marshal.DurationType"));
    // udt
    out.clear();
    let udt = CqlType::Udt(Arc::new(UserType {
        keyspace: "k".into(),
        name: "u".into(),
        fields: vec![("f".into(), CqlType::Int)],
    }));
    encode_type_option(&udt, 4, &mut out);
    assert_eq!(
        out,
        [0, 0x30, 0, 1, b'k', 0, 1, b'u', 0, 1, 0, 1, b'f', 0, 9]
    );
}

#[test]
fn marshal_class_names() {
    let t = CqlType::Vector(Box::new(CqlType::List(Box::new(CqlType::Int))), 2);
    let n = marshal_class_name(&t);
    assert_eq!(
        n,
        "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.ListType(org.apache.cassandra.db.marshal.Int32Type),2)"
    );
    assert_eq!(parse_marshal_class(&n), t);
    let frozen = CqlType::Frozen(Box::new(CqlType::Set(Box::new(CqlType::Text))));
    assert_eq!(parse_marshal_class(&marshal_class_name(&frozen)), frozen);
    let udt = all_types()
        .into_iter()
        .find(|t| matches!(t, CqlType::Udt(_)))
        .unwrap();
    assert_eq!(parse_marshal_class(&marshal_class_name(&udt)), udt);
    assert_eq!(
        parse_marshal_class("garbage((("),
        CqlType::Custom("garbage(((".into())
    );
}

#[test]
fn deeply_nested_type_option_is_refused() {
    let mut buf = Vec::new();
    for _ in 0..100_000 {
        buf.extend_from_slice(&[0, 0x20]);
    }
    buf.extend_from_slice(&[0, 9]);
    assert!(matches!(
        decode_type_option(&buf),
        Err(ProtocolError::Malformed(_))
    ));
    let deep = format!(
        "{}Int32Type{}",
        "ListType(".repeat(10_000),
        ")".repeat(10_000)
    );
    assert!(matches!(parse_marshal_class(&deep), CqlType::Custom(_)));
}

// ------------------------------------------------------------ responses

fn reasons() -> Vec<(IpAddr, u16)> {
    vec![
        (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 1),
        (IpAddr::V6(Ipv6Addr::LOCALHOST), 0),
    ]
}

fn sample_errors(version: u8) -> Vec<ErrorResponse> {
    use ErrorKind::*;
    let placeholder = |r: Vec<(IpAddr, u16)>| {
        if version >= 5 {
            r
        } else {
            r.iter()
                .map(|_| (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
                .collect()
        }
    };
    let mut v = vec![
        ErrorResponse::server_error("boom"),
        ErrorResponse::protocol_error("bad"),
        ErrorResponse::authentication_error("Provided username cassandra and/or password are incorrect"),
        ErrorResponse::new(Unavailable { consistency: Consistency::Quorum, required: 2, alive: 1 }, "Cannot achieve consistency level QUORUM"),
        ErrorResponse::new(Overloaded, "overloaded"),
        ErrorResponse::new(IsBootstrapping, "bootstrapping"),
        ErrorResponse::new(TruncateError, "truncate"),
        ErrorResponse::new(
            WriteTimeout { consistency: Consistency::One, received: 0, block_for: 1, write_type: "SIMPLE".into(), contentions: None },
            "Operation timed out - received only 0 responses.",
        ),
        ErrorResponse::new(
            WriteTimeout {
                consistency: Consistency::Serial,
                received: 0,
                block_for: 1,
                write_type: "CAS".into(),
                contentions: (version >= 5).then_some(3),
            },
            "cas",
        ),
        ErrorResponse::new(ReadTimeout { consistency: Consistency::Two, received: 1, block_for: 2, data_present: true }, "rt"),
        ErrorResponse::new(CdcWriteFailure, "cdc"),
        ErrorResponse::syntax_error("line 1:0 no viable alternative at input 'SELEC'"),
        ErrorResponse::unauthorized("nope"),
        ErrorResponse::invalid("Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING"),
        ErrorResponse::config_error("cfg"),
        ErrorResponse::new(AlreadyExists { keyspace: "ks".into(), table: "".into() }, "Keyspace ks already exists"),
        ErrorResponse::new(AlreadyExists { keyspace: "ks".into(), table: "t".into() }, "Table ks.t already exists"),
        ErrorResponse::new(Unprepared { id: b(&[0xAB; 16]) }, "Prepared query with ID ... not found"),
    ];
    if version >= 4 {
        v.push(ErrorResponse::new(
            ReadFailure {
                consistency: Consistency::All,
                received: 1,
                block_for: 3,
                reasons: placeholder(reasons()),
                data_present: false,
            },
            "rf",
        ));
        v.push(ErrorResponse::new(
            WriteFailure {
                consistency: Consistency::All,
                received: 1,
                block_for: 3,
                reasons: placeholder(reasons()),
                write_type: "BATCH".into(),
            },
            "wf",
        ));
        v.push(ErrorResponse::new(
            FunctionFailure {
                keyspace: "ks".into(),
                function: "f".into(),
                arg_types: vec!["int".into(), "text".into()],
            },
            "ff",
        ));
    }
    if version >= 5 {
        v.push(ErrorResponse::new(
            CasWriteUnknown {
                consistency: Consistency::Serial,
                received: 1,
                block_for: 2,
            },
            "cwu",
        ));
    }
    v
}

fn sample_responses(version: u8) -> Vec<Response> {
    let cols = vec![
        col("k", CqlType::Int),
        col(
            "v",
            CqlType::Map(Box::new(CqlType::Text), Box::new(CqlType::Blob)),
        ),
    ];
    let mixed = vec![
        col("k", CqlType::Int),
        ColumnSpec {
            table: "other".into(),
            ..col("x", CqlType::Text)
        },
    ];
    let mut supported = HashMap::new();
    supported.insert("CQL_VERSION".into(), vec!["3.4.7".into()]);
    supported.insert("COMPRESSION".into(), vec!["lz4".into(), "snappy".into()]);
    supported.insert(
        "PROTOCOL_VERSIONS".into(),
        vec!["3/v3".into(), "4/v4".into(), "5/v5".into()],
    );
    let schema = |target, name: Option<&str>, args: Vec<String>| SchemaChange {
        change_type: "CREATED".into(),
        target,
        keyspace: "ks".into(),
        name: name.map(Into::into),
        arg_types: args,
    };
    let mut v: Vec<Response> = sample_errors(version)
        .into_iter()
        .map(Response::Error)
        .collect();
    v.extend([
        Response::Ready,
        Response::Authenticate("org.apache.cassandra.auth.PasswordAuthenticator".into()),
        Response::Supported(supported),
        Response::Result(ResultBody::Void),
        Response::Result(ResultBody::SetKeyspace("ks".into())),
        Response::Result(ResultBody::Rows {
            metadata: RowsMetadata {
                columns: cols.clone().into(),
                paging_state: Some(b(b"ps")),
                no_metadata: false,
                new_metadata_id: None,
            },
            rows: vec![
                vec![Some(b(&[0, 0, 0, 1])), None],
                vec![Some(b(&[0, 0, 0, 2])), Some(Bytes::new())],
            ],
        }),
        Response::Result(ResultBody::Rows {
            metadata: RowsMetadata {
                columns: mixed.clone().into(),
                paging_state: None,
                no_metadata: false,
                new_metadata_id: None,
            },
            rows: vec![],
        }),
        Response::Result(ResultBody::Rows {
            metadata: RowsMetadata {
                columns: vec![
                    ColumnSpec {
                        keyspace: String::new(),
                        table: String::new(),
                        name: String::new(),
                        typ: CqlType::Blob
                    };
                    2
                ]
                .into(),
                paging_state: None,
                no_metadata: true,
                new_metadata_id: None,
            },
            rows: vec![vec![None, Some(b(b"x"))]],
        }),
        Response::Result(ResultBody::Prepared {
            id: b(&[1; 16]),
            result_metadata_id: if version >= 5 {
                b(&[2; 16])
            } else {
                Bytes::new()
            },
            metadata: Box::new(PreparedMetadata {
                columns: cols.clone(),
                pk_indexes: if version >= 4 { vec![0] } else { vec![] },
            }),
            result_metadata: Box::new(RowsMetadata {
                columns: mixed.into(),
                ..RowsMetadata::default()
            }),
        }),
        Response::Result(ResultBody::Prepared {
            id: b(&[1; 16]),
            result_metadata_id: if version >= 5 {
                b(&[3; 16])
            } else {
                Bytes::new()
            },
            metadata: Box::new(PreparedMetadata::default()),
            result_metadata: Box::new(RowsMetadata::default()),
        }),
        Response::Result(ResultBody::SchemaChange(schema(
            SchemaChangeTarget::Keyspace,
            None,
            vec![],
        ))),
        Response::Result(ResultBody::SchemaChange(schema(
            SchemaChangeTarget::Table,
            Some("t"),
            vec![],
        ))),
        Response::Result(ResultBody::SchemaChange(schema(
            SchemaChangeTarget::Type,
            Some("ty"),
            vec![],
        ))),
        Response::Result(ResultBody::SchemaChange(schema(
            SchemaChangeTarget::Function,
            Some("f"),
            vec!["int".into()],
        ))),
        Response::Result(ResultBody::SchemaChange(schema(
            SchemaChangeTarget::Aggregate,
            Some("a"),
            vec![],
        ))),
        Response::Event(Event::SchemaChange(schema(
            SchemaChangeTarget::Table,
            Some("t"),
            vec![],
        ))),
        Response::Event(Event::TopologyChange {
            change: "NEW_NODE".into(),
            addr: SocketAddr::from(([127, 0, 0, 2], 9042)),
        }),
        Response::Event(Event::StatusChange {
            change: "DOWN".into(),
            addr: "[::1]:9042".parse().unwrap(),
        }),
        Response::AuthChallenge(Some(b(b"challenge"))),
        Response::AuthChallenge(None),
        Response::AuthSuccess(None),
        Response::AuthSuccess(Some(Bytes::new())),
    ]);
    if version >= 5 {
        v.push(Response::Result(ResultBody::Rows {
            metadata: RowsMetadata {
                columns: cols.into(),
                paging_state: None,
                no_metadata: false,
                new_metadata_id: Some(b(&[5; 16])),
            },
            rows: vec![],
        }));
    }
    v
}

#[test]
fn every_response_round_trips_in_every_version() {
    for v in VERSIONS {
        for resp in sample_responses(v) {
            let mut body = Vec::new();
            resp.encode_body(v, &mut body);
            assert_eq!(
                Response::decode(v, resp.opcode(), &body).unwrap(),
                resp,
                "v{v}"
            );
        }
    }
}

#[test]
fn truncated_responses_are_malformed_not_panics() {
    for v in VERSIONS {
        for resp in sample_responses(v) {
            let mut body = Vec::new();
            resp.encode_body(v, &mut body);
            for cut in 0..body.len() {
                let r = Response::decode(v, resp.opcode(), &body[..cut]);
                assert!(
                    matches!(r, Err(ProtocolError::Malformed(_))),
                    "v{v} cut {cut} of {resp:?}: {r:?}"
                );
            }
        }
    }
}

#[test]
fn errors_are_downgraded_for_old_versions() {
    let rf = ErrorResponse::new(
        ErrorKind::ReadFailure {
            consistency: Consistency::One,
            received: 0,
            block_for: 1,
            reasons: reasons(),
            data_present: true,
        },
        "rf",
    );
    let mut body = Vec::new();
    Response::Error(rf.clone()).encode_body(3, &mut body);
    let Response::Error(d) = Response::decode(3, 0, &body).unwrap() else {
        panic!()
    };
    assert_eq!(
        d.kind,
        ErrorKind::ReadTimeout {
            consistency: Consistency::One,
            received: 0,
            block_for: 1,
            data_present: true
        }
    );
    // v4: number of failures only
    body.clear();
    Response::Error(rf).encode_body(4, &mut body);
    assert_eq!(&body[body.len() - 5..], [0, 0, 0, 2, 1]);
    // CAS_WRITE_UNKNOWN is v5 only: WRITE_TIMEOUT(CAS) before
    let cwu = ErrorResponse::new(
        ErrorKind::CasWriteUnknown {
            consistency: Consistency::Serial,
            received: 0,
            block_for: 1,
        },
        "x",
    );
    body.clear();
    Response::Error(cwu).encode_body(4, &mut body);
    let Response::Error(d) = Response::decode(4, 0, &body).unwrap() else {
        panic!()
    };
    assert_eq!(d.code(), 0x1100);
    // FUNCTION_FAILURE is INVALID in v3
    let ff = ErrorResponse::new(
        ErrorKind::FunctionFailure {
            keyspace: "k".into(),
            function: "f".into(),
            arg_types: vec![],
        },
        "ff",
    );
    body.clear();
    Response::Error(ff).encode_body(3, &mut body);
    assert_eq!(
        Response::decode(3, 0, &body).unwrap(),
        Response::Error(ErrorResponse::invalid("ff"))
    );
}

#[test]
fn rows_exact_bytes_use_global_table_spec() {
    let resp = Response::Result(ResultBody::Rows {
        metadata: RowsMetadata {
            columns: vec![col("k", CqlType::Int)].into(),
            ..RowsMetadata::default()
        },
        rows: vec![vec![Some(b(&[0, 0, 0, 7]))]],
    });
    let mut body = Vec::new();
    resp.encode_body(4, &mut body);
    let expected: Vec<u8> = [
        &[0, 0, 0, 2][..], // kind Rows
        &[0, 0, 0, 1],     // flags: global tables spec
        &[0, 0, 0, 1],     // 1 column
        &[0, 2, b'k', b's', 0, 1, b't'],
        &[0, 1, b'k', 0, 9], // name k, int
        &[0, 0, 0, 1],       // 1 row
        &[0, 0, 0, 4, 0, 0, 0, 7],
    ]
    .concat();
    assert_eq!(body, expected);
}

#[test]
fn prepared_metadata_exact_bytes_v4_has_pk_indexes() {
    let resp = Response::Result(ResultBody::Prepared {
        id: b(&[0xAA]),
        result_metadata_id: b(&[0xBB]),
        metadata: Box::new(PreparedMetadata {
            columns: vec![col("k", CqlType::Int)],
            pk_indexes: vec![0],
        }),
        result_metadata: Box::new(RowsMetadata {
            no_metadata: true,
            ..RowsMetadata::default()
        }),
    });
    let mut v4 = Vec::new();
    resp.encode_body(4, &mut v4);
    let expected4: Vec<u8> = [
        &[0, 0, 0, 4][..],
        &[0, 1, 0xAA],
        &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0], // flags, 1 column, 1 pk, pk index 0
        &[0, 2, b'k', b's', 0, 1, b't', 0, 1, b'k', 0, 9],
        &[0, 0, 0, 4, 0, 0, 0, 0], // result metadata: no_metadata, 0 columns
    ]
    .concat();
    assert_eq!(v4, expected4);
    let mut v5 = Vec::new();
    resp.encode_body(5, &mut v5);
    assert_eq!(&v5[4..10], [0, 1, 0xAA, 0, 1, 0xBB]);
}

#[test]
fn huge_row_count_is_malformed_without_allocating() {
    let mut body = vec![0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 1]; // rows, no_metadata, 1 column
    body.extend_from_slice(&[0x7F, 0xFF, 0xFF, 0xFF]);
    assert!(matches!(
        Response::decode(4, 8, &body),
        Err(ProtocolError::Malformed(_))
    ));
    let body = [0, 0, 0, 2, 0, 0, 0, 4, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];
    assert!(matches!(
        Response::decode(4, 8, &body),
        Err(ProtocolError::Malformed(_))
    ));
}

#[test]
fn response_frames_with_warnings_tracing_and_compression_round_trip() {
    let warnings = vec!["Aggregation query used without partition key".to_string()];
    let tracing = [7u8; 16];
    for v in VERSIONS {
        for c in [None, Some(Compression::Lz4), Some(Compression::Snappy)] {
            for resp in sample_responses(v) {
                let mut frame = Vec::new();
                encode_response_frame(v, 9, &resp, c, &warnings, Some(tracing), &mut frame);
                let h = FrameHeader::parse(&frame).unwrap().unwrap();
                assert!(h.is_response);
                assert_eq!(h.stream, 9);
                assert_eq!(h.frame_len(), frame.len());
                assert_eq!(h.has_flag(flags::COMPRESSION), c.is_some() && v < 5);
                assert_eq!(h.has_flag(flags::WARNING), v >= 4);
                let env = decode_response_frame(&h, &frame[HEADER_LEN..], c).unwrap();
                assert_eq!(env.response, resp);
                assert_eq!(env.tracing_id, Some(tracing));
                assert_eq!(env.warnings, if v >= 4 { warnings.clone() } else { vec![] });
            }
        }
    }
}

#[test]
fn warning_prefix_exact_bytes() {
    let mut frame = Vec::new();
    encode_response_frame(
        4,
        0,
        &Response::Ready,
        None,
        &["w".to_string()],
        None,
        &mut frame,
    );
    assert_eq!(
        frame,
        [0x84, flags::WARNING, 0, 0, 2, 0, 0, 0, 5, 0, 1, 0, 1, b'w']
    );
}

// ------------------------------------------------------------ compression

#[test]
fn body_compression_round_trips() {
    let body: Vec<u8> = (0..20_000u32)
        .flat_map(|i| (i % 251).to_be_bytes())
        .collect();
    for c in [Compression::Lz4, Compression::Snappy] {
        for input in [&body[..], b"", b"x"] {
            let z = compress_body(c, input);
            assert_eq!(decompress_body(c, &z).unwrap(), input);
        }
        assert!(compress_body(c, &body).len() < body.len());
        assert_eq!(Compression::from_name(c.name()), Some(c));
    }
    let z = compress_body(Compression::Lz4, &body);
    assert_eq!(&z[..4], (body.len() as u32).to_be_bytes());
}

#[test]
fn corrupt_compressed_bodies_are_errors() {
    for c in [Compression::Lz4, Compression::Snappy] {
        let z = compress_body(c, &[42u8; 5000]);
        for cut in 0..z.len() {
            let _ = decompress_body(c, &z[..cut]);
        }
        let mut bad = z.clone();
        for x in bad.iter_mut().skip(4) {
            *x ^= 0x5A;
        }
        let _ = decompress_body(c, &bad);
    }
    // a lying LZ4 length prefix must not allocate 4 GiB
    assert!(matches!(
        decompress_body(Compression::Lz4, &[0xFF, 0xFF, 0xFF, 0xFF, 0]),
        Err(ProtocolError::Compression(_))
    ));
    assert!(matches!(
        decompress_body(Compression::Lz4, &[0, 0]),
        Err(ProtocolError::Compression(_))
    ));
    assert!(matches!(
        decompress_body(Compression::Snappy, &[0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
        Err(ProtocolError::Compression(_))
    ));
}

// ------------------------------------------------------------ v5 segments

#[test]
fn crc_functions_match_cassandra() {
    // values computed with a transcription of Cassandra's Crc.java
    assert_eq!(segment::crc24(50 | (1 << 17), 3), 0xEE_FFA5);
    assert_eq!(
        segment::crc32(b""),
        u32::from_le_bytes([0xd3, 0x7e, 0x77, 0x44])
    );
    assert_eq!(
        segment::crc32(&[b'b'; 50]),
        u32::from_le_bytes([0x7a, 0xae, 0xeb, 0x7c])
    );
}

#[test]
fn uncompressed_segment_exact_bytes() {
    let payload = [b'b'; 50];
    let mut out = Vec::new();
    segment::encode_segments(&payload, false, &mut out);
    let mut expected = vec![0x32, 0x00, 0x02, 0xa5, 0xff, 0xee];
    expected.extend_from_slice(&payload);
    expected.extend_from_slice(&[0x7a, 0xae, 0xeb, 0x7c]);
    assert_eq!(out, expected);
    let mut buf = BytesMut::from(&out[..]);
    let seg = SegmentDecoder::new(false)
        .decode(&mut buf)
        .unwrap()
        .unwrap();
    assert!(seg.self_contained);
    assert_eq!(&seg.payload[..], &payload);
    assert!(buf.is_empty());
}

#[test]
fn compressed_segment_header_layout() {
    let payload = [b'b'; 50];
    let mut out = Vec::new();
    segment::encode_segments(&payload, true, &mut out);
    let header = u64::from_le_bytes(out[..8].try_into().unwrap());
    let compressed_len = (header & 0x1FFFF) as usize;
    assert_eq!((header >> 17) & 0x1FFFF, 50);
    assert_eq!((header >> 34) & 1, 1);
    assert_eq!((header >> 35) & 0x1F, 0);
    assert_eq!(out.len(), 8 + compressed_len + 4);
    assert!(compressed_len < 50);
    // tiny payloads are stored uncompressed, uncompressed length 0
    let mut tiny = Vec::new();
    segment::encode_segments(b"b", true, &mut tiny);
    let header = u64::from_le_bytes(tiny[..8].try_into().unwrap());
    assert_eq!(header & 0x1FFFF, 1);
    assert_eq!((header >> 17) & 0x1FFFF, 0);
    let seg = SegmentDecoder::new(true)
        .decode(&mut BytesMut::from(&tiny[..]))
        .unwrap()
        .unwrap();
    assert_eq!(&seg.payload[..], b"b");
}

fn big_frame(body_len: usize) -> Vec<u8> {
    let rows: Vec<Vec<Option<Bytes>>> = vec![vec![Some(Bytes::from(
        (0..body_len)
            .map(|i| (i * 7 % 256) as u8)
            .collect::<Vec<u8>>(),
    ))]];
    let resp = Response::Result(ResultBody::Rows {
        metadata: RowsMetadata {
            columns: vec![col("v", CqlType::Blob)].into(),
            ..RowsMetadata::default()
        },
        rows,
    });
    let mut frame = Vec::new();
    encode_response_frame(5, 1, &resp, None, &[], None, &mut frame);
    frame
}

#[test]
fn large_frame_splits_into_three_segments_and_reassembles() {
    for lz4 in [false, true] {
        let frame = big_frame(300 * 1024);
        let mut out = Vec::new();
        segment::encode_segments(&frame, lz4, &mut out);
        let mut buf = BytesMut::new();
        let mut dec = SegmentDecoder::new(lz4);
        let mut re = FrameReassembler::new(1 << 20);
        let mut segs = 0;
        let mut frames = Vec::new();
        // feed in odd-sized chunks to exercise partial reads
        for chunk in out.chunks(10_007) {
            buf.extend_from_slice(chunk);
            while let Some(seg) = dec.decode(&mut buf).unwrap() {
                assert!(!seg.self_contained);
                assert!(seg.payload.len() <= MAX_PAYLOAD);
                segs += 1;
                frames.extend(re.push(seg).unwrap());
            }
        }
        assert_eq!(segs, 3);
        assert!(buf.is_empty());
        assert!(!re.in_progress());
        assert_eq!(frames.len(), 1);
        let (h, body) = &frames[0];
        assert_eq!(h.length as usize, body.len());
        assert_eq!(&body[..], &frame[HEADER_LEN..]);
    }
}

#[test]
fn several_small_frames_share_one_self_contained_segment() {
    let mut payload = Vec::new();
    for s in 0..3 {
        encode_response_frame(5, s, &Response::Ready, None, &[], None, &mut payload);
    }
    let mut out = Vec::new();
    segment::encode_segments(&payload, false, &mut out);
    let mut buf = BytesMut::from(&out[..]);
    let seg = SegmentDecoder::new(false)
        .decode(&mut buf)
        .unwrap()
        .unwrap();
    assert!(seg.self_contained);
    let frames = FrameReassembler::new(1 << 20).push(seg).unwrap();
    assert_eq!(
        frames.iter().map(|(h, _)| h.stream).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    // a mix of small and big frames: big ones go alone, small ones packed
    let mut mixed = payload.clone();
    mixed.extend_from_slice(&big_frame(200_000));
    mixed.extend_from_slice(&payload);
    let mut out = Vec::new();
    segment::encode_segments(&mixed, false, &mut out);
    let mut buf = BytesMut::from(&out[..]);
    let mut dec = SegmentDecoder::new(false);
    let mut re = FrameReassembler::new(1 << 20);
    let mut kinds = Vec::new();
    let mut n = 0;
    while let Some(seg) = dec.decode(&mut buf).unwrap() {
        kinds.push(seg.self_contained);
        n += re.push(seg).unwrap().len();
    }
    assert_eq!(kinds, [true, false, false, true]);
    assert_eq!(n, 7);
}

#[test]
fn segment_crc_mismatches_are_detected() {
    for lz4 in [false, true] {
        let mut out = Vec::new();
        segment::encode_segments(&[b'z'; 1000], lz4, &mut out);
        // header corruption
        let mut bad = out.clone();
        bad[0] ^= 1;
        assert!(matches!(
            SegmentDecoder::new(lz4).decode(&mut BytesMut::from(&bad[..])),
            Err(ProtocolError::BadCrc(_))
        ));
        // payload corruption
        let mut bad = out.clone();
        let mid = bad.len() - 6;
        bad[mid] ^= 0x80;
        let mut buf = BytesMut::from(&bad[..]);
        assert!(matches!(
            SegmentDecoder::new(lz4).decode(&mut buf),
            Err(ProtocolError::BadCrc(_))
        ));
        assert_eq!(buf.len(), bad.len(), "nothing consumed on error");
        // trailer corruption
        let mut bad = out.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xFF;
        assert!(matches!(
            SegmentDecoder::new(lz4).decode(&mut BytesMut::from(&bad[..])),
            Err(ProtocolError::BadCrc(_))
        ));
    }
}

#[test]
fn partial_segments_wait_for_more_bytes() {
    let mut out = Vec::new();
    segment::encode_segments(b"hello", false, &mut out);
    let mut dec = SegmentDecoder::new(false);
    for cut in 0..out.len() {
        let mut buf = BytesMut::from(&out[..cut]);
        assert_eq!(dec.decode(&mut buf).unwrap(), None);
        assert_eq!(buf.len(), cut);
    }
}

#[test]
fn reassembler_rejects_bad_sequences() {
    let mut re = FrameReassembler::new(1 << 20);
    // self-contained segment with a partial frame
    let mut frame = Vec::new();
    encode_response_frame(
        5,
        0,
        &Response::AuthSuccess(Some(b(b"xyz"))),
        None,
        &[],
        None,
        &mut frame,
    );
    let seg = segment::Segment {
        payload: b(&frame[..frame.len() - 1]),
        self_contained: true,
    };
    assert!(matches!(re.push(seg), Err(ProtocolError::Malformed(_))));
    // frame over the limit
    let mut small = FrameReassembler::new(100);
    let big = big_frame(1000);
    let seg = segment::Segment {
        payload: b(&big[..50]),
        self_contained: false,
    };
    // an oversized frame is reported once and its bytes are skipped; the
    // connection goes on with the next frame
    assert!(small.push(seg).unwrap().is_empty());
    let refused = small.take_oversized();
    assert_eq!(refused.len(), 1);
    assert!(matches!(refused[0].1, ProtocolError::FrameTooLarge { .. }));
    let seg = segment::Segment {
        payload: b(&big[50..]),
        self_contained: false,
    };
    assert!(small.push(seg).unwrap().is_empty());
    assert!(!small.in_progress());
    let seg = segment::Segment {
        payload: b(&frame),
        self_contained: true,
    };
    assert_eq!(small.push(seg).unwrap().len(), 1);
    assert!(small.take_oversized().is_empty());
}

// ------------------------------------------------------------ robustness

/// Deterministic pseudo-random garbage through every decoder: errors only.
#[test]
fn garbage_never_panics() {
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let len = (next() % 200) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        for v in VERSIONS {
            for op in 0..=0x11u8 {
                let _ = Request::decode(v, op, &data);
                let _ = Response::decode(v, op, &data);
            }
        }
        let _ = FrameHeader::parse(&data);
        let _ = decode_type_option(&data);
        for lz4 in [false, true] {
            let _ = SegmentDecoder::new(lz4).decode(&mut BytesMut::from(&data[..]));
        }
        for c in [Compression::Lz4, Compression::Snappy] {
            let _ = decompress_body(c, &data);
        }
    }
    // mutate valid bodies too: they get further than random bytes
    for v in VERSIONS {
        for req in sample_requests(v) {
            let mut body = Vec::new();
            req.encode(v, &mut body);
            for _ in 0..50 {
                let mut m = body.clone();
                if m.is_empty() {
                    break;
                }
                let i = (next() as usize) % m.len();
                m[i] = next() as u8;
                let _ = Request::decode(v, req.opcode(), &m);
            }
        }
        for resp in sample_responses(v) {
            let mut body = Vec::new();
            resp.encode_body(v, &mut body);
            for _ in 0..20 {
                let mut m = body.clone();
                if m.is_empty() {
                    break;
                }
                let i = (next() as usize) % m.len();
                m[i] = next() as u8;
                let _ = Response::decode(v, resp.opcode(), &m);
            }
        }
    }
}

/// A decoded EXECUTE's prepared id and bound values are slices of the
/// frame's body, compressed or not: nothing is copied (nor allocated)
/// per value on the way to the storage engine.
#[test]
fn decoded_values_are_slices_of_the_frame_body() {
    let req = Request::Execute {
        id: Bytes::from_static(b"0123456789abcdef"),
        result_metadata_id: None,
        params: QueryParameters {
            values: Values::Positional(vec![
                Value::Set(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 7])),
                Value::Set(Bytes::from(vec![9u8; 100])),
            ]),
            ..Default::default()
        },
    };
    for c in [None, Some(Compression::Lz4)] {
        let mut frame = Vec::new();
        encode_request_frame(4, 1, &req, c, &mut frame);
        let h = FrameHeader::parse(&frame).unwrap().unwrap();
        let body = Bytes::copy_from_slice(&frame[HEADER_LEN..]);
        let env = decode_request_frame(&h, &body, c).unwrap();
        assert_eq!(env.request, req);
        let Request::Execute { id, params, .. } = env.request else {
            unreachable!()
        };
        let Values::Positional(values) = params.values else {
            unreachable!()
        };
        let mut parts = vec![id];
        parts.extend(values.into_iter().filter_map(|v| match v {
            Value::Set(b) => Some(b),
            _ => None,
        }));
        for b in &parts {
            if c.is_none() {
                let range = body.as_ptr_range();
                assert!(range.contains(&b.as_ptr()), "{b:?} is a copy of the body");
            }
            // a slice of a shared buffer: its clone shares it
            assert_eq!(b.clone().as_ptr(), b.as_ptr());
        }
    }
}

/// A statement's result columns are shared by its executions and encoded
/// once per thread: every later encoding, in any version and with either
/// spec shape, is what a fresh copy of the columns encodes to.
#[test]
fn shared_result_columns_encode_as_fresh_ones() {
    let global: Arc<[ColumnSpec]> = vec![col("k", CqlType::Int), col("v", CqlType::Blob)].into();
    let mut other = col("w", CqlType::Text);
    other.table = "other".into();
    let mixed: Arc<[ColumnSpec]> = vec![col("k", CqlType::Int), other].into();
    let encode = |columns: &Arc<[ColumnSpec]>, version: u8| {
        let m = RowsMetadata {
            columns: columns.clone(),
            ..RowsMetadata::default()
        };
        let mut out = Vec::new();
        m.encode(version, &mut out);
        out
    };
    for _ in 0..3 {
        for version in [3, 4, 5] {
            for columns in [&global, &mixed] {
                let fresh: Arc<[ColumnSpec]> = columns.to_vec().into();
                assert_eq!(encode(columns, version), encode(&fresh, version));
            }
        }
    }
    // the flags tell the shapes apart: a global spec, then one per column
    assert_eq!(encode(&global, 4)[..4], [0, 0, 0, 1]);
    assert_eq!(encode(&mixed, 4)[..4], [0, 0, 0, 0]);
}
