//! Timeuuids (version 1 UUIDs) and write timestamps.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use uuid::Uuid;

/// 100-ns intervals between 1582-10-15 and 1970-01-01.
const GREGORIAN_OFFSET: i64 = 0x01b21dd213814000;

static LAST_TICKS: AtomicI64 = AtomicI64::new(0);
static LAST_MICROS: AtomicI64 = AtomicI64::new(0);

fn unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Microseconds since the epoch, strictly increasing within the process
/// (Cassandra's `FBUtilities.timestampMicros` behaviour for write timestamps).
pub fn timestamp_micros_now() -> i64 {
    let now = unix_nanos() / 1000;
    let mut last = LAST_MICROS.load(Ordering::Relaxed);
    loop {
        let next = if now > last { now } else { last + 1 };
        match LAST_MICROS.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(x) => last = x,
        }
    }
}

fn node_and_clock() -> (u16, [u8; 6]) {
    use std::sync::OnceLock;
    static NODE: OnceLock<(u16, [u8; 6])> = OnceLock::new();
    *NODE.get_or_init(|| {
        let mut n: [u8; 6] = rand::random();
        n[0] |= 0x01; // multicast bit: a random node id
        (rand::random::<u16>() & 0x3fff, n)
    })
}

fn from_ticks(ticks: i64, clock_seq: u16, node: [u8; 6]) -> Uuid {
    let t = ticks as u64;
    let time_low = (t & 0xffff_ffff) as u32;
    let time_mid = ((t >> 32) & 0xffff) as u16;
    let time_hi = (((t >> 48) & 0x0fff) as u16) | 0x1000;
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&time_low.to_be_bytes());
    b[4..6].copy_from_slice(&time_mid.to_be_bytes());
    b[6..8].copy_from_slice(&time_hi.to_be_bytes());
    b[8] = ((clock_seq >> 8) as u8 & 0x3f) | 0x80;
    b[9] = clock_seq as u8;
    b[10..16].copy_from_slice(&node);
    Uuid::from_bytes(b)
}

/// A new version-1 UUID, unique and increasing within the process.
pub fn now_timeuuid() -> Uuid {
    let now = unix_nanos() / 100 + GREGORIAN_OFFSET;
    let mut last = LAST_TICKS.load(Ordering::Relaxed);
    let ticks = loop {
        let next = if now > last { now } else { last + 1 };
        match LAST_TICKS.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(x) => last = x,
        }
    };
    let (cs, node) = node_and_clock();
    from_ticks(ticks, cs, node)
}

/// A version-1 UUID of this process at `micros` (Unix microseconds), as
/// Cassandra makes Paxos ballots.
pub fn timeuuid_at_micros(micros: i64) -> Uuid {
    let (cs, node) = node_and_clock();
    from_ticks(
        micros.wrapping_mul(10).wrapping_add(GREGORIAN_OFFSET),
        cs,
        node,
    )
}

/// Unix microseconds of a v1 UUID.
pub fn timeuuid_timestamp_micros(u: &[u8; 16]) -> i64 {
    (timeuuid_ticks(u) - GREGORIAN_OFFSET).div_euclid(10)
}

/// The 60-bit timestamp of a v1 UUID, in 100-ns units since 1582.
pub fn timeuuid_ticks(u: &[u8; 16]) -> i64 {
    let time_low = u32::from_be_bytes([u[0], u[1], u[2], u[3]]) as i64;
    let time_mid = u16::from_be_bytes([u[4], u[5]]) as i64;
    let time_hi = (u16::from_be_bytes([u[6], u[7]]) & 0x0fff) as i64;
    (time_hi << 48) | (time_mid << 32) | time_low
}

/// Unix milliseconds of a v1 UUID.
pub fn timeuuid_timestamp_millis(u: &[u8; 16]) -> i64 {
    (timeuuid_ticks(u) - GREGORIAN_OFFSET).div_euclid(10_000)
}

/// Cassandra's `minTimeuuid(millis)`: the smallest timeuuid of that millisecond.
pub fn min_timeuuid(millis: i64) -> Uuid {
    let ticks = millis.wrapping_mul(10_000).wrapping_add(GREGORIAN_OFFSET);
    // lsb 0x8080808080808080: the smallest as TimeUUIDType compares it (signed bytes)
    let mut u = *from_ticks(ticks, 0, [0; 6]).as_bytes();
    u[8..16].copy_from_slice(&[0x80; 8]);
    Uuid::from_bytes(u)
}

/// Cassandra's `maxTimeuuid(millis)`: the largest timeuuid of that millisecond.
pub fn max_timeuuid(millis: i64) -> Uuid {
    let ticks = millis
        .wrapping_add(1)
        .wrapping_mul(10_000)
        .wrapping_add(GREGORIAN_OFFSET)
        .wrapping_sub(1);
    // lsb 0x7f7f7f7f7f7f7f7f: the largest as TimeUUIDType compares it
    let mut u = *from_ticks(ticks, 0, [0; 6]).as_bytes();
    u[8..16].copy_from_slice(&[0x7f; 8]);
    Uuid::from_bytes(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeuuids_increase_and_carry_their_time() {
        let a = now_timeuuid();
        let b = now_timeuuid();
        assert_eq!(a.get_version_num(), 1);
        assert!(timeuuid_ticks(b.as_bytes()) > timeuuid_ticks(a.as_bytes()));
        let ms = timeuuid_timestamp_millis(a.as_bytes());
        let now = unix_nanos() / 1_000_000;
        assert!((now - ms).abs() < 5000);
        assert_eq!(
            timeuuid_timestamp_millis(min_timeuuid(1000).as_bytes()),
            1000
        );
        assert_eq!(
            timeuuid_timestamp_millis(max_timeuuid(1000).as_bytes()),
            1000
        );
        assert_eq!(
            min_timeuuid(0).to_string(),
            "13814000-1dd2-11b2-8080-808080808080"
        );
        assert_eq!(
            max_timeuuid(0).to_string(),
            "1381670f-1dd2-11b2-7f7f-7f7f7f7f7f7f"
        );
        assert_eq!(
            timeuuid_ticks(max_timeuuid(0).as_bytes()) - timeuuid_ticks(min_timeuuid(0).as_bytes()),
            9_999
        );
        let _ = min_timeuuid(i64::MAX);
        let _ = max_timeuuid(i64::MIN);
        let t1 = timestamp_micros_now();
        assert!(timestamp_micros_now() > t1);
    }
}
