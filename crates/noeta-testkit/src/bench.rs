//! How the benches print a figure: the median of its samples as `name: value unit`, then
//! `name_spread_pct: P %`, the range of the samples as a percentage of the median.
//!
//! Every figure is the median of at least [`MIN_RUNS`] samples taken after a warm-up; the
//! spread tells a reader how far to trust one run on a noisy machine.

/// The fewest samples a figure is the median of.
pub const MIN_RUNS: usize = 5;

/// How many samples to take: `NOETA_BENCH_RUNS` when set (more for a profiler), otherwise
/// `default`; never fewer than [`MIN_RUNS`].
#[must_use]
pub fn runs(default: usize) -> usize {
    std::env::var("NOETA_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
        .max(MIN_RUNS)
}

/// The median and the spread (range over median, in per cent) of `samples`.
///
/// # Panics
/// When `samples` is empty: a figure of nothing is a bug in the bench.
#[must_use]
pub fn median_spread(samples: &[f64]) -> (f64, f64) {
    assert!(!samples.is_empty(), "a figure needs at least one sample");
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let range = sorted[sorted.len() - 1] - sorted[0];
    let spread = if median > 0.0 {
        range / median * 100.0
    } else {
        0.0
    };
    (median, spread)
}

/// Prints `name: median unit` (with `decimals` places) and `name_spread_pct: P %`, and returns
/// the median.
pub fn report(name: &str, unit: &str, decimals: usize, samples: &[f64]) -> f64 {
    let (median, spread) = median_spread(samples);
    println!("{name}: {median:.decimals$} {unit}");
    println!("{name}_spread_pct: {spread:.1} %");
    median
}

/// Runs `sample` once to warm up, then `runs` times, and returns the samples.
pub fn sampled(runs: usize, mut sample: impl FnMut() -> f64) -> Vec<f64> {
    let _ = sample();
    (0..runs).map(|_| sample()).collect()
}

/// For micro-benchmarks of many short samples: `samples` split into `runs` consecutive runs,
/// each run's median. Their median is the figure and their range its spread, so one slow call
/// does not count as a run.
#[must_use]
pub fn run_medians(samples: &[f64], runs: usize) -> Vec<f64> {
    let size = samples.len().div_ceil(runs.max(1)).max(1);
    samples
        .chunks(size)
        .map(|run| median_spread(run).0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_and_the_range_over_it() {
        let (median, spread) = median_spread(&[12.0, 10.0, 11.0, 9.0, 13.0]);
        assert!((median - 11.0).abs() < f64::EPSILON);
        assert!((spread - 4.0 / 11.0 * 100.0).abs() < 1e-9);
        assert_eq!(median_spread(&[0.0, 0.0]), (0.0, 0.0));
    }

    #[test]
    fn the_warm_up_is_not_a_sample() {
        let mut n = 0.0;
        let samples = sampled(5, || {
            n += 1.0;
            n
        });
        assert_eq!(samples, vec![2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn a_run_of_many_samples_counts_by_its_median() {
        let samples = [1.0, 100.0, 2.0, 3.0, 3.0, 4.0];
        assert_eq!(run_medians(&samples, 3), vec![100.0, 3.0, 4.0]);
        assert_eq!(run_medians(&samples, 1), vec![3.0]);
    }
}
