//! Medians across runs, percentiles within a run.

use hdrhistogram::Histogram;
use serde::Serialize;

/// One figure across repeated runs: the median and the range.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summary of the finite values; NaN everywhere when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Summary {
        let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        };
        Summary {
            median,
            min: values.first().copied().unwrap_or(f64::NAN),
            max: values.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// `median (min..max)`, or just the median when every run agreed or there
    /// was one run; `n/a` when nothing was measured.
    pub fn show(&self, decimals: usize) -> String {
        let (median, min, max) = (self.median, self.min, self.max);
        if median.is_nan() {
            return "n/a".to_owned();
        }
        let median_text = group(median, decimals);
        if min == max {
            return median_text;
        }
        format!(
            "{median_text} ({}..{})",
            group(min, decimals),
            group(max, decimals)
        )
    }
}

/// A number with thousands separators: 95,000 reads faster than 95000.
pub fn group(value: f64, decimals: usize) -> String {
    let text = format!("{:.decimals$}", value.abs());
    let (int, frac) = match text.split_once('.') {
        Some((int, frac)) => (int.to_owned(), format!(".{frac}")),
        None => (text, String::new()),
    };
    let mut grouped = String::new();
    for (i, digit) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let sign = if value < 0.0 { "-" } else { "" };
    format!("{sign}{grouped}{frac}")
}

/// Nanosecond histogram up to ten minutes, three significant digits.
pub fn nanos_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("valid histogram bounds")
}

/// A histogram quantile in microseconds; NaN when the histogram is empty.
pub fn quantile_us(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    if histogram.is_empty() {
        return f64::NAN;
    }
    histogram.value_at_quantile(quantile) as f64 / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(Summary::of([3.0, 1.0, 2.0]).median, 2.0);
        assert_eq!(Summary::of([4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert!(Summary::of([]).median.is_nan());
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(group(95_123.4, 0), "95,123");
        assert_eq!(group(1_234_567.891, 2), "1,234,567.89");
        assert_eq!(group(12.0, 1), "12.0");
    }
}
