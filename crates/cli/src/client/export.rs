//! `lightning-store export`: the records of `ExportRollouts` written as
//! JSON Lines (optionally gzipped) or Parquet
//! ([`lightning_store_formats::RecordWriter`]) to standard output or a
//! file, with a progress line on standard error when writing to a file;
//! `--resume` continues an interrupted JSON Lines export after the file's
//! last complete rollout (its last record is the one that carries a
//! cursor).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read as _, Seek as _, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use tokio_stream::StreamExt as _;

use super::args::{ExportArgs, ExportLayoutArg};
use super::error::{ClientError, ClientResult};
use super::session::Session;
use lightning_store_formats::{Format, FormatError, RecordWriter};
use lightning_store_proto as pb;

/// How often the progress line is written at most.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How much of the file's end is read at once looking for its last line.
const TAIL_CHUNK: u64 = 64 * 1024;

fn other(message: impl Into<String>) -> ClientError {
    ClientError::Other(message.into())
}

fn io_error(path: &Path, error: &std::io::Error) -> ClientError {
    other(format!("{}: {error}", path.display()))
}

/// Runs `export`.
pub(super) async fn export(mut session: Session, args: ExportArgs) -> ClientResult {
    let format = Format::from(args.format);
    if args.resume && !format.resumable() {
        return Err(other(format!(
            "--resume continues a --format jsonl file only: a {} file cannot be cut at its last \
             record{}",
            format.as_str(),
            if format == Format::Parquet {
                " (its footer is written last); export as jsonl to resume, or start again"
            } else {
                ""
            }
        )));
    }
    let layout = match args.layout {
        ExportLayoutArg::Rollouts => pb::ExportLayout::Rollouts,
        ExportLayoutArg::Triplets => pb::ExportLayout::Triplets,
        ExportLayoutArg::Messages => pb::ExportLayout::Messages,
    };
    let after = match (&args.output, args.resume) {
        (Some(path), true) => resume_point(path)?,
        _ => None,
    };
    let request = pb::ExportRolloutsRequest {
        status_in: args.status.iter().map(|&s| s as i32).collect(),
        mode_in: args.mode.iter().map(|&m| m as i32).collect(),
        start_time_from: args.from,
        start_time_until: args.until,
        end_time_from: args.ended_from,
        end_time_until: args.ended_until,
        resources_id: args.resources_id.clone(),
        worker_id: args.worker_id.clone(),
        rollout_id_contains: args.id_contains.clone(),
        layout: layout as i32,
        after: after.clone().unwrap_or_default(),
    };
    let mut stream = session.client.export_rollouts(request).await?.into_inner();
    let mut out = RecordWriter::new(open_output(&args)?, format, layout_name(layout))
        .map_err(|e| other(e.to_string()))?;
    let mut progress = args.output.as_ref().map(|_| Progress::new(after.is_some()));
    while let Some(message) = stream.next().await {
        match message?.message {
            Some(pb::export_rollouts_response::Message::Start(start)) => {
                if let Some(progress) = &mut progress {
                    progress.total = start.total;
                }
            }
            Some(pb::export_rollouts_response::Message::Batch(batch)) => {
                for record in batch.records {
                    out.write(&record.json).map_err(output_error)?;
                    if let Some(progress) = &mut progress {
                        progress.record(record.json.len() + 1, !record.cursor.is_empty());
                    }
                }
            }
            None => {}
        }
    }
    out.finish()
        .map_err(output_error)?
        .flush()
        .map_err(ClientError::Output)?;
    if let Some(progress) = &mut progress {
        progress.finish();
    }
    Ok(())
}

/// Returns the name of a layout, as the formats' schemas know it.
fn layout_name(layout: pb::ExportLayout) -> &'static str {
    match layout {
        pb::ExportLayout::Triplets => "triplets",
        pb::ExportLayout::Messages => "messages",
        _ => "rollouts",
    }
}

/// A failure writing the file: of the output, or (a server's record that
/// does not fit the layout's Parquet schema) of the record.
fn output_error(error: FormatError) -> ClientError {
    match error {
        FormatError::Io(error) => ClientError::Output(error),
        error => other(format!("cannot write the record: {error}")),
    }
}

