//! When each token range of a table was last repaired on this node, for
//! `tombstone_gc = {'mode': 'repair'}` (ScyllaDB's option): a tombstone is
//! purged only once a repair that started after it was written has finished
//! for its range, so that a replica that missed the delete gets it before
//! the others forget it, whatever `gc_grace_seconds` says.
//!
//! Kept in the table's directory as `repaired_ranges` (format version line,
//! then one `start end repaired_at` line per range), replaced atomically.

use std::path::{Path, PathBuf};

const FILE: &str = "repaired_ranges";
const VERSION: &str = "sibyl-repaired-ranges 1";

/// How a table's tombstones become purgeable (`tombstone_gc`'s mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TombstoneGc {
    /// After `gc_grace_seconds` (Cassandra's rule).
    #[default]
    Timeout,
    /// Once a repair started after the deletion has finished for its range.
    Repair,
    /// Never.
    Disabled,
    /// At once (data that is never deleted, only expires).
    Immediate,
}

impl TombstoneGc {
    /// The mode a `tombstone_gc` option names.
    pub fn parse(mode: &str) -> Option<TombstoneGc> {
        Some(match mode.to_ascii_lowercase().as_str() {
            "timeout" => TombstoneGc::Timeout,
            "repair" => TombstoneGc::Repair,
            "disabled" => TombstoneGc::Disabled,
            "immediate" => TombstoneGc::Immediate,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            TombstoneGc::Timeout => "timeout",
            TombstoneGc::Repair => "repair",
            TombstoneGc::Disabled => "disabled",
            TombstoneGc::Immediate => "immediate",
        }
    }
}

/// Repaired ranges `(start, end]` of one table with the time (seconds) the
/// repair that covered them started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairedRanges {
    ranges: Vec<(i64, i64, i32)>,
}

/// `(start, end]` as non-wrapping pieces (the whole ring when
/// `start == end`).
pub fn pieces((start, end): (i64, i64)) -> Vec<(i64, i64)> {
    if start < end {
        vec![(start, end)]
    } else if end == i64::MIN {
        vec![(start, i64::MAX)]
    } else {
        vec![(start, i64::MAX), (i64::MIN, end)]
    }
}

impl RepairedRanges {
    fn path(dir: &Path) -> PathBuf {
        dir.join(FILE)
    }

    /// What the table's directory records (nothing when the file is
    /// missing or unreadable: then nothing counts as repaired, the safe
    /// side).
    pub fn load(dir: &Path) -> RepairedRanges {
        let Ok(text) = std::fs::read_to_string(Self::path(dir)) else {
            return RepairedRanges::default();
        };
        let mut lines = text.lines();
        if lines.next() != Some(VERSION) {
            tracing::warn!(
                "{}: unknown format; the table's ranges count as never repaired",
                Self::path(dir).display()
            );
            return RepairedRanges::default();
        }
        let ranges = lines
            .filter_map(|l| {
                let mut f = l.split_whitespace().map(str::parse::<i64>);
                match (f.next(), f.next(), f.next()) {
                    (Some(Ok(a)), Some(Ok(b)), Some(Ok(at))) => Some((a, b, at as i32)),
                    _ => None,
                }
            })
            .collect();
        RepairedRanges { ranges }
    }

    /// Records `ranges` as repaired by a repair that started at `at`, and
    /// writes the file (temporary file, fsync, rename).
    pub fn mark(&mut self, dir: &Path, ranges: &[(i64, i64)], at: i32) -> std::io::Result<()> {
        for r in ranges {
            for (a, b) in pieces(*r) {
                self.ranges.push((a, b, at));
            }
        }
        self.compact();
        let mut text = String::from(VERSION);
        text.push('\n');
        for (a, b, at) in &self.ranges {
            text.push_str(&format!("{a} {b} {at}\n"));
        }
        let tmp = dir.join(format!("{FILE}.tmp"));
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, Self::path(dir))
    }

    /// Drops pieces that a later repair of a piece holding them supersedes.
    fn compact(&mut self) {
        let all = std::mem::take(&mut self.ranges);
        for (i, (a, b, at)) in all.iter().enumerate() {
            let covered = all.iter().enumerate().any(|(j, (c, d, later))| {
                j != i && c <= a && b <= d && (later > at || (later == at && j < i))
            });
            if !covered {
                self.ranges.push((*a, *b, *at));
            }
        }
    }

    /// The start of the latest repair that covered `token` (`i32::MIN`
    /// when none did).
    pub fn repaired_at(&self, token: i64) -> i32 {
        self.ranges
            .iter()
            .filter(|(a, b, _)| *a < token && token <= *b)
            .map(|(_, _, at)| *at)
            .max()
            .unwrap_or(i32::MIN)
    }

    /// The oldest repair time over the whole ring (`i32::MIN` when some
    /// token was never repaired): what holds for every partition.
    pub fn repaired_everywhere_at(&self) -> i32 {
        // the ring's boundaries, where the repaired time can change
        let mut cuts: Vec<i64> = self.ranges.iter().flat_map(|(a, b, _)| [*a, *b]).collect();
        cuts.push(i64::MIN);
        cuts.push(i64::MAX);
        cuts.sort_unstable();
        cuts.dedup();
        cuts.windows(2)
            .map(|w| self.repaired_at(w[1]))
            .min()
            .unwrap_or(i32::MIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_repair_of_a_token_counts_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = RepairedRanges::load(dir.path());
        assert_eq!(r.repaired_at(5), i32::MIN);
        r.mark(dir.path(), &[(0, 10)], 100).unwrap();
        r.mark(dir.path(), &[(0, 100)], 200).unwrap();
        r.mark(dir.path(), &[(50, 60)], 150).unwrap();
        assert_eq!(r.repaired_at(5), 200);
        assert_eq!(r.repaired_at(55), 200);
        assert_eq!(r.repaired_at(0), i32::MIN, "(start, end]: start excluded");
        assert_eq!(r.repaired_at(101), i32::MIN);
        // (0, 10] at 100 and (50, 60] at 150 are superseded by (0, 100] at 200
        assert_eq!(r.ranges.len(), 1);
        let back = RepairedRanges::load(dir.path());
        assert_eq!(back, r);
        assert_eq!(back.repaired_everywhere_at(), i32::MIN);
    }

    #[test]
    fn a_range_that_wraps_covers_both_ends_of_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = RepairedRanges::default();
        r.mark(dir.path(), &[(100, -100)], 7).unwrap();
        assert_eq!(r.repaired_at(i64::MAX), 7);
        assert_eq!(r.repaired_at(i64::MIN + 1), 7);
        assert_eq!(r.repaired_at(0), i32::MIN);
        r.mark(dir.path(), &[(-100, 100)], 9).unwrap();
        assert_eq!(r.repaired_everywhere_at(), 7);
    }

    #[test]
    fn an_unknown_file_counts_as_nothing_repaired() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "something else\n1 2 3\n").unwrap();
        assert_eq!(RepairedRanges::load(dir.path()).repaired_at(2), i32::MIN);
    }
}
