//! Numbers and sizes printed as Cassandra prints them in its logs and in
//! nodetool (`FBUtilities.prettyPrint*`, `FileUtils.stringifyFileSize`,
//! Java's `%.Nf` and `%,d`), so that lines operators grep for read the same.

/// Java's `String.format("%.{digits}f", v)`: Java rounds the shortest
/// decimal form of the double (what `Double.toString` prints) half up, so
/// 0.15 prints as 0.2 with one digit where the exact binary value would
/// round down. `NaN` and the infinities as Java prints them.
pub fn java_fixed(v: f64, digits: usize) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // the shortest round-trip digits and exponent: d.ddd e X
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let digits_only: Vec<u8> = mantissa
        .bytes()
        .filter(|b| *b != b'.')
        .map(|b| b - b'0')
        .collect();
    // the value is 0.d1d2d3... x 10^(exp+1); keep the digits before the
    // point and `digits` after it
    let int_len = exp + 1;
    let keep = int_len + digits as i32;
    let mut kept: Vec<u8> = if keep <= 0 {
        Vec::new()
    } else {
        (0..keep as usize)
            .map(|i| digits_only.get(i).copied().unwrap_or(0))
            .collect()
    };
    let first_dropped = if keep < 0 {
        0
    } else {
        digits_only.get(keep as usize).copied().unwrap_or(0)
    };
    if first_dropped >= 5 {
        // carry
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    // lay out the kept digits with `digits` of them after the point
    let total = kept.len().max(digits + 1);
    let mut padded = vec![0u8; total - kept.len()];
    padded.extend(kept);
    let split = padded.len() - digits;
    let int_part: String = padded[..split].iter().map(|d| (b'0' + d) as char).collect();
    let frac: String = padded[split..].iter().map(|d| (b'0' + d) as char).collect();
    let negative = v.is_sign_negative() && padded.iter().any(|d| *d != 0);
    let sign = if negative { "-" } else { "" };
    if digits == 0 {
        format!("{sign}{int_part}")
    } else {
        format!("{sign}{int_part}.{frac}")
    }
}

/// Java's `Double.toString` (`64.0`, `1.0E-4`).
pub fn java_double(v: f64) -> String {
    crate::marshal::java_double(v)
}

/// Java's `%,d`: thousands separated by commas.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

const UNIT_PREFIXES: &[u8] = b"qryzafpnum KMGTPEZYRQ";
const UNIT_PREFIXES_BASE: i32 = 10;

/// `FBUtilities.prettyPrintMemory`: bytes with binary prefixes, three
/// decimals (`838B`, `1.748MiB`).
pub fn memory(size: i64) -> String {
    let prefix = (63 - size.unsigned_abs().leading_zeros() as i32) / 10;
    if size == 0 || prefix == 0 {
        format!("{size}B")
    } else {
        format!(
            "{}{}iB",
            java_fixed(size as f64 / 2f64.powi(prefix * 10), 3),
            UNIT_PREFIXES[(UNIT_PREFIXES_BASE + prefix) as usize] as char
        )
    }
}

