//! Latency statistics the benches report: nearest-rank percentiles over milliseconds.

use serde_json::{json, Value};

pub struct Stats {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub mean: f64,
    pub min: f64,
}

impl Stats {
    /// The statistics of `times` (milliseconds; at least one).
    pub fn of(times: &[f64]) -> Stats {
        let mut sorted = times.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        Stats {
            n: sorted.len(),
            p50: rank(0.5),
            p90: rank(0.9),
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            min: sorted[0],
        }
    }

    pub fn json(&self) -> Value {
        json!({"n": self.n, "p50_ms": round(self.p50), "p90_ms": round(self.p90),
               "mean_ms": round(self.mean), "min_ms": round(self.min)})
    }
}

/// `x` to three decimals.
pub fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
