//! v3/v4 frame body compression (`COMPRESSION` flag). v5 compresses segments
//! instead (see [`crate::segment`]).

use crate::ProtocolError;

/// Body compression algorithms, as named in STARTUP's `COMPRESSION` option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    Lz4,
    Snappy,
}

impl Compression {
    /// The STARTUP option value: `lz4` or `snappy`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Lz4 => "lz4",
            Compression::Snappy => "snappy",
        }
    }

    /// Parses a STARTUP option value (case-insensitive).
    pub fn from_name(s: &str) -> Option<Compression> {
        if s.eq_ignore_ascii_case("lz4") {
            Some(Compression::Lz4)
        } else if s.eq_ignore_ascii_case("snappy") {
            Some(Compression::Snappy)
        } else {
            None
        }
    }
}

/// Neither LZ4 nor Snappy expands by more than this factor, so a declared
/// uncompressed length beyond it is a lie (and would be a huge allocation).
const MAX_RATIO: usize = 256;

/// Decompresses a v3/v4 frame body. LZ4 bodies start with the uncompressed
/// length as a 4-byte big-endian int.
pub fn decompress_body(c: Compression, body: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    match c {
        Compression::Lz4 => {
            let (len, data) = match body {
                [a, b, c, d, rest @ ..] => (u32::from_be_bytes([*a, *b, *c, *d]) as usize, rest),
                _ => {
                    return Err(ProtocolError::Compression(
                        "LZ4 body shorter than its length prefix".into(),
                    ))
                }
            };
            if len == 0 {
                return Ok(Vec::new());
            }
            if len > data.len().saturating_mul(MAX_RATIO).saturating_add(64) {
                return Err(ProtocolError::Compression(format!(
                    "LZ4 uncompressed length {len} is impossible for {} compressed bytes",
                    data.len()
                )));
            }
            let out = lz4_flex::block::decompress(data, len).map_err(|e| {
                ProtocolError::Compression(format!("LZ4 decompression failed: {e}"))
            })?;
            if out.len() != len {
                return Err(ProtocolError::Compression(format!(
                    "LZ4 decompressed {} bytes, expected {len}",
                    out.len()
                )));
            }
            Ok(out)
        }
        Compression::Snappy => {
            let len = snap::raw::decompress_len(body).map_err(|e| {
                ProtocolError::Compression(format!("Snappy decompression failed: {e}"))
            })?;
            if len > body.len().saturating_mul(MAX_RATIO).saturating_add(64) {
                return Err(ProtocolError::Compression(format!(
                    "Snappy uncompressed length {len} is impossible for {} compressed bytes",
                    body.len()
                )));
            }
            snap::raw::Decoder::new().decompress_vec(body).map_err(|e| {
                ProtocolError::Compression(format!("Snappy decompression failed: {e}"))
            })
        }
    }
}

/// Compresses a v3/v4 frame body (LZ4: with the 4-byte big-endian
/// uncompressed length prefix).
pub fn compress_body(c: Compression, body: &[u8]) -> Vec<u8> {
    match c {
        Compression::Lz4 => {
            let mut out =
                Vec::with_capacity(4 + lz4_flex::block::get_maximum_output_size(body.len()));
            out.extend_from_slice(&(body.len() as u32).to_be_bytes());
            out.extend_from_slice(&lz4_flex::block::compress(body));
            out
        }
        // Snappy fails only on inputs over 4 GiB, which a frame (u32 length)
        // can never hold.
        Compression::Snappy => snap::raw::Encoder::new()
            .compress_vec(body)
            .unwrap_or_default(),
    }
}
