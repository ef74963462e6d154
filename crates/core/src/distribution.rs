//! A quantity's values counted in bins: rewards in bins of two significant
//! digits ([`bin`]), the measures' values (durations, counts) in bins of a
//! twentieth of a decade ([`log_bin`]), and what a set of bins comes to
//! ([`Distribution`]: the mean, exact from the values' sum, and
//! nearest-rank percentiles over the bins).

/// Returns the bin of a value: the value rounded to two significant
/// digits, as the bits of that `f64` (0 for zero, of either sign).
pub fn bin(value: f64) -> i64 {
    let rounded: f64 = format!("{value:.1e}").parse().unwrap_or(value);
    let rounded = if rounded == 0.0 { 0.0 } else { rounded };
    rounded.to_bits() as i64
}

/// Returns the value a bin stands for.
pub fn bin_value(bin: i64) -> f64 {
    f64::from_bits(bin as u64)
}

/// Bins per decade of [`log_bin`]: each bin spans 12% of its values, so a
/// percentile read from one (its centre, to three significant digits) is
/// within 7% of the value.
const LOG_BINS_PER_DECADE: f64 = 20.0;

/// The bin of zero (and of any value below 1) in [`log_bin`].
const ZERO_BIN: i64 = -1;

/// Returns the bin of a measure's value (a whole number of its unit):
/// `round(20·log10(value))`, [`ZERO_BIN`] for 0. Far fewer bins than two
/// significant digits give (twenty per decade rather than ninety), as a
/// duration or a token count spans decades (docs/performance.md#measures-in-rows-of-their-own).
pub fn log_bin(value: i64) -> i64 {
    if value < 1 {
        return ZERO_BIN;
    }
    (LOG_BINS_PER_DECADE * (value as f64).log10()).round() as i64
}

/// Returns the value a [`log_bin`] stands for: its centre, to three
/// significant digits.
pub fn log_bin_value(bin: i64) -> f64 {
    if bin == ZERO_BIN {
        return 0.0;
    }
    let centre = 10f64.powf(bin as f64 / LOG_BINS_PER_DECADE);
    format!("{centre:.2e}").parse().unwrap_or(centre)
}

/// Returns the `p`-th percentile by nearest rank: the value of the
/// `ceil(p·n)`-th smallest of `n` (at least the first), from bins of
/// (value, count) in ascending order of value.
fn nearest_rank(sorted_bins: &[(f64, i64)], n: i64, p: f64) -> Option<f64> {
    if n == 0 {
        return None;
    }
    let rank = ((p * n as f64).ceil() as i64).max(1);
    let mut seen = 0;
    sorted_bins.iter().find_map(|&(value, count)| {
        seen += count;
        (seen >= rank).then_some(value)
    })
}

/// A quantity's values over a set of rollouts: how many, their mean, and
/// their percentiles.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Distribution {
    /// The values counted.
    pub values: i64,
    /// Their mean (exact); `None` without any.
    pub mean: Option<f64>,
    /// The 10th, 50th and 90th percentiles, to two significant digits
    /// (nearest rank over the bins).
    pub p10: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
}

/// Bins of values and their sum, added up row by row.
#[derive(Debug, Default)]
pub struct Binned {
    /// (the bin's value, values in it).
    bins: Vec<(f64, i64)>,
    total: i64,
}

impl Binned {
    /// Adds `values` values in the bin standing for `value`, whose sum is
    /// `total`.
    pub fn add(&mut self, value: f64, values: i64, total: i64) {
        self.bins.push((value, values));
        self.total = self.total.saturating_add(total);
    }

    /// Returns what the bins come to.
    pub fn into_distribution(self) -> Distribution {
        self.summarise().0
    }

