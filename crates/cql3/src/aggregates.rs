//! Cassandra's native aggregate functions (`AggregateFcts`): `count(*)`,
//! `count`, `min`, `max`, `sum` and `avg`, over any selector expression.

use bigdecimal::BigDecimal;
use bytes::Bytes;
use num_bigint::BigInt;
use sibyl_types::CqlType;
use std::cmp::Ordering;

/// Which aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    CountRows,
    Count,
    Min,
    Max,
    Sum,
    Avg,
}

impl AggKind {
    pub fn of(name: &str) -> Option<AggKind> {
        Some(match name {
            "count" => AggKind::Count,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            "sum" => AggKind::Sum,
            "avg" => AggKind::Avg,
            _ => return None,
        })
    }
}

/// The state of one aggregate over the rows of a group.
#[derive(Debug, Clone, Default)]
pub struct AggState {
    /// Rows (count(*)) or non-null inputs (the others).
    n: i64,
    best: Option<Bytes>,
    isum: i128,
    fsum: f64,
    bsum: BigInt,
    dsum: BigDecimal,
    /// Cassandra's running decimal mean.
    davg: BigDecimal,
}

fn int_of(v: &[u8]) -> i128 {
    let mut x: i128 = if v.first().is_some_and(|b| b & 0x80 != 0) {
        -1
    } else {
        0
    };
    for b in v {
        x = (x << 8) | i128::from(*b);
    }
    x
}

fn decimal_of(v: &[u8]) -> Option<BigDecimal> {
    let scale = i32::from_be_bytes(v.get(..4)?.try_into().ok()?);
    Some(BigDecimal::new(
        BigInt::from_signed_bytes_be(&v[4..]),
        i64::from(scale),
    ))
}

fn decimal_bytes(d: &BigDecimal) -> Bytes {
    let (unscaled, scale) = d.as_bigint_and_exponent();
    let mut out = (scale as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&unscaled.to_signed_bytes_be());
    Bytes::from(out)
}

fn float_of(t: &CqlType, v: &[u8]) -> Option<f64> {
    match t {
        CqlType::Float => Some(f64::from(f32::from_be_bytes(v.try_into().ok()?))),
        CqlType::Double => Some(f64::from_be_bytes(v.try_into().ok()?)),
        _ => None,
    }
}

impl AggState {
    /// Adds one row's input (`v`: the argument's value; none for `count(*)`).
    pub fn add(&mut self, kind: AggKind, t: &CqlType, v: Option<&Bytes>) {
        if kind == AggKind::CountRows {
            self.n += 1;
            return;
        }
        let Some(v) = v else { return };
        match kind {
            AggKind::Count => self.n += 1,
            AggKind::Min | AggKind::Max => {
                let better = match &self.best {
                    None => true,
                    Some(cur) => {
                        let o = t.compare(v, cur);
                        (kind == AggKind::Min && o == Ordering::Less)
                            || (kind == AggKind::Max && o == Ordering::Greater)
                    }
                };
                if better {
                    self.best = Some(v.clone());
                }
            }
            _ => {
                if v.is_empty() {
                    return;
                }
                self.n += 1;
                match t.unfrozen() {
                    t @ (CqlType::Float | CqlType::Double) => {
                        self.fsum += float_of(t, v).unwrap_or(0.0)
                    }
                    CqlType::Varint => self.bsum += BigInt::from_signed_bytes_be(v),
                    CqlType::Decimal => {
                        let Some(d) = decimal_of(v) else { return };
                        self.dsum += &d;
                        // avg += (d - avg) / n, rounded half-even at the
                        // difference's scale (as Cassandra computes it)
                        let diff = d - &self.davg;
                        let scale = diff.as_bigint_and_exponent().1;
                        let step = (diff / BigDecimal::from(self.n))
                            .with_scale_round(scale, bigdecimal::RoundingMode::HalfEven);
                        self.davg = &self.davg + step;
                    }
                    _ => self.isum += int_of(v),
                }
            }
        }
    }

    /// The aggregate's value for the rows added.
    pub fn result(&self, kind: AggKind, t: &CqlType) -> Option<Bytes> {
        let avg = kind == AggKind::Avg;
        match kind {
            AggKind::CountRows | AggKind::Count => {
                Some(Bytes::copy_from_slice(&self.n.to_be_bytes()))
            }
            AggKind::Min | AggKind::Max => self.best.clone(),
            AggKind::Sum | AggKind::Avg => {
                let n = self.n.max(1);
                Some(match t.unfrozen() {
                    CqlType::Float => {
                        let s = if avg { self.fsum / n as f64 } else { self.fsum };
                        Bytes::copy_from_slice(&(s as f32).to_be_bytes())
                    }
                    CqlType::Double => {
                        let s = if avg { self.fsum / n as f64 } else { self.fsum };
                        Bytes::copy_from_slice(&s.to_be_bytes())
                    }
                    CqlType::Varint => {
                        let s = if avg {
                            &self.bsum / BigInt::from(n)
                        } else {
                            self.bsum.clone()
                        };
                        Bytes::from(s.to_signed_bytes_be())
                    }
                    CqlType::Decimal => decimal_bytes(if avg { &self.davg } else { &self.dsum }),
                    t => {
                        let s = if avg {
                            self.isum / i128::from(n)
                        } else {
                            self.isum
                        };
                        match t {
                            CqlType::Int => Bytes::copy_from_slice(&(s as i32).to_be_bytes()),
                            CqlType::Smallint => Bytes::copy_from_slice(&(s as i16).to_be_bytes()),
                            CqlType::Tinyint => Bytes::copy_from_slice(&(s as i8).to_be_bytes()),
                            _ => Bytes::copy_from_slice(&(s as i64).to_be_bytes()),
                        }
                    }
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Bytes {
        decimal_bytes(&s.parse::<BigDecimal>().expect("decimal"))
    }

    fn avg_of(vals: &[&str]) -> String {
        let mut st = AggState::default();
        for v in vals {
            st.add(AggKind::Avg, &CqlType::Decimal, Some(&dec(v)));
        }
        let b = st.result(AggKind::Avg, &CqlType::Decimal).expect("avg");
        decimal_of(&b).expect("decimal").to_string()
    }

    #[test]
    fn decimal_avg_is_cassandras_running_mean() {
        // answers of Cassandra 5.0.4
        assert_eq!(avg_of(&["1", "2"]), "1");
        assert_eq!(avg_of(&["1.5", "1"]), "1.3");
        assert_eq!(avg_of(&["0.5", "0.2"]), "0.3");
        assert_eq!(avg_of(&["-2.5", "0"]), "-1.3");
        assert_eq!(avg_of(&["1.00", "2"]), "1.50");
        assert_eq!(avg_of(&[]), "0");
    }

    #[test]
    fn int_sum_wraps_and_avg_does_not() {
        let mut s = AggState::default();
        for v in [i32::MAX, 1, 5] {
            s.add(
                AggKind::Sum,
                &CqlType::Int,
                Some(&Bytes::copy_from_slice(&v.to_be_bytes())),
            );
        }
        let r = s.result(AggKind::Sum, &CqlType::Int).expect("sum");
        assert_eq!(
            i32::from_be_bytes(r.as_ref().try_into().expect("int")),
            -2147483643
        );
        let r = s.result(AggKind::Avg, &CqlType::Int).expect("avg");
        assert_eq!(
            i32::from_be_bytes(r.as_ref().try_into().expect("int")),
            715827884
        );
    }
}
