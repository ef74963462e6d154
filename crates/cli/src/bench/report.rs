//! The results of a benchmark: a readable table, or JSON for machines.

use comfy_table::{CellAlignment, Table, presets};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{Map, Value};

use super::driver::Measured;
use super::stats::Series;

/// Results of one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Scenario name, for example `lifecycle`.
    pub scenario: String,
    /// The server under test (URL, and the command when the benchmark started it).
    pub server: String,
    /// The scenario's settings (batch size, span size, ...).
    pub settings: Map<String, Value>,
    /// One row per run (one per concurrency level, or per protocol).
    pub rows: Vec<Row>,
    /// Figures computed from the rows (ratios, rates), printed after them.
    pub notes: Vec<String>,
    /// The exports of `bench export`, one per layout and format.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<ExportRun>,
}

/// One run of `lightning-store export` as a subprocess: a layout in a format.
#[derive(Debug, Clone, Serialize)]
pub struct ExportRun {
    /// The layout exported (`--layout`).
    pub layout: String,
    /// The file format written (`--format`).
    pub format: String,
    /// Rollouts exported, as the export reported them.
    pub rollouts: Option<u64>,
    /// Records (lines) written; absent for a format that is not JSON Lines.
    pub records: Option<u64>,
    /// Size of the file written.
    pub bytes: u64,
    /// Wall time of the subprocess, from its start to its exit.
    pub elapsed_secs: f64,
    /// Rollouts per second of wall time.
    pub rollouts_per_sec: Option<f64>,
    /// Megabytes (10^6 bytes) of file per second of wall time.
    pub mb_per_sec: f64,
    /// The server's VmRSS before the export (when the benchmark started it).
    pub server_rss_before_bytes: Option<u64>,
    /// The server's largest VmRSS sampled during the export.
    pub server_rss_peak_bytes: Option<u64>,
    /// The server's VmRSS after the export.
    pub server_rss_after_bytes: Option<u64>,
    /// The export subprocess's peak resident memory (`VmHWM`, sampled with
    /// the server's; absent when it exited before the first sample).
    pub client_peak_rss_bytes: Option<u64>,
    /// Why the export failed, if it did.
    pub error: Option<String>,
}

impl ExportRun {
    /// Returns how much the server's RSS grew from before the export to its
    /// peak during it.
    pub fn server_rss_growth_bytes(&self) -> Option<u64> {
        Some(
            self.server_rss_peak_bytes?
                .saturating_sub(self.server_rss_before_bytes?),
        )
    }
}

/// Results of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What was run, for example `lifecycle` or `ingest AddSpans`.
    pub name: String,
    /// Concurrent clients (or parked workers, or subscribers).
    pub clients: usize,
    /// What one operation is, for example `lifecycles` or `requests`.
    pub op_unit: &'static str,
    /// Completed operations.
    pub ops: u64,
    /// Operations per second of wall time.
    pub ops_per_sec: f64,
    /// What the operations carried, for example `spans`; absent when not counted.
    pub item_unit: Option<&'static str>,
    /// Items carried by the completed operations.
    pub items: u64,
    /// Items per second of wall time.
    pub items_per_sec: f64,
    /// Failed operations.
    pub errors: u64,
    /// The first error, if any.
    pub first_error: Option<String>,
    /// Wall time of the run in seconds.
    pub elapsed_secs: f64,
    /// What one latency sample measures.
    pub latency_of: &'static str,
    /// Latency distribution of the samples.
    pub latency: Latency,
    /// Per-RPC calls, rates and latencies, when the operation makes several calls.
    pub calls: Vec<Call>,
    /// Server memory growth over the run, when the benchmark started the server.
    pub memory: Option<Memory>,
}

/// One RPC's share of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Call {
    /// The RPC name, for example `EnqueueRollout`.
    pub name: &'static str,
    /// Successful calls.
    pub calls: u64,
    /// Successful calls per second of wall time.
    pub calls_per_sec: f64,
    /// Failed calls.
    pub errors: u64,
    /// Latency distribution of the successful calls.
    pub latency: Latency,
}

/// A latency distribution in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Number of samples.
    pub samples: u64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
}

/// Growth of the server's resident memory over a run.
#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    /// VmRSS before the run, in bytes.
    pub rss_before_bytes: u64,
    /// VmRSS after the run, in bytes.
    pub rss_after_bytes: u64,
    /// Spans the server stored during the run (from its statistics).
    pub spans_stored: u64,
    /// RSS growth divided by the stored spans.
    pub bytes_per_span: f64,
}

