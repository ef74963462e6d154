//! Durations on the command line: `10s`, `500ms`, `5m`, `1h30m`, `365d`
//! (a number, decimals allowed, then a unit; parts add up), and the old
//! unit-suffixed options (`--drain-timeout-secs 10`, `--watchdog-interval-ms
//! 50`) that remain as hidden aliases.

use std::time::Duration;

/// Units a duration may be written in, with their length in seconds.
const UNITS: [(&str, f64); 6] = [
    ("us", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3600.0),
    ("d", 86_400.0),
];

/// Parses a duration such as `10s`, `500ms`, `1.5s`, `5m`, `1h30m` or `365d`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("empty duration: write e.g. 10s, 500ms or 5m".into());
    }
    let mut rest = trimmed;
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("`{trimmed}` has no unit: write e.g. 10s, 500ms or 5m"))?;
        let number: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{trimmed}` is not a duration: write e.g. 10s, 500ms or 5m"))?;
        let after = &rest[digits..];
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let unit = &after[..unit_end];
        let &(_, seconds) = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .ok_or_else(|| format!("`{trimmed}`: unknown unit `{unit}` (use ms, s, m, h or d)"))?;
        total = Duration::try_from_secs_f64(number * seconds)
            .ok()
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| format!("`{trimmed}` is out of range"))?;
        rest = &after[unit_end..];
    }
    Ok(total)
}

/// Parses a duration that must be longer than zero.
pub fn parse_positive(text: &str) -> Result<Duration, String> {
    match parse(text)? {
        Duration::ZERO => Err("must be longer than zero".into()),
        duration => Ok(duration),
    }
}

/// Writes `duration` as [`parse`] reads it, in the largest unit that
/// divides it (`5m`, `365d`, `1500ms`).
pub fn format(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 || !duration.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{}us", duration.as_micros());
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

/// Parses the value of an old `*-secs` option: a number of seconds >= 0.
pub fn parse_legacy_seconds(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| format!("`{text}` is not a number of seconds >= 0"))
}

/// Parses the value of an old `*-secs` option that must be longer than zero.
pub fn parse_legacy_positive_seconds(text: &str) -> Result<Duration, String> {
    match parse_legacy_seconds(text)? {
        Duration::ZERO => Err("must be longer than zero".into()),
        duration => Ok(duration),
    }
}

/// Parses the value of an old `*-ms` option: a whole number of milliseconds.
pub fn parse_legacy_millis(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("`{text}` is not a whole number of milliseconds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_unit_and_sums_parts() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("365d"), Ok(Duration::from_secs(31_536_000)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse(" 0s "), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for bad in [
            "",
            "10",
            "-1s",
            "s",
            "1x",
            "1.2.3s",
            "ten seconds",
            "1e400s",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse("10").unwrap_err().contains("no unit"));
        assert!(parse("3w").unwrap_err().contains("unknown unit `w`"));
        assert!(parse_positive("0s").is_err());
        assert_eq!(parse_positive("1ms"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn format_reads_back() {
        for (duration, text) in [
            (Duration::from_secs(300), "5m"),
            (Duration::from_secs(31_536_000), "365d"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_micros(1), "1us"),
            (Duration::ZERO, "0us"),
        ] {
            assert_eq!(format(duration), text);
            assert_eq!(parse(text), Ok(duration));
        }
    }

    #[test]
    fn old_units_still_parse() {
        assert_eq!(parse_legacy_seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert!(parse_legacy_seconds("-1").is_err());
        assert!(parse_legacy_seconds("NaN").is_err());
        assert!(parse_legacy_positive_seconds("0").is_err());
        assert_eq!(parse_legacy_millis("50"), Ok(Duration::from_millis(50)));
        assert!(parse_legacy_millis("0.5").is_err());
    }
}
