//! The record framing every file of the metadata directory uses, and
//! crash-safe file replacement.
//!
//! A record is
//!
//! ```text
//! u32 BE  body length
//! u32 BE  crc32 of the four length bytes
//! body:   u8 format version (1), u8 record kind, payload
//! u32 BE  crc32 of the body
//! ```
//!
//! The length has its own checksum so that a damaged length is caught where
//! it is, instead of sending the reader past the end of the file, where it
//! would look like a torn tail and valid records after it would be dropped.
//!
//! Reading a file of records: a record cut short by the end of the file, or a
//! last record whose body checksum fails, is a write torn by a crash (it was
//! never acknowledged: every append is fsynced before it is) and is cut off
//! with a warning. Any other damage is a [`TcmError::Corrupt`] naming the
//! file and the offset of the damaged record.

use crate::error::TcmError;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The format version of every record this build writes and reads.
pub(crate) const RECORD_VERSION: u8 = 1;

const HEADER_LEN: usize = 8;
const TRAILER_LEN: usize = 4;

/// A record bigger than this is damage, not data (a snapshot of the cluster
/// metadata is far smaller).
const MAX_BODY_LEN: usize = 1 << 30;

/// The kinds of record, one numbering for all files so a misplaced file is
/// recognised.
pub(crate) mod kind {
    /// A Raft log entry (file `log`).
    pub const ENTRY: u8 = 1;
    /// The last log id purged after a snapshot (file `log`).
    pub const PURGED: u8 = 2;
    /// The last committed log id (file `log`).
    pub const COMMITTED: u8 = 3;
    /// The Raft vote (file `vote`).
    pub const VOTE: u8 = 4;
    /// A snapshot of the state machine (file `snapshot`).
    pub const SNAPSHOT: u8 = 5;
    /// The node id and directory incarnation (file `identity`).
    pub const IDENTITY: u8 = 6;
}

/// Frames one record.
pub(crate) fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    let body_len = payload.len() + 2;
    let mut out = Vec::with_capacity(HEADER_LEN + body_len + TRAILER_LEN);
    let len = (body_len as u32).to_be_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc32fast::hash(&len).to_be_bytes());
    let body_start = out.len();
    out.push(RECORD_VERSION);
    out.push(kind);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out[body_start..]);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// Where the record starts in its file.
    pub offset: u64,
    /// Its kind.
    pub kind: u8,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// The records of a file, and where a torn tail starts if there is one.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub records: Vec<Record>,
    /// The length of the valid prefix when the file ends in a torn record.
    pub torn_at: Option<u64>,
}

fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

/// Reads the records of `bytes`, the content of `path`.
pub(crate) fn scan(path: &Path, bytes: &[u8]) -> Result<Scan, TcmError> {
    let corrupt = |offset: usize, reason: String| TcmError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason,
    };
    let mut out = Scan::default();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < HEADER_LEN {
            out.torn_at = Some(pos as u64);
            break;
        }
        let len = be_u32(&rest[0..4]) as usize;
        if crc32fast::hash(&rest[0..4]) != be_u32(&rest[4..8]) {
            // A crash can leave zeros where the file was extended but the data
            // not written; anything else in a length is damage.
            if rest.iter().all(|b| *b == 0) {
                out.torn_at = Some(pos as u64);
                break;
            }
            return Err(corrupt(pos, "record length checksum mismatch".to_string()));
        }
        if !(2..=MAX_BODY_LEN).contains(&len) {
            return Err(corrupt(pos, format!("impossible record length {len}")));
        }
        let total = HEADER_LEN + len + TRAILER_LEN;
        if rest.len() < total {
            out.torn_at = Some(pos as u64);
            break;
        }
        let body = &rest[HEADER_LEN..HEADER_LEN + len];
        if crc32fast::hash(body) != be_u32(&rest[HEADER_LEN + len..]) {
            if rest.len() == total {
                out.torn_at = Some(pos as u64);
                break;
            }
            return Err(corrupt(pos, "record checksum mismatch".to_string()));
        }
        if body[0] != RECORD_VERSION {
            return Err(corrupt(
                pos,
                format!(
                    "record format version {} (this build reads version {RECORD_VERSION})",
                    body[0]
                ),
            ));
        }
        out.records.push(Record {
            offset: pos as u64,
            kind: body[1],
            payload: body[2..].to_vec(),
        });
        pos += total;
    }
    Ok(out)
}