    /// Returns what the bins come to, and the bins: (a bin's value, values
    /// in it) in ascending order of value, the values added to one bin in
    /// several rows summed (a shared database's shards of a row, which may
    /// count less than nothing on their own), and bins of no value (or
    /// fewer) left out.
    pub fn summarise(mut self) -> (Distribution, Vec<(f64, i64)>) {
        self.bins.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.bins.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        self.bins.retain(|&(_, n)| n > 0);
        let values: i64 = self.bins.iter().map(|&(_, n)| n).sum();
        let percentile = |p: f64| nearest_rank(&self.bins, values, p);
        let distribution = Distribution {
            values,
            mean: (values > 0).then(|| self.total as f64 / values as f64),
            p10: percentile(0.1),
            p50: percentile(0.5),
            p90: percentile(0.9),
        };
        (distribution, self.bins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_keep_two_significant_digits() {
        for (value, binned) in [
            (0.0, 0.0),
            (-0.0, 0.0),
            (1.0, 1.0),
            (0.5, 0.5),
            (0.123, 0.12),
            (0.126, 0.13),
            (-2.71, -2.7),
            (12345.0, 12000.0),
        ] {
            assert_eq!(bin_value(bin(value)), binned, "{value}");
        }
        assert_eq!(bin(-0.0), bin(0.0));
    }

    #[test]
    fn a_distribution_reads_an_exact_mean_and_percentiles_by_nearest_rank() {
        let values = [120, 130, 131, 1_000, 1_040, 5, 7_777, 250, 250, 90];
        let mut binned = Binned::default();
        for value in values {
            binned.add(bin_value(bin(value as f64)), 1, value);
        }
        let distribution = binned.into_distribution();
        let mut sorted: Vec<f64> = values
            .iter()
            .map(|&value| bin_value(bin(value as f64)))
            .collect();
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).max(1) - 1];
        assert_eq!(distribution.values, values.len() as i64);
        let exact = values.iter().sum::<i64>() as f64 / values.len() as f64;
        assert_eq!(distribution.mean, Some(exact));
        assert_eq!(distribution.p10, Some(rank(0.1)));
        assert_eq!(distribution.p50, Some(rank(0.5)));
        assert_eq!(distribution.p90, Some(rank(0.9)));
        assert_eq!(distribution.p90, Some(1_000.0));
    }

    #[test]
    fn a_bins_rows_are_summed_before_empty_bins_are_left_out() {
        let mut binned = Binned::default();
        // A bin whose rows come to nothing, one whose rows come to two
        // values, and one counted once.
        for (value, values, total) in [
            (2.0, 1, 2),
            (5.0, 3, 15),
            (2.0, -1, -2),
            (5.0, -1, -5),
            (1.0, 1, 1),
        ] {
            binned.add(value, values, total);
        }
        let (distribution, bins) = binned.summarise();
        assert_eq!(bins, vec![(1.0, 1), (5.0, 2)]);
        assert_eq!(distribution.values, 3);
        assert_eq!(distribution.mean, Some(11.0 / 3.0));
        assert_eq!(distribution.p10, Some(1.0));
        assert_eq!(distribution.p50, Some(5.0));
    }

    #[test]
    fn log_bins_are_twenty_a_decade_and_stand_for_their_centre() {
        for (value, centre) in [
            (0, 0.0),
            (1, 1.0),
            (2, 2.0),
            (3, 3.16),
            (1_000, 1_000.0),
            (1_100, 1_120.0),
            (1_200, 1_260.0),
            (3_500, 3_550.0),
            (15_000, 15_800.0),
            (45_000, 44_700.0),
            (75_000, 79_400.0),
        ] {
            assert_eq!(log_bin_value(log_bin(value)), centre, "{value}");
        }
        assert_eq!(log_bin(10_000) - log_bin(1_000), 20);
        // Within 7% of the value, over five decades.
        for value in 1..100_000 {
            let centre = log_bin_value(log_bin(value));
            assert!(
                (centre - value as f64).abs() <= 0.07 * value as f64,
                "{value}"
            );
        }
    }
}
