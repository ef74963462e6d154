//! An export's file, in one of its [`Format`]s: the records (each a line
//! of JSON, as the export writes them) written as JSON Lines, gzipped JSON
//! Lines, or Parquet by the layout's schema ([`crate::layouts`]). The
//! command line writes a file with it, the console a download.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::Value;

use super::error::FormatError;
use super::layouts;
use super::writer::ParquetWriter;

/// The file formats of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// JSON Lines: one record per line.
    #[default]
    Jsonl,
    /// JSON Lines compressed with gzip.
    JsonlGz,
    /// Apache Parquet, the layout's schema, Snappy-compressed.
    Parquet,
}

impl Format {
    /// Every format, in the order the docs list them.
    pub const ALL: [Format; 3] = [Format::Jsonl, Format::JsonlGz, Format::Parquet];

    /// Returns the format's name (`--format`, `format=`), also its file
    /// extension.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::JsonlGz => "jsonl.gz",
            Format::Parquet => "parquet",
        }
    }

    /// Returns the format of a name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.as_str() == name)
    }

    /// Returns the media type of a download in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Jsonl => "application/x-ndjson",
            Format::JsonlGz => "application/gzip",
            Format::Parquet => "application/vnd.apache.parquet",
        }
    }

    /// Whether an interrupted file in this format can be continued: only
    /// plain JSON Lines can be cut after its last complete record (a gzip
    /// stream cannot be cut there, and a Parquet file is readable only
    /// once its footer is written).
    pub fn resumable(self) -> bool {
        self == Format::Jsonl
    }

    /// Counts the records of a file in this format: its lines (gunzipped
    /// for `jsonl.gz`), or the rows its Parquet footer counts.
    pub fn count_records(self, path: &Path) -> Result<u64, FormatError> {
        let file = File::open(path)?;
        match self {
            Format::Jsonl => count_lines(file),
            Format::JsonlGz => count_lines(MultiGzDecoder::new(file)),
            Format::Parquet => {
                let rows = SerializedFileReader::new(file)?
                    .metadata()
                    .file_metadata()
                    .num_rows();
                Ok(u64::try_from(rows).unwrap_or(0))
            }
        }
    }
}

/// Counts the line ends of what `read` reads.
fn count_lines(read: impl Read) -> Result<u64, FormatError> {
    let mut reader = BufReader::with_capacity(1 << 20, read);
    let mut lines = 0;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(lines);
        }
        lines += buffer.iter().filter(|&&b| b == b'\n').count() as u64;
        let used = buffer.len();
        reader.consume(used);
    }
}

/// The writer of one export's file.
pub struct RecordWriter<W: Write + Send> {
    out: Output<W>,
    /// The bytes [`RecordWriter::take_written`] took.
    taken: usize,
}

enum Output<W: Write + Send> {
    Lines(W),
    Gzip(GzEncoder<W>),
    Parquet(Box<ParquetWriter<W>>),
}

impl<W: Write + Send> RecordWriter<W> {
    /// Starts a file of `layout`'s records in `format` on `out`.
    pub fn new(out: W, format: Format, layout: &str) -> Result<Self, FormatError> {
        let out = match format {
            Format::Jsonl => Output::Lines(out),
            Format::JsonlGz => Output::Gzip(GzEncoder::new(out, Compression::default())),
            Format::Parquet => {
                let schema = layouts::schema(layout).ok_or_else(|| FormatError::Record {
                    path: String::new(),
                    message: format!("no Parquet schema for the layout {layout:?}"),
                })?;
                Output::Parquet(Box::new(ParquetWriter::new(out, &schema)?))
            }
        };
        Ok(Self { out, taken: 0 })
    }

    /// Writes one record, given as its line of JSON (without its end).
    pub fn write(&mut self, json: &str) -> Result<(), FormatError> {
        let line = |out: &mut dyn Write| {
            out.write_all(json.as_bytes())
                .and_then(|()| out.write_all(b"\n"))
        };
        match &mut self.out {
            Output::Lines(out) => line(out)?,
            Output::Gzip(out) => line(out)?,
            Output::Parquet(out) => {
                let record: Value =
                    serde_json::from_str(json).map_err(|e| FormatError::Record {
                        path: String::new(),
                        message: format!("not a JSON record: {e}"),
                    })?;
                out.write(&record)?;
            }
        }
        Ok(())
    }

