//! cassandra-stress's distributions: `FIXED(n)`, `UNIFORM(a..b)`,
//! `GAUSSIAN(a..b[,stdvrng])` / `GAUSSIAN(a..b,mean,stdev)` (aliases GAUSS,
//! NORMAL, NORM), `EXP(a..b)`, `EXTREME(a..b,shape)` (aliases EXTR, WEIBULL),
//! `SEQ(a..b)`; a leading `~` inverts one (`~EXP(1..10)` yields 10 most
//! often). Ratio distributions (`select: uniform(1..10)/10`) divide a
//! distribution's sample.
//!
//! The bounds and shapes follow cassandra-stress (`OptionDistribution`):
//! exponential and extreme distributions are scaled so that the far end of the
//! range is still reachable, samples are clamped to `[min, max]`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A small, fast, seedable generator (splitmix64). Values are a pure function
/// of the seed, so generated data is reproducible from a partition's seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_F42D_4C95_7F2D)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `(0, 1]`, for logarithms.
    fn f64_open(&mut self) -> f64 {
        1.0 - self.f64()
    }

    /// Uniform in `[0, n)`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Mixes two values into one seed.
pub fn mix(a: u64, b: u64) -> u64 {
    Rng::new(a ^ b.rotate_left(32).wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

#[derive(Debug, Clone)]
enum Kind {
    Fixed,
    Uniform,
    Gaussian { mean: f64, stdev: f64 },
    Exp { mean: f64 },
    Extreme { shape: f64, scale: f64 },
    Seq { next: Arc<AtomicU64> },
}

/// A parsed distribution over the integers `[min, max]`.
#[derive(Debug, Clone)]
pub struct Distribution {
    kind: Kind,
    min: i64,
    max: i64,
    inverted: bool,
    spec: String,
}

/// `123`, `10k`, `5m`, `1b` (thousands, millions, billions), as cassandra-stress.
pub fn parse_long(s: &str) -> Option<i64> {
    let v = s.trim().to_ascii_lowercase();
    let (num, mult) = match v.chars().last()? {
        'k' => (&v[..v.len() - 1], 1_000),
        'm' => (&v[..v.len() - 1], 1_000_000),
        'b' => (&v[..v.len() - 1], 1_000_000_000),
        _ => (v.as_str(), 1),
    };
    num.parse::<i64>().ok()?.checked_mul(mult)
}

fn bounds(p: &str) -> Option<(i64, i64)> {
    let (a, b) = p.split_once("..")?;
    let b = b.trim_start_matches('.');
    let (lo, hi) = (parse_long(a)?, parse_long(b)?);
    (lo <= hi).then_some((lo, hi))
}

impl Distribution {
    /// Parses cassandra-stress syntax, e.g. `UNIFORM(1..100)` or `~exp(1..1M)`.
    pub fn parse(spec: &str) -> Result<Distribution, String> {
        let s = spec.trim();
        let (inverted, body) = match s.strip_prefix('~') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let open = body
            .find('(')
            .filter(|&i| i > 0 && body.ends_with(')'))
            .ok_or_else(|| format!("Illegal distribution specification: {spec}"))?;
        let name = &body[..open];
        if !name.chars().all(|c| c.is_ascii_alphabetic()) {
            return Err(format!("Illegal distribution specification: {spec}"));
        }
        let params: Vec<&str> = body[open + 1..body.len() - 1]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        let lname = name.to_ascii_lowercase();
        let invalid =
            |what: &str| format!("Invalid parameter list for {what} distribution: {spec}");
        let range = |what: &str| {
            params
                .first()
                .and_then(|p| bounds(p))
                .ok_or_else(|| invalid(what))
        };
        let number = |i: usize, what: &str| {
            params
                .get(i)
                .and_then(|p| p.parse::<f64>().ok())
                .filter(|x| x.is_finite())
                .ok_or_else(|| invalid(what))
        };
        let (kind, min, max) = match lname.as_str() {
            "fixed" => {
                if params.len() != 1 {
                    return Err(invalid("fixed"));
                }
                let v = parse_long(params[0]).ok_or_else(|| invalid("fixed"))?;
                (Kind::Fixed, v, v)
            }
            "uniform" => {
                if params.len() != 1 {
                    return Err(invalid("uniform"));
                }
                let (lo, hi) = range("uniform")?;
                (Kind::Uniform, lo, hi)
            }
            "seq" => {
                if params.len() != 1 {
                    return Err(invalid("seq"));
                }
                let (lo, hi) = range("seq")?;
                (Kind::Seq { next: Arc::new(AtomicU64::new(0)) }, lo, hi)
            }
            "gaussian" | "gauss" | "normal" | "norm" => {
                if params.is_empty() || params.len() > 3 {
                    return Err(invalid("gaussian"));
                }
                let (lo, hi) = range("gaussian")?;
                let (mean, stdev) = if params.len() == 3 {
                    (number(1, "gaussian")?, number(2, "gaussian")?)
                } else {
                    let stdvrng = if params.len() == 2 { number(1, "gaussian")? } else { 3.0 };
                    if stdvrng <= 0.0 {
                        return Err(invalid("gaussian"));
                    }
                    ((lo as f64 + hi as f64) / 2.0, ((hi as f64 - lo as f64) / 2.0) / stdvrng)
                };
                if stdev < 0.0 {
                    return Err(invalid("gaussian"));
                }
                (Kind::Gaussian { mean, stdev }, lo, hi)
            }
            "exp" => {
                if params.len() != 1 {
                    return Err(invalid("exponential"));
                }
                let (lo, hi) = range("exponential")?;
                // the mean puts the range's far end at the 1 - sqrt(1/range) quantile
                let delta = (hi as f64 - lo as f64).max(1.0);
                let q = 0.5 * delta.ln();
                (Kind::Exp { mean: if q > 0.0 { delta / q } else { 1.0 } }, lo, hi)
            }
            "extreme" | "extr" | "weibull" => {
                if params.len() != 2 {
                    return Err(invalid("extreme (Weibull)"));
                }
                let (lo, hi) = range("extreme (Weibull)")?;
                let shape = number(1, "extreme (Weibull)")?;
                if shape <= 0.0 {
                    return Err(invalid("extreme (Weibull)"));
                }
                let delta = (hi as f64 - lo as f64).max(1.0);
                let q = (0.5 * delta.ln()).powf(1.0 / shape);
                (Kind::Extreme { shape, scale: if q > 0.0 { delta / q } else { 1.0 } }, lo, hi)
            }
            _ => return Err(format!("Illegal distribution type: {name} in {spec} (expected FIXED, UNIFORM, GAUSSIAN, EXP, EXTREME or SEQ)")),
        };
        Ok(Distribution {
            kind,
            min,
            max,
            inverted,
            spec: s.to_string(),
        })
    }

    pub fn fixed(v: i64) -> Distribution {
        Distribution {
            kind: Kind::Fixed,
            min: v,
            max: v,
            inverted: false,
            spec: format!("FIXED({v})"),
        }
    }

    pub fn min(&self) -> i64 {
        self.min
    }

    pub fn max(&self) -> i64 {
        self.max
    }

    pub fn spec(&self) -> &str {
        &self.spec
    }

    pub fn is_seq(&self) -> bool {
        matches!(self.kind, Kind::Seq { .. })
    }

    fn clamp(&self, offset: f64) -> i64 {
        // cassandra-stress truncates the sample, then clamps it to the range
        let delta = self.max.wrapping_sub(self.min) as f64;
        let r = if offset.is_nan() {
            0.0
        } else {
            offset.trunc().clamp(0.0, delta)
        };
        self.min.saturating_add(r as i64).min(self.max)
    }

    fn invert(&self, v: i64) -> i64 {
        if self.inverted {
            self.max - (v - self.min)
        } else {
            v
        }
    }

    fn draw(&self, rng: &mut Rng, seq_position: impl FnOnce() -> u64) -> i64 {
        let v = match &self.kind {
            Kind::Fixed => self.min,
            Kind::Uniform => {
                let span = (self.max as i128 - self.min as i128 + 1) as u128;
                if span > u64::MAX as u128 {
                    rng.next_u64() as i64
                } else {
                    self.min.wrapping_add(rng.below(span as u64) as i64)
                }
            }
            Kind::Gaussian { mean, stdev } => {
                // Box-Muller; out-of-range samples are clamped, as DistributionBoundApache does
                let z = (-2.0 * rng.f64_open().ln()).sqrt()
                    * (2.0 * std::f64::consts::PI * rng.f64()).cos();
                let x = (mean + stdev * z).trunc();
                x.clamp(self.min as f64, self.max as f64) as i64
            }
            Kind::Exp { mean } => self.clamp(-mean * rng.f64_open().ln()),
            Kind::Extreme { shape, scale } => {
                self.clamp(scale * (-rng.f64_open().ln()).powf(1.0 / shape))
            }
            Kind::Seq { .. } => {
                let count = (self.max as i128 - self.min as i128 + 1) as u128;
                (self.min as i128 + (seq_position() as u128 % count) as i128) as i64
            }
        };
        self.invert(v)
    }

    /// The next sample; `SEQ` walks its range in order (wrapping), shared by
    /// every user of this distribution.
    pub fn next(&self, rng: &mut Rng) -> i64 {
        self.draw(rng, || match &self.kind {
            Kind::Seq { next } => next.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        })
    }

    /// The sample determined by `seed` (the distribution reseeded with it, as
    /// cassandra-stress's generators do): `SEQ` gives `min + seed % count`.
    pub fn at(&self, seed: u64) -> i64 {
        let mut rng = Rng::new(seed);
        self.draw(&mut rng, || seed)
    }
}

/// `DIST/divisor`, e.g. `fixed(1)/1`: samples divided by the divisor.
#[derive(Debug, Clone)]
pub struct RatioDistribution {
    pub dist: Distribution,
    pub divisor: f64,
}

impl RatioDistribution {
    pub fn parse(spec: &str) -> Result<RatioDistribution, String> {
        let (d, div) = spec.rsplit_once('/').ok_or_else(|| {
            format!(
                "Invalid ratio distribution '{spec}': expected DIST(...)/divisor, e.g. fixed(1)/1"
            )
        })?;
        let divisor = div
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| *x > 0.0 && x.is_finite())
            .ok_or_else(|| format!("Invalid divisor '{div}' in ratio distribution '{spec}'"))?;
        Ok(RatioDistribution {
            dist: Distribution::parse(d)?,
            divisor,
        })
    }

    pub fn one() -> RatioDistribution {
        RatioDistribution {
            dist: Distribution::fixed(1),
            divisor: 1.0,
        }
    }

    /// A ratio in `[0, 1]`.
    pub fn next(&self, rng: &mut Rng) -> f64 {
        (self.dist.next(rng) as f64 / self.divisor).clamp(0.0, 1.0)
    }

    pub fn min(&self) -> f64 {
        (self.dist.min() as f64 / self.divisor).clamp(0.0, 1.0)
    }

    pub fn max(&self) -> f64 {
        (self.dist.max() as f64 / self.divisor).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(spec: &str, n: usize) -> Vec<i64> {
        let d = Distribution::parse(spec).expect(spec);
        let mut rng = Rng::new(42);
        (0..n).map(|_| d.next(&mut rng)).collect()
    }

    fn mean(v: &[i64]) -> f64 {
        v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64
    }

    #[test]
    fn fixed_and_uniform() {
        assert!(samples("FIXED(34)", 100).iter().all(|&x| x == 34));
        assert!(samples("fixed(2k)", 10).iter().all(|&x| x == 2000));
        let u = samples("UNIFORM(1..10)", 10_000);
        assert!(u.iter().all(|&x| (1..=10).contains(&x)));
        for v in 1..=10 {
            assert!(u.contains(&v), "{v} reachable");
        }
        assert!((mean(&u) - 5.5).abs() < 0.2);
        assert_eq!(
            Distribution::parse("uniform(1..1M)").expect("parse").max(),
            1_000_000
        );
    }

    #[test]
    fn gaussian_centres_and_stays_in_range() {
        let g = samples("GAUSSIAN(1..100)", 20_000);
        assert!(g.iter().all(|&x| (1..=100).contains(&x)));
        assert!((mean(&g) - 50.5).abs() < 1.5, "{}", mean(&g));
        let within = g.iter().filter(|&&x| (34..=67).contains(&x)).count() as f64 / g.len() as f64;
        assert!(
            within > 0.6,
            "about 68% within one stdev (stdvrng 3 → stdev 16.5): {within}"
        );
        let narrow = samples("normal(1..100,10)", 5_000);
        assert!(narrow.iter().all(|&x| (1..=100).contains(&x)));
        assert!(
            narrow.iter().filter(|&&x| (36..=65).contains(&x)).count() > narrow.len() * 99 / 100,
            "stdev 4.95"
        );
        let explicit = samples("gauss(0..1000,100,5)", 5_000);
        assert!((mean(&explicit) - 100.0).abs() < 1.0);
    }

    #[test]
    fn exp_and_extreme_skew_low_and_invert_high() {
        let e = samples("EXP(1..1000)", 20_000);
        assert!(e.iter().all(|&x| (1..=1000).contains(&x)));
        assert!(mean(&e) < 400.0, "{}", mean(&e));
        let inv = samples("~EXP(1..1000)", 20_000);
        assert!(inv.iter().all(|&x| (1..=1000).contains(&x)));
        assert!(mean(&inv) > 600.0, "{}", mean(&inv));
        let w = samples("EXTREME(1..1000,1.5)", 20_000);
        assert!(w.iter().all(|&x| (1..=1000).contains(&x)));
        assert!(mean(&w) < 450.0, "{}", mean(&w));
        let lowest = w.iter().filter(|&&x| x < 100).count();
        let highest = w.iter().filter(|&&x| x > 900).count();
        assert!(
            lowest > highest,
            "skewed low (the tail past the range is clamped to its end): {lowest} {highest}"
        );
    }

    #[test]
    fn seq_walks_in_order_and_at_is_deterministic() {
        assert_eq!(samples("SEQ(5..7)", 5), vec![5, 6, 7, 5, 6]);
        let d = Distribution::parse("seq(1..100)").expect("parse");
        assert_eq!(d.at(0), 1);
        assert_eq!(d.at(150), 51);
        let u = Distribution::parse("uniform(1..1000000)").expect("parse");
        assert_eq!(u.at(77), u.at(77));
        assert_ne!(u.at(77), u.at(78));
    }

    #[test]
    fn malformed_distributions_are_named() {
        for (spec, word) in [
            ("UNIFORM(10..1)", "uniform"),
            ("UNIFORM(1-10)", "uniform"),
            ("POISSON(1..10)", "POISSON"),
            ("FIXED", "FIXED"),
            ("FIXED(x)", "fixed"),
            ("gaussian(1..10,0)", "gaussian"),
            ("extreme(1..10)", "extreme"),
            ("exp(1..10,2)", "exponential"),
            ("", "specification"),
        ] {
            let e = Distribution::parse(spec).expect_err(spec);
            assert!(e.contains(word), "{spec}: {e}");
        }
    }

    #[test]
    fn ratios() {
        let r = RatioDistribution::parse("fixed(1)/1").expect("parse");
        assert_eq!(r.next(&mut Rng::new(1)), 1.0);
        let r = RatioDistribution::parse("uniform(1..10)/10").expect("parse");
        let mut rng = Rng::new(3);
        for _ in 0..100 {
            let x = r.next(&mut rng);
            assert!((0.1..=1.0).contains(&x));
        }
        assert!(RatioDistribution::parse("fixed(1)").is_err());
        assert!(RatioDistribution::parse("fixed(1)/0").is_err());
    }
}
