//! v5 framing (native_protocol_v5.spec section 2): frames travel inside
//! segments protected by a CRC24 header checksum and a CRC32 payload
//! checksum, optionally LZ4-compressed. Exactly as Cassandra's
//! `FrameEncoderCrc` / `FrameDecoderCrc` / `FrameEncoderLZ4` / `FrameDecoderLZ4`.
//!
//! Uncompressed segment: 3-byte little-endian header (17 bits payload length,
//! 1 bit self-contained), 3-byte LE CRC24 of it, payload, 4-byte LE CRC32.
//! LZ4 segment: 5-byte LE header (17 bits compressed length, 17 bits
//! uncompressed length (0: stored uncompressed), 1 bit self-contained), 3-byte
//! LE CRC24, compressed payload, 4-byte LE CRC32 of the compressed payload.

use bytes::{Buf, Bytes, BytesMut};

use crate::{FrameHeader, ProtocolError, HEADER_LEN};

/// Largest payload of one segment (17-bit length).
pub const MAX_PAYLOAD: usize = 128 * 1024 - 1;

const CRC24_INIT: u32 = 0x87_5060;
const CRC24_POLY: u32 = 0x197_4F0B;
const CRC32_INITIAL_BYTES: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];

const UNCOMPRESSED_HEADER_LEN: usize = 6;
const COMPRESSED_HEADER_LEN: usize = 8;
const TRAILER_LEN: usize = 4;
const SELF_CONTAINED_BIT_UNCOMPRESSED: u32 = 1 << 17;
const SELF_CONTAINED_BIT_COMPRESSED: u64 = 1 << 34;
const LEN_MASK: u64 = 0x1_FFFF;

/// Cassandra's CRC24 over the `len` (1..=8) low bytes of `bytes`, least
/// significant first.
pub fn crc24(mut bytes: u64, len: usize) -> u32 {
    let mut crc = CRC24_INIT;
    for _ in 0..len {
        crc ^= ((bytes & 0xFF) as u32) << 16;
        bytes >>= 8;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x100_0000 != 0 {
                crc ^= CRC24_POLY;
            }
        }
    }
    crc
}

/// Cassandra's CRC32: standard CRC-32 primed with the bytes FA 2D 55 CA.
pub fn crc32(data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&CRC32_INITIAL_BYTES);
    h.update(data);
    h.finalize()
}

/// One decoded segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Uncompressed payload.
    pub payload: Bytes,
    /// True when the payload holds one or more whole frames; false when it is
    /// a part of one large frame.
    pub self_contained: bool,
}

/// Cuts segments off the front of a receive buffer.
#[derive(Clone, Debug)]
pub struct SegmentDecoder {
    compressed: bool,
}

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

impl SegmentDecoder {
    /// `lz4`: the connection negotiated LZ4 compression.
    pub fn new(lz4: bool) -> Self {
        SegmentDecoder { compressed: lz4 }
    }