/// `FBUtilities.prettyPrintBinary`: a value with binary prefixes and `unit`.
pub fn binary(value: f64, unit: &str) -> String {
    if !value.is_finite() || value == 0.0 {
        return format!("{}{unit}", java_fixed(value, 3));
    }
    // Math.getExponent: the unbiased binary exponent
    let exponent = ((value.abs().to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let prefix = exponent.div_euclid(10);
    if prefix == 0 {
        format!("{}{unit}", java_fixed(value, 3))
    } else if !(-UNIT_PREFIXES_BASE..=UNIT_PREFIXES_BASE).contains(&prefix) {
        format!(
            "{}*2^{:+}{unit}",
            java_fixed(value / 2f64.powi(prefix * 10), 3),
            prefix * 10
        )
    } else {
        format!(
            "{}{}i{unit}",
            java_fixed(value / 2f64.powi(prefix * 10), 3),
            UNIT_PREFIXES[(UNIT_PREFIXES_BASE + prefix) as usize] as char
        )
    }
}

/// `FBUtilities.prettyPrintMemoryPerSecond(bytes, nanos)`.
pub fn memory_per_second(bytes: u64, nanos: u64) -> String {
    binary(bytes as f64 * 1.0e9 / nanos.max(1) as f64, "B/s")
}

/// Commons Lang's `DurationFormatUtils.formatDurationWords(ms, true, true)`
/// (Cassandra's repair messages): `0 seconds`, `1 second`, `1 minute 5
/// seconds`, `1 hour 0 minutes 5 seconds`, `2 days`.
pub fn duration_words(millis: u64) -> String {
    let secs = millis / 1000;
    let parts = [
        (secs / 86_400, "day"),
        (secs / 3600 % 24, "hour"),
        (secs / 60 % 60, "minute"),
        (secs % 60, "second"),
    ];
    let first = parts
        .iter()
        .position(|p| p.0 > 0)
        .unwrap_or(parts.len() - 1);
    let last = parts
        .iter()
        .rposition(|p| p.0 > 0)
        .unwrap_or(parts.len() - 1);
    parts[first..=last.max(first)]
        .iter()
        .map(|(n, unit)| format!("{n} {unit}{}", if *n == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `FileUtils.stringifyFileSize`: at most two decimals, none when they
/// are zero (`DecimalFormat("#.##")`), with KiB, MiB, GiB or TiB.
pub fn file_size(value: f64) -> String {
    const UNITS: [(f64, &str); 4] = [
        (1024.0 * 1024.0 * 1024.0 * 1024.0, "TiB"),
        (1024.0 * 1024.0 * 1024.0, "GiB"),
        (1024.0 * 1024.0, "MiB"),
        (1024.0, "KiB"),
    ];
    for (size, unit) in UNITS {
        if value >= size {
            return format!("{} {unit}", two_decimals_at_most(value / size));
        }
    }
    format!("{} bytes", two_decimals_at_most(value))
}

/// `DecimalFormat("#.##")`: half-even on the exact value, trailing zeros
/// and a bare point dropped.
fn two_decimals_at_most(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_fixed_rounds_the_shortest_form_half_up() {
        assert_eq!(java_fixed(0.15, 1), "0.2");
        assert_eq!(java_fixed(1.0625, 3), "1.063");
        assert_eq!(java_fixed(2.5, 0), "3");
        assert_eq!(java_fixed(-2.5, 0), "-3");
        assert_eq!(java_fixed(0.0004, 3), "0.000");
        assert_eq!(java_fixed(-0.0004, 3), "0.000");
        assert_eq!(java_fixed(9.9996, 3), "10.000");
        assert_eq!(java_fixed(123456.0, 0), "123456");
        assert_eq!(java_fixed(0.0, 2), "0.00");
        assert_eq!(java_fixed(1e-7, 3), "0.000");
        assert_eq!(java_fixed(f64::NAN, 0), "NaN");
        assert_eq!(java_fixed(1.854, 3), "1.854");
    }

    #[test]
    fn sizes_as_cassandra_prints_them() {
        // from Cassandra 5.0.4's system.log and nodetool
        assert_eq!(memory(436), "436B");
        assert_eq!(memory(0), "0B");
        assert_eq!(memory(2009), "1.962KiB");
        assert_eq!(memory(1_833_000), "1.748MiB");
        assert_eq!(thousands(942), "942");
        assert_eq!(thousands(160_000), "160,000");
        assert_eq!(thousands(-1_234_567), "-1,234,567");
        assert_eq!(file_size(838.0), "838 bytes");
        assert_eq!(file_size(454_290_191.0), "433.24 MiB");
        assert_eq!(file_size(1536.0), "1.5 KiB");
        assert_eq!(file_size(1024.0), "1 KiB");
        assert_eq!(memory_per_second(1_833_000, 942_000_000), "1.856MiB/s");
        assert_eq!(binary(512.0, "B/s"), "512.000B/s");
        assert_eq!(binary(0.0, "B/s"), "0.000B/s");
        assert_eq!(duration_words(0), "0 seconds");
        assert_eq!(duration_words(1_500), "1 second");
        assert_eq!(duration_words(65_000), "1 minute 5 seconds");
        assert_eq!(duration_words(3_605_000), "1 hour 0 minutes 5 seconds");
        assert_eq!(duration_words(2 * 86_400_000), "2 days");
    }
}
