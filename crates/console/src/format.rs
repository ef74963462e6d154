//! How the console writes values for people: times in UTC, durations in
//! the unit that reads best, JSON pretty-printed and cut to a size a page
//! can hold. Plain text: the templates escape it.

use std::time::Duration;

use lightning_store_core::model::{AttributeValue, Json, RolloutStatus, Timestamp};
use lightning_store_core::training::NoRowsReason;

/// Longest JSON text or attribute value a page shows inline; longer ones
/// are cut (the rollout's JSON download has them whole).
pub const MAX_INLINE_CHARS: usize = 4_000;

/// A time as the console shows it: `2026-11-28 13:04:05 UTC` (`title`: to
/// the millisecond, `iso`: RFC 3339 for `<time datetime>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownTime {
    pub text: String,
    pub title: String,
    pub iso: String,
}

/// Returns how a time is shown.
pub fn time(time: Timestamp) -> ShownTime {
    let (date, clock, millis) = civil(time);
    ShownTime {
        text: format!("{date} {clock} UTC"),
        title: format!("{date} {clock}.{millis:03} UTC"),
        iso: format!("{date}T{clock}.{millis:03}Z"),
    }
}

/// Returns a time's clock part (`13:04:05`), for chart labels.
pub fn clock(time: Timestamp) -> String {
    civil(time).1[..5].to_owned()
}

/// Returns (`YYYY-MM-DD`, `HH:MM:SS`, milliseconds) of a time in UTC.
fn civil(time: Timestamp) -> (String, String, i64) {
    let millis = time.0.div_euclid(1_000_000);
    let seconds = millis.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    // Days to a proleptic Gregorian date (Howard Hinnant's `civil_from_days`).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        format!("{year:04}-{month:02}-{day:02}"),
        format!(
            "{:02}:{:02}:{:02}",
            of_day / 3600,
            of_day % 3600 / 60,
            of_day % 60
        ),
        millis.rem_euclid(1000),
    )
}

/// Parses the value of an `<input type="datetime-local">` (`2026-11-28T13:04`
/// or with seconds), taken as UTC.
pub fn parse_local_time(text: &str) -> Option<Timestamp> {
    let (date, clock) = text.trim().split_once('T')?;
    let mut date = date.split('-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let mut clock = clock.split(':');
    let hour: i64 = clock.next()?.parse().ok()?;
    let minute: i64 = clock.next()?.parse().ok()?;
    let second: f64 = clock.next().map_or(Some(0.0), |s| s.parse().ok())?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // Hinnant's `days_from_civil`.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = (days * 86_400 + hour * 3600 + minute * 60) as f64 + second;
    Timestamp::from_secs_f64(seconds)
}

/// Returns a duration in the unit that reads best: `350 ms`, `4.2 s`,
/// `3 min 20 s`, `2 h 5 min`, `3 d 4 h`.
pub fn duration(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    let whole = duration.as_secs();
    match whole {
        0 if seconds < 0.001 => format!("{} µs", duration.as_micros()),
        0 => format!("{} ms", duration.as_millis()),
        1..60 => format!("{seconds:.1} s"),
        60..3600 => two_units(whole / 60, "min", whole % 60, "s"),
        3600..86_400 => two_units(whole / 3600, "h", whole % 3600 / 60, "min"),
        _ => two_units(whole / 86_400, "d", whole % 86_400 / 3600, "h"),
    }
}

/// `3 min 20 s`, or `5 min` when the smaller unit is zero.
fn two_units(large: u64, large_unit: &str, small: u64, small_unit: &str) -> String {
    match small {
        0 => format!("{large} {large_unit}"),
        _ => format!("{large} {large_unit} {small} {small_unit}"),
    }
}

/// Returns the time from `from` to `to` (zero when `to` is earlier).
pub fn between(from: Timestamp, to: Timestamp) -> Duration {
    Duration::from_nanos(u64::try_from(to.0.saturating_sub(from.0)).unwrap_or(0))
}

/// Returns JSON pretty-printed, cut to [`MAX_INLINE_CHARS`].
pub fn json(value: &Json) -> String {
    cut(serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()))
}

/// Cuts a text to [`MAX_INLINE_CHARS`] characters, saying how much was cut.
pub fn cut(mut text: String) -> String {
    if let Some((index, _)) = text.char_indices().nth(MAX_INLINE_CHARS) {
        let total = text.chars().count();
        text.truncate(index);
        text.push_str(&format!(
            "\n… ({} more characters)",
            total - MAX_INLINE_CHARS
        ));
    }
    text
}