    /// Ends the file (the gzip trailer, the Parquet footer) and returns
    /// the output.
    pub fn finish(self) -> Result<W, FormatError> {
        match self.out {
            Output::Lines(out) => Ok(out),
            Output::Gzip(out) => Ok(out.finish()?),
            Output::Parquet(out) => out.finish(),
        }
    }
}

impl RecordWriter<Vec<u8>> {
    /// Returns how many bytes [`RecordWriter::take_written`] would take.
    pub fn written(&self) -> usize {
        match &self.out {
            Output::Lines(out) => out.len(),
            Output::Gzip(out) => out.get_ref().len(),
            Output::Parquet(out) => out.bytes_written() - self.taken,
        }
    }

    /// Takes the bytes written so far (for a download sent in chunks):
    /// the JSON Lines or gzip output, or the Parquet row groups written
    /// (records are held until their row group is full).
    pub fn take_written(&mut self) -> Result<Vec<u8>, FormatError> {
        let written = match &mut self.out {
            Output::Lines(out) => out,
            Output::Gzip(out) => out.get_mut(),
            Output::Parquet(out) => out.flushed_output()?,
        };
        let written = std::mem::take(written);
        self.taken += written.len();
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    const LINES: [&str; 2] = [
        r#"{"cursor":null,"kind":"row","rollout_id":"ro-1","prompt_token_ids":[1,2],"response_token_ids":[3]}"#,
        r#"{"cursor":"x1.5.ro-1","kind":"no_rows","rollout_id":"ro-2","model_calls":0,"reasons":[{"code":"no_spans","count":null,"detail":null}]}"#,
    ];

    #[test]
    fn every_format_counts_its_records() {
        let dir = std::env::temp_dir().join(format!("formats-count-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for format in Format::ALL {
            let path = dir.join(format!("records.{}", format.as_str()));
            std::fs::write(&path, write_in_chunks(format)).unwrap();
            assert_eq!(format.count_records(&path).unwrap(), 2, "{format:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn write_in_chunks(format: Format) -> Vec<u8> {
        let mut writer = RecordWriter::new(Vec::new(), format, "triplets").unwrap();
        let mut file = Vec::new();
        for line in LINES {
            writer.write(line).unwrap();
            let written = writer.written();
            let chunk = writer.take_written().unwrap();
            assert_eq!(chunk.len(), written);
            file.extend(chunk);
        }
        file.extend(writer.finish().unwrap());
        file
    }

    #[test]
    fn every_format_writes_the_records() {
        let lines = write_in_chunks(Format::Jsonl);
        assert_eq!(String::from_utf8(lines).unwrap(), LINES.join("\n") + "\n");

        let gzip = write_in_chunks(Format::JsonlGz);
        let mut text = String::new();
        flate2::read::GzDecoder::new(gzip.as_slice())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, LINES.join("\n") + "\n");

        let parquet = write_in_chunks(Format::Parquet);
        let reader = SerializedFileReader::new(bytes::Bytes::from(parquet)).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 2);
        let kinds: Vec<String> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| row.unwrap().to_json_value()["kind"].to_string())
            .collect();
        assert_eq!(kinds, ["\"row\"", "\"no_rows\""]);
    }

    #[test]
    fn a_parquet_file_refuses_what_is_not_a_record_of_its_layout() {
        let mut writer = RecordWriter::new(Vec::new(), Format::Parquet, "messages").unwrap();
        let error = writer.write(r#"{"rollout_id": 3}"#).unwrap_err();
        assert!(error.to_string().contains("messages"), "{error}");
        assert!(RecordWriter::new(Vec::new(), Format::Parquet, "spans").is_err());
        assert_eq!(Format::parse("jsonl.gz"), Some(Format::JsonlGz));
        assert!(Format::parse("csv").is_none());
    }
}
