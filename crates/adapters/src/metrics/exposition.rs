//! The two exposition formats a scraper may ask for, chosen from its `Accept`
//! header: OpenMetrics 1.0 when it lists `application/openmetrics-text`
//! (Prometheus does when scraping), the Prometheus text format 0.0.4
//! otherwise (curl, older scrapers, `promtool check metrics`).
//!
//! The registry encodes OpenMetrics only; the text format is derived from it.
//! The formats differ, for what we emit, in three places: a counter family is
//! named without `_total` in OpenMetrics and with it in the text format (its
//! samples carry `_total` in both), `# UNIT` lines exist only in OpenMetrics,
//! and only OpenMetrics ends with `# EOF`.

/// The body formats `GET /metrics` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0 text.
    OpenMetrics,
    /// The Prometheus text format, version 0.0.4.
    PrometheusText,
}

impl Exposition {
    /// Chooses the format from an `Accept` header value: OpenMetrics when the
    /// scraper lists it with a non-zero quality, the text format otherwise.
    pub fn negotiate(accept: Option<&str>) -> Self {
        let wants_openmetrics = accept.is_some_and(|accept| {
            accept.split(',').any(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media_type = parts.next().unwrap_or_default();
                let refused = parts.any(|parameter| {
                    parameter
                        .strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                        .is_some_and(|q| q <= 0.0)
                });
                media_type.eq_ignore_ascii_case("application/openmetrics-text") && !refused
            })
        });
        if wants_openmetrics {
            Self::OpenMetrics
        } else {
            Self::PrometheusText
        }
    }

    /// The `Content-Type` of a body in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// Turns the registry's OpenMetrics encoding into a body of this format.
    pub fn from_openmetrics(self, openmetrics: String) -> String {
        match self {
            Self::OpenMetrics => openmetrics,
            Self::PrometheusText => to_prometheus_text(&openmetrics),
        }
    }
}

/// Rewrites an OpenMetrics body as the Prometheus text format 0.0.4: counter
/// families take their samples' `_total` name in `# HELP` and `# TYPE`,
/// `# UNIT` and `# EOF` lines are dropped, samples pass through unchanged.
fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(openmetrics.len() + 8 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|prefix| Some((prefix, line.strip_prefix(prefix)?)));
        match descriptor {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_at(rest.find(' ').unwrap_or(rest.len()));
                text.push_str(prefix);
                text.push_str(name);
                if counters.contains(name) {
                    text.push_str("_total");
                }
                text.push_str(tail);
            }
            None => text.push_str(line),
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_only_when_the_scraper_lists_it() {
        use Exposition::*;
        for (accept, expected) in [
            (None, PrometheusText),
            (Some("*/*"), PrometheusText),
            (Some("text/plain;version=0.0.4"), PrometheusText),
            (
                // What Prometheus 2.x sends.
                Some(
                    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                     version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                ),
                OpenMetrics,
            ),
            (Some("Application/OpenMetrics-Text"), OpenMetrics),
            (Some("application/openmetrics-text; q=0"), PrometheusText),
        ] {
            assert_eq!(Exposition::negotiate(accept), expected, "{accept:?}");
        }
    }

    #[test]
    fn counters_are_named_by_their_samples_in_the_text_format() {
        let openmetrics = "# HELP requests Finished requests.\n\
                           # TYPE requests counter\n\
                           requests_total{code=\"OK\"} 3\n\
                           # HELP size Bytes.\n\
                           # TYPE size gauge\n\
                           # UNIT size bytes\n\
                           size 7\n\
                           # EOF\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP requests_total Finished requests.\n\
             # TYPE requests_total counter\n\
             requests_total{code=\"OK\"} 3\n\
             # HELP size Bytes.\n\
             # TYPE size gauge\n\
             size 7\n"
        );
    }
}