/// Reads a file that holds exactly one record (replaced atomically, so it is
/// never torn); `None` when the file does not exist.
pub(crate) fn read_single(path: &Path, expected_kind: u8) -> Result<Option<Record>, TcmError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TcmError::io(path, e)),
    };
    let scan = scan(path, &bytes)?;
    if let Some(at) = scan.torn_at {
        return Err(TcmError::Corrupt {
            path: path.to_path_buf(),
            offset: at,
            reason: "incomplete record in a file that is only ever replaced whole".to_string(),
        });
    }
    let mut records = scan.records.into_iter();
    match (records.next(), records.next()) {
        (Some(r), None) if r.kind == expected_kind => Ok(Some(r)),
        (Some(r), None) => Err(TcmError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            reason: format!(
                "record of kind {} where kind {expected_kind} belongs",
                r.kind
            ),
        }),
        (None, _) => Err(TcmError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            reason: "empty file".to_string(),
        }),
        (Some(_), Some(r)) => Err(TcmError::Corrupt {
            path: path.to_path_buf(),
            offset: r.offset,
            reason: "more than one record in a single-record file".to_string(),
        }),
    }
}

/// The name of the temporary file `path` is written through.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or the
/// new content: write a temporary file, fsync it, rename it over, fsync the
/// directory (which makes the rename durable).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    sync_dir(path)
}

/// Fsyncs the directory holding `path`.
pub(crate) fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

/// Cuts `path` to `len` bytes and fsyncs it (the repair of a torn tail).
pub(crate) fn truncate_file(path: &Path, len: u64) -> std::io::Result<()> {
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(len)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("/x/log")
    }

    #[test]
    fn record_bytes_are_fixed() {
        // Exact bytes: a change here is a new on-disk format and needs a new version.
        let r = encode(kind::VOTE, b"ab");
        assert_eq!(
            r,
            vec![
                0, 0, 0, 4, // body length
                0x26, 0x29, 0x1b, 0x05, // crc32 of the length
                1, 4, b'a', b'b', // version, kind, payload
                0x41, 0xab, 0x4a, 0x37, // crc32 of the body
            ]
        );
        let s = scan(p(), &r).unwrap();
        assert_eq!(s.torn_at, None);
        assert_eq!(
            s.records,
            vec![Record {
                offset: 0,
                kind: 4,
                payload: b"ab".to_vec()
            }]
        );
    }

    #[test]
    fn torn_tail_is_reported_as_torn_not_corrupt() {
        let mut f = encode(1, b"first");
        let second = encode(1, b"second");
        let good = f.len() as u64;
        // every proper prefix of the second record is a torn tail
        for cut in 1..second.len() {
            let mut b = f.clone();
            b.extend_from_slice(&second[..cut]);
            let s = scan(p(), &b).unwrap();
            assert_eq!(s.records.len(), 1, "cut {cut}");
            assert_eq!(s.torn_at, Some(good), "cut {cut}");
        }
        // a complete last record with a bad checksum is torn too
        let mut b = f.clone();
        let mut bad = second.clone();
        let n = bad.len();
        bad[n - 6] ^= 0xff;
        b.extend_from_slice(&bad);
        assert_eq!(scan(p(), &b).unwrap().torn_at, Some(good));
        // zeros after the last record
        f.extend_from_slice(&[0u8; 40]);
        assert_eq!(scan(p(), &f).unwrap().torn_at, Some(good));
    }

    #[test]
    fn damage_before_the_last_record_is_corrupt() {
        let a = encode(1, b"first");
        let b = encode(1, b"second");
        let c = encode(1, b"third");
        let at = a.len();
        for flip in [0, 3, 5, 9, 12, b.len() - 1] {
            let mut bytes = [a.clone(), b.clone(), c.clone()].concat();
            bytes[at + flip] ^= 0x40;
            match scan(p(), &bytes) {
                Err(TcmError::Corrupt { path, offset, .. }) => {
                    assert_eq!(path, p());
                    assert_eq!(offset, at as u64, "flip {flip}");
                }
                other => panic!("flip {flip}: {other:?}"),
            }
        }
    }

    #[test]
    fn newer_record_version_is_refused() {
        let mut r = encode(1, b"x");
        r[8] = 2;
        let crc = crc32fast::hash(&r[8..r.len() - 4]).to_be_bytes();
        let n = r.len();
        r[n - 4..].copy_from_slice(&crc);
        let err = scan(p(), &r).unwrap_err().to_string();
        assert!(err.contains("format version 2"), "{err}");
    }
}