impl Latency {
    /// Summarizes a histogram of nanoseconds.
    pub fn of(histogram: &Histogram<u64>) -> Self {
        let ms = |ns: u64| ns as f64 / 1e6;
        let samples = histogram.len();
        if samples == 0 {
            return Self {
                samples,
                mean_ms: 0.0,
                p50_ms: 0.0,
                p90_ms: 0.0,
                p99_ms: 0.0,
                max_ms: 0.0,
            };
        }
        Self {
            samples,
            mean_ms: histogram.mean() / 1e6,
            p50_ms: ms(histogram.value_at_quantile(0.50)),
            p90_ms: ms(histogram.value_at_quantile(0.90)),
            p99_ms: ms(histogram.value_at_quantile(0.99)),
            max_ms: ms(histogram.max()),
        }
    }
}

/// Describes a run for [`Row::new`].
pub struct RowSpec {
    /// What was run.
    pub name: String,
    /// Concurrent clients.
    pub clients: usize,
    /// What one operation is.
    pub op_unit: &'static str,
    /// What the operations carried, if counted.
    pub item_unit: Option<&'static str>,
    /// What one latency sample measures.
    pub latency_of: &'static str,
}

impl Row {
    /// Builds a row from what a run measured.
    pub fn new(spec: RowSpec, measured: &Measured) -> Self {
        let r = &measured.recorder;
        let secs = measured.elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        Self {
            name: spec.name,
            clients: spec.clients,
            op_unit: spec.op_unit,
            ops: r.ops,
            ops_per_sec: r.ops as f64 / secs,
            item_unit: spec.item_unit,
            items: r.items,
            items_per_sec: r.items as f64 / secs,
            errors: r.total.errors,
            first_error: r.first_error.clone(),
            elapsed_secs: measured.elapsed.as_secs_f64(),
            latency_of: spec.latency_of,
            latency: Latency::of(&r.total.latency),
            calls: r
                .calls
                .iter()
                .map(|(name, series)| Call::new(name, series, secs))
                .collect(),
            memory: None,
        }
    }
}

impl Call {
    fn new(name: &'static str, series: &Series, secs: f64) -> Self {
        let calls = series.latency.len();
        Self {
            name,
            calls,
            calls_per_sec: calls as f64 / secs,
            errors: series.errors,
            latency: Latency::of(&series.latency),
        }
    }
}

impl Report {
    /// Returns an empty report of `scenario` with its settings.
    pub fn new(scenario: &str, settings: Value) -> Self {
        Self {
            scenario: scenario.to_owned(),
            server: String::new(),
            settings: match settings {
                Value::Object(map) => map,
                _ => Map::new(),
            },
            rows: Vec::new(),
            notes: Vec::new(),
            exports: Vec::new(),
        }
    }

