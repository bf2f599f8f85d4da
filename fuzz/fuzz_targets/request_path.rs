//! The whole request path: bytes from a client go through the frame decoder,
//! the request decoders, the parser, preparation and execution, against a
//! real node started once in this process (its own data directory, its CQL
//! port on 127.0.0.251). Any panic anywhere, in any of the node's threads,
//! aborts the process (libfuzzer-sys installs an aborting panic hook), and a
//! stack overflow aborts by itself; both are crashes for libFuzzer.
//!
//! The first byte of an input chooses what the rest is:
//! - 0: raw bytes sent after a correct v4 STARTUP (any frame, any opcode);
//! - 1: CQL text sent as a v4 QUERY in keyspace `fz`;
//! - 2: CQL text, a 0xFF byte, then an EXECUTE body after the statement id
//!   (consistency, flags, values...): PREPARE then EXECUTE;
//! - 3: raw bytes before any handshake;
//! - 4: raw bytes as v5 segments after a v5 STARTUP;
//! - otherwise: CQL text sent as a BATCH of one query with the rest as values.
//!
//! A QUERY, PREPARE or EXECUTE of modes 1 and 2 must be answered (a result or
//! an error) on its stream: a dropped connection or a missing answer aborts.
//!
//! The node keeps its state across inputs (what one input creates, the next
//! sees), so a crash found late may need the inputs before it; the crash
//! artifact alone reproduces most.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

const ADDRESS: &str = "127.0.0.251";

struct Fixture {
    _rt: tokio::runtime::Runtime,
    native: SocketAddr,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_stack_size(16 << 20)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir").keep();
        let config = sibyl_node::config::Config {
            listen_address: ADDRESS.into(),
            rpc_address: ADDRESS.into(),
            broadcast_address: ADDRESS.into(),
            broadcast_rpc_address: ADDRESS.into(),
            admin_address: ADDRESS.into(),
            data_file_directories: vec![dir.join("data")],
            commitlog_directory: dir.join("commitlog"),
            hints_directory: dir.join("hints"),
            metadata_directory: dir.join("metadata"),
            memtable_heap_space_bytes: 64 << 20,
            num_tokens: 4,
            ..Default::default()
        };
        let node = rt
            .block_on(sibyl_node::start(config))
            .expect("start the node");
        let native = node.native_addr;
        // the node lives as long as the process
        std::mem::forget(node);
        let f = Fixture { _rt: rt, native };
        let mut c = Client::connect(native, 4);
        for q in SCHEMA {
            let (op, body) = c.request(0x07, &query_body(q.as_bytes()));
            assert!(op == 0x08, "fixture statement failed: {q}: {body:?}");
        }
        f
    })
}

const SCHEMA: &[&str] = &[
    "CREATE KEYSPACE IF NOT EXISTS fz WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TYPE IF NOT EXISTS fz.addr (street text, zip int, tags set<text>)",
    "CREATE TABLE IF NOT EXISTS fz.t (k int, c text, v bigint, l list<int>, m map<text, blob>, s set<uuid>, \
     tu tuple<int, text>, a frozen<addr>, d decimal, vi varint, ts timestamp, st text static, \
     PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)",
    "CREATE TABLE IF NOT EXISTS fz.cnt (k text PRIMARY KEY, n counter)",
    "CREATE TABLE IF NOT EXISTS fz.vec (k int PRIMARY KEY, e vector<float, 3>, du duration, ip inet)",
    "CREATE INDEX IF NOT EXISTS ON fz.t (v)",
    "INSERT INTO fz.t (k, c, v, l, m, s, st) VALUES (1, 'a', 10, [1, 2], {'x': 0x01}, {uuid()}, 'S')",
    "UPDATE fz.cnt SET n = n + 1 WHERE k = 'one'",
];

struct Client {
    sock: TcpStream,
    version: u8,
    stream: i16,
}

fn frame(version: u8, stream: i16, opcode: u8, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(9 + body.len());
    f.push(version);
    f.push(0);
    f.extend_from_slice(&stream.to_be_bytes());
    f.push(opcode);
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(body);
    f
}

fn long_string(s: &[u8]) -> Vec<u8> {
    let mut b = (s.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(s);
    b
}

fn query_body(q: &[u8]) -> Vec<u8> {
    let mut b = long_string(q);
    b.extend_from_slice(&[0, 1, 0]); // ONE, no flags
    b
}

fn startup_body() -> Vec<u8> {
    let mut b = 1u16.to_be_bytes().to_vec();
    for s in ["CQL_VERSION", "3.0.0"] {
        b.extend_from_slice(&(s.len() as u16).to_be_bytes());
        b.extend_from_slice(s.as_bytes());
    }
    b
}

/// A v5 segment holding `payload` (uncompressed, self-contained), with its
/// header CRC24 and payload CRC32 as the protocol defines them.
fn segment(payload: &[u8]) -> Vec<u8> {
    let len = payload.len().min(0x1FFFF);
    let header: u64 = (len as u64) | (1 << 17);
    let hb = &header.to_le_bytes()[..3];
    let mut out = hb.to_vec();
    out.extend_from_slice(&crc24(hb).to_le_bytes()[..3]);
    out.extend_from_slice(&payload[..len]);
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xFA, 0x2D, 0x55, 0xCA]);
    h.update(&payload[..len]);
    out.extend_from_slice(&h.finalize().to_le_bytes());
    out
}

fn crc24(bytes: &[u8]) -> u32 {
    let mut crc: u32 = 0x875060;
    for &b in bytes {
        crc ^= (b as u32) << 16;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x1000000 != 0 {
                crc ^= 0x1974F0B;
            }
        }
    }
    crc & 0xFFFFFF
}

