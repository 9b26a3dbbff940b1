//! Small statistics for the JSON line.

/// The median of `values` (mean of the two middle ones for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// Rounds to `digits` decimals, as the CrewAI side's `round(x, digits)` does for the JSON line.
pub fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// `numerator / denominator`, or `None` (JSON null) when the denominator is zero.
pub fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    (denominator > 0.0).then(|| numerator / denominator)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn extremes_rounding_and_ratios() {
        assert_eq!(min(&[2.0, 0.5, 9.0]), 0.5);
        assert_eq!(max(&[2.0, 0.5, 9.0]), 9.0);
        assert_eq!(round(1.23456, 3), 1.235);
        assert_eq!(ratio(8.0, 2.0), Some(4.0));
        assert_eq!(ratio(8.0, 0.0), None);
    }
}