    /// Removes one whole segment from the front of `buf` and returns it, after
    /// checking both CRCs; `Ok(None)` (nothing consumed) if `buf` does not hold
    /// a whole segment yet. On error nothing is consumed: the connection
    /// should be closed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Segment>, ProtocolError> {
        let header_len = if self.compressed {
            COMPRESSED_HEADER_LEN
        } else {
            UNCOMPRESSED_HEADER_LEN
        };
        let Some(h) = buf.get(..header_len) else {
            return Ok(None);
        };
        let (data_len, uncompressed_len, self_contained) = if self.compressed {
            let header8 = le(h);
            let header5 = header8 & 0xFF_FFFF_FFFF;
            let read = (header8 >> 40) as u32;
            let computed = crc24(header5, 5);
            if read != computed {
                return Err(ProtocolError::BadCrc(format!(
                    "segment header CRC24 mismatch: read {read:#08x}, computed {computed:#08x}"
                )));
            }
            (
                (header5 & LEN_MASK) as usize,
                ((header5 >> 17) & LEN_MASK) as usize,
                header5 & SELF_CONTAINED_BIT_COMPRESSED != 0,
            )
        } else {
            let header3 = le(h.get(..3).unwrap_or_default());
            let read = le(h.get(3..6).unwrap_or_default()) as u32;
            let computed = crc24(header3, 3);
            if read != computed {
                return Err(ProtocolError::BadCrc(format!(
                    "segment header CRC24 mismatch: read {read:#08x}, computed {computed:#08x}"
                )));
            }
            (
                (header3 & LEN_MASK) as usize,
                0,
                header3 as u32 & SELF_CONTAINED_BIT_UNCOMPRESSED != 0,
            )
        };
        let total = header_len + data_len + TRAILER_LEN;
        let (Some(data), Some(trailer)) = (
            buf.get(header_len..header_len + data_len),
            buf.get(header_len + data_len..total),
        ) else {
            return Ok(None);
        };
        let read = le(trailer) as u32;
        let computed = crc32(data);
        if read != computed {
            return Err(ProtocolError::BadCrc(format!(
                "segment payload CRC32 mismatch: read {read:#010x}, computed {computed:#010x}"
            )));
        }
        let payload = if uncompressed_len > 0 {
            let out = lz4_flex::block::decompress(data, uncompressed_len).map_err(|e| {
                ProtocolError::Compression(format!("LZ4 segment decompression failed: {e}"))
            })?;
            if out.len() != uncompressed_len {
                return Err(ProtocolError::Compression(format!(
                    "LZ4 segment decompressed to {} bytes, header says {uncompressed_len}",
                    out.len()
                )));
            }
            buf.advance(total);
            Bytes::from(out)
        } else {
            let mut seg = buf.split_to(total);
            seg.advance(header_len);
            seg.truncate(data_len);
            seg.freeze()
        };
        Ok(Some(Segment {
            payload,
            self_contained,
        }))
    }
}