/// The file or standard output the records are written to.
fn open_output(args: &ExportArgs) -> ClientResult<Box<dyn Write + Send>> {
    Ok(match &args.output {
        Some(path) => {
            let file = if args.resume {
                OpenOptions::new().append(true).open(path)
            } else {
                File::create(path)
            }
            .map_err(|e| io_error(path, &e))?;
            Box::new(BufWriter::new(file))
        }
        None => Box::new(BufWriter::new(std::io::stdout())),
    })
}

/// Returns the cursor of the file's last record that carries one, after
/// cutting off what follows it: a torn last line (an export stopped in the
/// middle of a write) and the records of a rollout whose last record was
/// not written (only a rollout's last record carries a cursor; the resumed
/// export writes the rollout again, whole). `None` when no record carries a
/// cursor (or the file does not exist): the file is then emptied.
fn resume_point(path: &Path) -> ClientResult<Option<String>> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, &e)),
    };
    let length = file.metadata().map_err(|e| io_error(path, &e))?.len();
    // The end of the last complete line.
    let mut next = last_newline(&mut file, length).map_err(|e| io_error(path, &e))?;
    #[derive(serde::Deserialize)]
    struct Record {
        cursor: Option<String>,
    }
    // Each line from the end, until one carries a cursor.
    while let Some(end) = next {
        let before = last_newline(&mut file, end).map_err(|e| io_error(path, &e))?;
        let start = before.map_or(0, |newline| newline + 1);
        let mut line = vec![0; usize::try_from(end - start).unwrap_or(usize::MAX)];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(&mut line))
            .map_err(|e| io_error(path, &e))?;
        let record: Record = serde_json::from_slice(&line).map_err(|e| {
            other(format!(
                "{}: line {} bytes from the end is not an export record ({e}); cannot resume",
                path.display(),
                length - start
            ))
        })?;
        if let Some(cursor) = record.cursor {
            if end + 1 < length {
                file.set_len(end + 1).map_err(|e| io_error(path, &e))?;
            }
            return Ok(Some(cursor));
        }
        next = before;
    }
    file.set_len(0).map_err(|e| io_error(path, &e))?;
    Ok(None)
}

/// Returns the position of the last `\n` before `before`.
fn last_newline(file: &mut File, before: u64) -> std::io::Result<Option<u64>> {
    let mut end = before;
    let mut chunk = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(TAIL_CHUNK);
        chunk.resize(usize::try_from(end - start).unwrap_or(0), 0);
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)?;
        if let Some(at) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + at as u64));
        }
        end = start;
    }
    Ok(None)
}

/// The progress line on standard error.
struct Progress {
    total: u64,
    rollouts: u64,
    bytes: u64,
    started: Instant,
    shown: Instant,
    resumed: bool,
}

impl Progress {
    fn new(resumed: bool) -> Self {
        let now = Instant::now();
        Self {
            total: 0,
            rollouts: 0,
            bytes: 0,
            started: now,
            shown: now,
            resumed,
        }
    }

    /// Counts a record of `bytes`, which ends its rollout when `last`.
    fn record(&mut self, bytes: usize, last: bool) {
        self.rollouts += u64::from(last);
        self.bytes += bytes as u64;
        if self.shown.elapsed() >= PROGRESS_EVERY {
            self.shown = Instant::now();
            self.show("exporting");
        }
    }

    fn show(&self, what: &str) {
        let percent = if self.total == 0 {
            100.0
        } else {
            100.0 * self.rollouts as f64 / self.total as f64
        };
        let elapsed = self.started.elapsed().as_secs_f64();
        eprintln!(
            "{what}: {}/{} rollouts ({percent:.0}%), {:.1} MB, {elapsed:.1}s{}{}",
            self.rollouts,
            self.total,
            self.bytes as f64 / 1e6,
            self.estimate(elapsed)
                .map(|left| format!(", about {left:.0}s left"))
                .unwrap_or_default(),
            if self.resumed { " (resumed)" } else { "" }
        );
    }

    /// Returns the seconds left at the pace so far, while rollouts are left.
    fn estimate(&self, elapsed: f64) -> Option<f64> {
        (self.rollouts > 0 && self.rollouts < self.total)
            .then(|| elapsed * (self.total - self.rollouts) as f64 / self.rollouts as f64)
    }

    fn finish(&self) {
        self.show("exported");
    }
}