/// Returns an attribute value as text (strings as they are, the rest as JSON).
pub fn attribute(value: &AttributeValue) -> String {
    cut(match value {
        AttributeValue::String(text) => text.clone(),
        other => serde_json::to_string(&attribute_json(other)).unwrap_or_default(),
    })
}

fn attribute_json(value: &AttributeValue) -> Json {
    match value {
        AttributeValue::Empty => Json::Null,
        AttributeValue::String(text) => Json::String(text.clone()),
        AttributeValue::Bool(flag) => Json::Bool(*flag),
        AttributeValue::Int(number) => Json::from(*number),
        AttributeValue::Double(number) => Json::from(*number),
        AttributeValue::Bytes(bytes) => Json::String(hex::encode(bytes)),
        AttributeValue::Array(items) => Json::Array(items.iter().map(attribute_json).collect()),
        AttributeValue::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|kv| (kv.key.clone(), attribute_json(&kv.value)))
                .collect(),
        ),
    }
}

/// Returns a count with thousands separators (`12,345`).
pub fn count(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Returns a quantity that is a count on average (a mean, a bin's
/// centre): whole with thousands separators from 100, else to three
/// significant digits (`12.6`).
pub fn quantity(value: f64) -> String {
    if value >= 100.0 {
        return count(value.round() as u64);
    }
    let rounded: f64 = format!("{value:.2e}").parse().unwrap_or(value);
    rounded.to_string()
}

/// Returns a reward as the pages show it (empty when there is none).
pub fn reward(value: Option<f64>) -> String {
    value.map_or_else(String::new, |value| format!("{value:.3}"))
}

/// Returns what a reason a 1.x rollout gives no training row is called on
/// the pages.
pub fn no_rows_reason(reason: NoRowsReason) -> &'static str {
    match reason {
        NoRowsReason::NoModelCalls => "no model calls",
        NoRowsReason::FailedCalls => "failed calls",
        NoRowsReason::NoTokenIds => "calls without token ids",
        NoRowsReason::NoReward => "no reward",
        NoRowsReason::RewardNotANumber => "a reward that is not a number",
        NoRowsReason::RolloutFailed => "the rollout failed",
    }
}

/// Returns a rate per second with the precision that reads best.
pub fn rate(per_second: f64) -> String {
    match per_second {
        r if r >= 100.0 => format!("{r:.0}"),
        r if r >= 10.0 => format!("{r:.1}"),
        r => format!("{r:.2}"),
    }
}

/// Returns the style sheet's class of a rollout status.
pub fn status_class(status: RolloutStatus) -> &'static str {
    match status {
        RolloutStatus::Queuing | RolloutStatus::Requeuing => "wait",
        RolloutStatus::Preparing | RolloutStatus::Running => "run",
        RolloutStatus::Succeeded => "ok",
        RolloutStatus::Failed => "bad",
        RolloutStatus::Cancelled => "muted",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_dates_and_round_trip_through_inputs() {
        let shown = time(Timestamp(1_795_437_044_167_201_800));
        assert_eq!(shown.text, "2026-11-23 12:30:44 UTC");
        assert_eq!(shown.iso, "2026-11-23T12:30:44.167Z");
        assert_eq!(time(Timestamp(0)).text, "1970-01-01 00:00:00 UTC");
        assert_eq!(
            time(Timestamp(951_782_400_000_000_000)).text,
            "2000-02-29 00:00:00 UTC"
        );
        assert_eq!(
            parse_local_time("2026-11-23T12:30:44"),
            Some(Timestamp(1_795_437_044_000_000_000))
        );
        assert_eq!(
            parse_local_time("2026-11-23T12:30"),
            Some(Timestamp(1_795_437_000_000_000_000))
        );
        assert_eq!(parse_local_time("2026-13-01T00:00"), None);
        assert_eq!(parse_local_time("yesterday"), None);
    }

    #[test]
    fn durations_counts_and_cuts_read_well() {
        assert_eq!(duration(Duration::from_millis(350)), "350 ms");
        assert_eq!(duration(Duration::from_millis(4_200)), "4.2 s");
        assert_eq!(duration(Duration::from_secs(200)), "3 min 20 s");
        assert_eq!(duration(Duration::from_secs(7_500)), "2 h 5 min");
        assert_eq!(duration(Duration::from_secs(300)), "5 min");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(quantity(3_162.3), "3,162");
        assert_eq!(quantity(12.6), "12.6");
        assert_eq!(quantity(45.0), "45");
        assert_eq!(quantity(7.0 / 3.0), "2.33");
        let long = "é".repeat(MAX_INLINE_CHARS + 5);
        assert!(cut(long).ends_with("(5 more characters)"));
        assert_eq!(json(&serde_json::json!({"a": 1})), "{\n  \"a\": 1\n}");
    }
}