    /// Renders the report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Renders the report as a table followed by notes (latency meaning,
    /// memory, first errors).
    pub fn to_table(&self) -> String {
        let mut table = Table::new();
        table.load_preset(presets::NOTHING).set_header(vec![
            "SCENARIO",
            "CLIENTS",
            "OPS",
            "THROUGHPUT",
            "P50 MS",
            "P90 MS",
            "P99 MS",
            "MAX MS",
            "ERRORS",
        ]);
        for row in &self.rows {
            let mut throughput = format!("{} {}/s", grouped(row.ops_per_sec), row.op_unit);
            if let Some(unit) = row.item_unit {
                throughput.push_str(&format!(" = {} {unit}/s", grouped(row.items_per_sec)));
            }
            table.add_row(latency_cells(
                vec![
                    row.name.clone(),
                    row.clients.to_string(),
                    row.ops.to_string(),
                    throughput,
                ],
                &row.latency,
                row.errors,
            ));
            for call in &row.calls {
                table.add_row(latency_cells(
                    vec![
                        format!("  {}", call.name),
                        String::new(),
                        call.calls.to_string(),
                        format!("{} calls/s", grouped(call.calls_per_sec)),
                    ],
                    &call.latency,
                    call.errors,
                ));
            }
        }
        for index in 1..9 {
            if let Some(column) = table.column_mut(index) {
                column.set_cell_alignment(if index == 3 {
                    CellAlignment::Left
                } else {
                    CellAlignment::Right
                });
            }
        }
        for column in table.column_iter_mut() {
            column.set_padding((0, 2));
        }
        let mut lines: Vec<String> = if self.rows.is_empty() && !self.exports.is_empty() {
            self.export_lines()
        } else {
            table.lines().map(|l| l.trim_end().to_owned()).collect()
        };
        lines.push(String::new());
        lines.extend(self.notes.iter().cloned());
        lines.push(format!("server: {}", self.server));
        let shared = self
            .rows
            .first()
            .map(|first| first.latency_of)
            .filter(|of| {
                // Many differently named rows measuring the same thing share
                // one note.
                let mut names: Vec<&str> = self.rows.iter().map(|row| row.name.as_str()).collect();
                names.dedup();
                names.len() > 2 && self.rows.iter().all(|row| row.latency_of == *of)
            });
        if let Some(latency_of) = shared {
            lines.push(format!("every row: latency of {latency_of}"));
        }
        let mut latency_notes: Vec<String> = Vec::new();
        for row in self.rows.iter().filter(|_| shared.is_none()) {
            let note = format!("{}: latency of {}", row.name, row.latency_of);
            if !latency_notes.contains(&note) {
                latency_notes.push(note);
            }
        }
        lines.extend(latency_notes);
        for row in &self.rows {
            if let Some(m) = &row.memory {
                lines.push(format!(
                    "{} (c={}): server RSS {:.1} -> {:.1} MiB for {} stored spans: {:.0} bytes per span",
                    row.name,
                    row.clients,
                    m.rss_before_bytes as f64 / 1048576.0,
                    m.rss_after_bytes as f64 / 1048576.0,
                    m.spans_stored,
                    m.bytes_per_span
                ));
            }
            if let Some(error) = &row.first_error {
                lines.push(format!(
                    "{} (c={}): first error: {error}",
                    row.name, row.clients
                ));
            }
        }
        lines.join("\n")
    }
}

impl Report {
    /// Renders the exports as a table.
    fn export_lines(&self) -> Vec<String> {
        let mib = |bytes: u64| format!("{:.1}", bytes as f64 / 1048576.0);
        let optional = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
        let mut table = Table::new();
        table.load_preset(presets::NOTHING).set_header(vec![
            "LAYOUT",
            "FORMAT",
            "ROLLOUTS",
            "RECORDS",
            "MB",
            "SECS",
            "ROLLOUTS/S",
            "MB/S",
            "SERVER RSS MIB",
            "+PEAK MIB",
            "CLIENT PEAK MIB",
        ]);
        for run in &self.exports {
            table.add_row(vec![
                run.layout.clone(),
                run.format.clone(),
                optional(run.rollouts.map(|n| n.to_string())),
                optional(run.records.map(|n| n.to_string())),
                format!("{:.1}", run.bytes as f64 / 1e6),
                format!("{:.2}", run.elapsed_secs),
                optional(run.rollouts_per_sec.map(grouped)),
                format!("{:.1}", run.mb_per_sec),
                optional(
                    run.server_rss_before_bytes
                        .zip(run.server_rss_after_bytes)
                        .map(|(before, after)| format!("{} -> {}", mib(before), mib(after))),
                ),
                optional(run.server_rss_growth_bytes().map(mib)),
                optional(run.client_peak_rss_bytes.map(mib)),
            ]);
        }
        for index in 2..11 {
            if let Some(column) = table.column_mut(index) {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        for column in table.column_iter_mut() {
            column.set_padding((0, 2));
        }
        let mut lines: Vec<String> = table.lines().map(|l| l.trim_end().to_owned()).collect();
        for run in &self.exports {
            if let Some(error) = &run.error {
                lines.push(format!("{} {}: {error}", run.layout, run.format));
            }
        }
        lines
    }
}

fn latency_cells(mut cells: Vec<String>, latency: &Latency, errors: u64) -> Vec<String> {
    cells.extend(
        [
            latency.p50_ms,
            latency.p90_ms,
            latency.p99_ms,
            latency.max_ms,
        ]
        .map(|ms| format!("{ms:.3}")),
    );
    cells.push(errors.to_string());
    cells
}

/// Formats a rate with thousands separators, for example `12,345`.
fn grouped(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_grouped_by_thousands() {
        assert_eq!(grouped(0.4), "0");
        assert_eq!(grouped(999.0), "999");
        assert_eq!(grouped(1000.0), "1,000");
        assert_eq!(grouped(1234567.8), "1,234,568");
    }
}