impl Client {
    fn connect(addr: SocketAddr, version: u8) -> Client {
        let sock = TcpStream::connect(addr).expect("the node accepts connections");
        sock.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        sock.set_nodelay(true).unwrap();
        let mut c = Client {
            sock,
            version,
            stream: 1,
        };
        let (op, _) = c.request(0x01, &startup_body());
        assert_eq!(op, 0x02, "STARTUP answered READY");
        c
    }

    /// Sends one request and waits for the answer on its stream.
    fn request(&mut self, opcode: u8, body: &[u8]) -> (u8, Vec<u8>) {
        self.stream = self.stream.wrapping_add(1).max(1);
        let stream = self.stream;
        let f = frame(self.version, stream, opcode, body);
        // v5 switches to segments after READY
        let bytes = if self.version == 5 && opcode != 0x01 {
            segment(&f)
        } else {
            f
        };
        self.sock
            .write_all(&bytes)
            .expect("the node reads requests");
        loop {
            let (s, op, body) = self.read_frame().unwrap_or_else(|| {
                panic!("no answer to opcode {opcode:#x}: the connection was dropped")
            });
            if s == stream {
                return (op, body);
            }
        }
    }

    fn read_exact(&mut self, n: usize) -> Option<Vec<u8>> {
        let mut b = vec![0; n];
        self.sock.read_exact(&mut b).ok()?;
        Some(b)
    }

    /// One frame; in v5 after READY, frames come inside segments.
    fn read_frame(&mut self) -> Option<(i16, u8, Vec<u8>)> {
        if self.version == 5 && self.stream > 2 {
            let h = self.read_exact(6)?;
            let header = u32::from_le_bytes([h[0], h[1], h[2], 0]);
            let len = (header & 0x1FFFF) as usize;
            let payload = self.read_exact(len + 4)?;
            let p = &payload[..len];
            if p.len() < 9 {
                return None;
            }
            let blen = u32::from_be_bytes([p[5], p[6], p[7], p[8]]) as usize;
            let body = p.get(9..9 + blen)?.to_vec();
            return Some((i16::from_be_bytes([p[2], p[3]]), p[4], body));
        }
        let h = self.read_exact(9)?;
        let len = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) as usize;
        let body = self.read_exact(len)?;
        Some((i16::from_be_bytes([h[2], h[3]]), h[4], body))
    }

    /// Sends raw bytes, half-closes, and reads whatever comes back until the
    /// node closes the connection (it does once every answer is written).
    fn raw(mut self, bytes: &[u8]) {
        if self.sock.write_all(bytes).is_err() {
            return;
        }
        let _ = self.sock.shutdown(Shutdown::Write);
        let mut sink = [0u8; 64 * 1024];
        while let Ok(n) = self.sock.read(&mut sink) {
            if n == 0 {
                break;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode {
        0 => Client::connect(f.native, 4).raw(rest),
        1 => {
            let mut c = Client::connect(f.native, 4);
            c.request(0x07, &query_body(b"USE fz"));
            let (op, _) = c.request(0x07, &query_body(rest));
            assert!(op == 0x00 || op == 0x08, "QUERY answered opcode {op:#x}");
        }
        2 => {
            let split = rest.iter().position(|&b| b == 0xFF).unwrap_or(rest.len());
            let (text, params) = (&rest[..split], rest.get(split + 1..).unwrap_or(&[]));
            let mut c = Client::connect(f.native, 4);
            c.request(0x07, &query_body(b"USE fz"));
            let (op, body) = c.request(0x09, &long_string(text));
            assert!(op == 0x00 || op == 0x08, "PREPARE answered opcode {op:#x}");
            // RESULT kind 4 (prepared): [int kind][short bytes id]...
            if op == 0x08 && body.len() >= 6 && body[..4] == [0, 0, 0, 4] {
                let n = u16::from_be_bytes([body[4], body[5]]) as usize;
                if let Some(id) = body.get(4..6 + n) {
                    let mut b = id.to_vec();
                    b.extend_from_slice(params);
                    let (op, _) = c.request(0x0A, &b);
                    assert!(op == 0x00 || op == 0x08, "EXECUTE answered opcode {op:#x}");
                }
            }
        }
        3 => {
            let sock = match TcpStream::connect(f.native) {
                Ok(s) => s,
                Err(_) => return,
            };
            sock.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            Client {
                sock,
                version: 4,
                stream: 0,
            }
            .raw(rest)
        }
        4 => {
            let c = Client::connect(f.native, 5);
            let mut segs = Vec::new();
            for chunk in rest.chunks(0x1FFFF) {
                segs.extend(segment(chunk));
            }
            // half the time the payload's own bytes, framed as segments; the
            // other half as is (so the segment decoder is fuzzed too)
            if rest.len() % 2 == 0 {
                c.raw(&segs)
            } else {
                c.raw(rest)
            }
        }
        _ => {
            let split = rest.iter().position(|&b| b == 0xFF).unwrap_or(rest.len());
            let (text, values) = (&rest[..split], rest.get(split + 1..).unwrap_or(&[]));
            let mut c = Client::connect(f.native, 4);
            c.request(0x07, &query_body(b"USE fz"));
            // BATCH: type, n=1, kind 0 (query), the text, the values as sent
            let mut b = vec![mode % 3, 0, 1, 0];
            b.extend(long_string(text));
            b.extend_from_slice(values);
            let (op, _) = c.request(0x0D, &b);
            assert!(op == 0x00 || op == 0x08, "BATCH answered opcode {op:#x}");
        }
    }
});
