//! Feeds arbitrary bytes to every decoder of the native protocol: frame
//! headers, request (and response) bodies for every opcode and version, v3/v4
//! body decompression, and the v5 segment decoder and frame reassembler.
//! Any panic, overflow or runaway allocation is a bug.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sibyl_protocol::segment::{FrameReassembler, SegmentDecoder};
use sibyl_protocol::{
    decode_request_frame, decode_response_frame, decode_type_option, decompress_body, Compression, FrameHeader,
    Request, Response, HEADER_LEN,
};

fuzz_target!(|data: &[u8]| {
    // As a whole frame, the way the server reads one.
    if let Ok(Some(h)) = FrameHeader::parse(data) {
        let rest = data.get(HEADER_LEN..).unwrap_or_default();
        let body = rest.get(..h.length as usize).unwrap_or(rest);
        for c in [None, Some(Compression::Lz4), Some(Compression::Snappy)] {
            let _ = decode_request_frame(&h, body, c);
            let _ = decode_response_frame(&h, body, c);
        }
    }

    // As a body, for every opcode (known or not) and version.
    for version in 3..=5u8 {
        for opcode in 0..=0x11u8 {
            let _ = Request::decode(version, opcode, data);
            let _ = Response::decode(version, opcode, data);
        }
    }
    let _ = decode_type_option(data);
    let _ = decompress_body(Compression::Lz4, data);
    let _ = decompress_body(Compression::Snappy, data);

    // As a v5 byte stream: segments, then frames, then requests.
    for lz4 in [false, true] {
        let mut buf = BytesMut::from(data);
        let mut decoder = SegmentDecoder::new(lz4);
        let mut frames = FrameReassembler::new(1 << 20);
        while let Ok(Some(segment)) = decoder.decode(&mut buf) {
            match frames.push(segment) {
                Ok(done) => {
                    for (h, body) in done {
                        let _ = decode_request_frame(&h, &body, None);
                    }
                }
                Err(_) => break,
            }
        }
    }
});