/// Appends one segment holding `payload` (at most [`MAX_PAYLOAD`] bytes; a
/// longer one is cut to that, so callers split first).
pub fn encode_segment(payload: &[u8], self_contained: bool, lz4: bool, out: &mut Vec<u8>) {
    let payload = payload
        .get(..payload.len().min(MAX_PAYLOAD))
        .unwrap_or_default();
    if lz4 {
        let compressed = lz4_flex::block::compress(payload);
        // Like Cassandra, store uncompressed (length 0) when it does not shrink.
        let (data, uncompressed_len): (&[u8], u64) = if compressed.len() >= payload.len() {
            (payload, 0)
        } else {
            (&compressed, payload.len() as u64)
        };
        let mut header5 = data.len() as u64 | (uncompressed_len << 17);
        if self_contained {
            header5 |= SELF_CONTAINED_BIT_COMPRESSED;
        }
        let header8 = header5 | (u64::from(crc24(header5, 5)) << 40);
        out.extend_from_slice(&header8.to_le_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(&crc32(data).to_le_bytes());
    } else {
        let mut header3 = payload.len() as u32;
        if self_contained {
            header3 |= SELF_CONTAINED_BIT_UNCOMPRESSED;
        }
        let crc = crc24(u64::from(header3), 3);
        out.extend_from_slice(header3.to_le_bytes().get(..3).unwrap_or_default());
        out.extend_from_slice(crc.to_le_bytes().get(..3).unwrap_or_default());
        out.extend_from_slice(payload);
        out.extend_from_slice(&crc32(payload).to_le_bytes());
    }
}

/// Lengths of the consecutive whole frames `payload` consists of, or `None`
/// if it is not exactly a sequence of frames.
fn frame_lengths(payload: &[u8]) -> Option<Vec<usize>> {
    let mut lens = Vec::new();
    let mut rest = payload;
    while !rest.is_empty() {
        let h = FrameHeader::parse(rest).ok()??;
        let len = h.frame_len();
        rest = rest.get(len..)?;
        lens.push(len);
    }
    Some(lens)
}

/// Appends `payload` (one or more whole encoded frames) as segments. Up to
/// [`MAX_PAYLOAD`] bytes make one self-contained segment. Beyond that, whole
/// frames are packed into self-contained segments and each frame larger than
/// [`MAX_PAYLOAD`] is split into non-self-contained segments of its own. (If
/// `payload` is not a sequence of frames it is simply cut into
/// non-self-contained segments.)
pub fn encode_segments(payload: &[u8], lz4: bool, out: &mut Vec<u8>) {
    if payload.len() <= MAX_PAYLOAD {
        encode_segment(payload, true, lz4, out);
        return;
    }
    let Some(lens) = frame_lengths(payload) else {
        for chunk in payload.chunks(MAX_PAYLOAD) {
            encode_segment(chunk, false, lz4, out);
        }
        return;
    };
    let mut start = 0; // start of the pending self-contained group
    let mut pos = 0;
    for len in lens {
        if len > MAX_PAYLOAD {
            if pos > start {
                encode_segment(payload.get(start..pos).unwrap_or_default(), true, lz4, out);
            }
            for chunk in payload
                .get(pos..pos + len)
                .unwrap_or_default()
                .chunks(MAX_PAYLOAD)
            {
                encode_segment(chunk, false, lz4, out);
            }
            pos += len;
            start = pos;
        } else {
            if pos + len - start > MAX_PAYLOAD {
                encode_segment(payload.get(start..pos).unwrap_or_default(), true, lz4, out);
                start = pos;
            }
            pos += len;
        }
    }
    if pos > start {
        encode_segment(payload.get(start..pos).unwrap_or_default(), true, lz4, out);
    }
}

/// Turns decoded segments back into frames: a self-contained segment must
/// hold whole frames; non-self-contained ones are accumulated until their
/// frame is complete.
///
/// A frame longer than the limit is not an end of the connection: as in
/// Cassandra, its header is reported through [`FrameReassembler::take_oversized`]
/// (the caller answers "Request is too big" on its stream) and the rest of its
/// bytes are discarded as they arrive.
#[derive(Debug)]
pub struct FrameReassembler {
    partial: BytesMut,
    max_frame_len: usize,
    /// Bytes of an oversized large frame still to be skipped.
    discarding: usize,
    oversized: Vec<(FrameHeader, ProtocolError)>,
}

impl FrameReassembler {
    /// `max_frame_len`: largest whole frame (header + body) accepted.
    pub fn new(max_frame_len: usize) -> Self {
        FrameReassembler {
            partial: BytesMut::new(),
            max_frame_len,
            discarding: 0,
            oversized: Vec::new(),
        }
    }

    /// True while a large frame is partly received (or being discarded).
    pub fn in_progress(&self) -> bool {
        !self.partial.is_empty() || self.discarding > 0
    }

    /// Frames refused for their length since the last call, with the error to
    /// answer on their stream.
    pub fn take_oversized(&mut self) -> Vec<(FrameHeader, ProtocolError)> {
        std::mem::take(&mut self.oversized)
    }

    /// Feeds one segment; returns the frames it completes, as (header, body).
    pub fn push(&mut self, seg: Segment) -> Result<Vec<(FrameHeader, Bytes)>, ProtocolError> {
        let mut frames = Vec::new();
        if seg.self_contained {
            if self.in_progress() {
                return Err(ProtocolError::Malformed(
                    "Self-contained segment received while a large frame is incomplete".into(),
                ));
            }
            let mut rest = seg.payload;
            while !rest.is_empty() {
                let h = FrameHeader::parse(&rest)?.ok_or_else(|| {
                    ProtocolError::Malformed(
                        "Incomplete frame header in self-contained segment".into(),
                    )
                })?;
                let len = h.frame_len();
                if rest.len() < len {
                    return Err(ProtocolError::Malformed(
                        "Incomplete frame in self-contained segment".into(),
                    ));
                }
                let mut frame = rest.split_to(len);
                if let Err(e) = h.check_length(self.max_frame_len) {
                    self.oversized.push((h, e));
                    continue;
                }
                frame.advance(HEADER_LEN);
                frames.push((h, frame));
            }
            return Ok(frames);
        }
        if self.discarding > 0 {
            if seg.payload.len() > self.discarding {
                return Err(ProtocolError::Malformed(
                    "Segment of a large frame holds more than that frame".into(),
                ));
            }
            self.discarding -= seg.payload.len();
            return Ok(frames);
        }
        self.partial.extend_from_slice(&seg.payload);
        if let Some(h) = FrameHeader::parse(&self.partial)? {
            let len = h.frame_len();
            if self.partial.len() > len {
                return Err(ProtocolError::Malformed(
                    "Segment of a large frame holds more than that frame".into(),
                ));
            }
            if let Err(e) = h.check_length(self.max_frame_len) {
                self.discarding = len - self.partial.len();
                self.partial = BytesMut::new();
                self.oversized.push((h, e));
                return Ok(frames);
            }
            if self.partial.len() == len {
                let mut frame = std::mem::take(&mut self.partial).freeze();
                frame.advance(HEADER_LEN);
                frames.push((h, frame));
            }
        }
        Ok(frames)
    }
}
