//! A Parquet file written a row group at a time: records are shredded into
//! [`Columns`] until the group holds [`ROW_GROUP_ROWS`] records or about
//! [`ROW_GROUP_BYTES`], then written out, so that what the writer holds is
//! bounded whatever the file's size.

use std::io::Write;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{BoolType, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use serde_json::Value;

use super::columns::{Columns, Leaf, Values};
use super::error::FormatError;
use super::schema::Schema;

/// Records per row group at most.
pub const ROW_GROUP_ROWS: usize = 16_384;

/// About the bytes of values a row group holds at most before it is
/// written.
pub const ROW_GROUP_BYTES: usize = 32 << 20;

/// Writes records of one schema into a Parquet file (Snappy-compressed
/// pages).
pub struct ParquetWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    columns: Columns,
}

impl<W: Write + Send> ParquetWriter<W> {
    /// Starts a file of `schema`'s records on `out`.
    pub fn new(out: W, schema: &Schema) -> Result<Self, FormatError> {
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("lightning-store {}", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Self {
            file: SerializedFileWriter::new(out, schema.to_parquet()?, Arc::new(properties))?,
            columns: Columns::new(schema),
        })
    }

    /// Adds a record; a record that does not fit the schema is refused
    /// whole, and the file stays as it was.
    pub fn write(&mut self, record: &Value) -> Result<(), FormatError> {
        self.columns.push(record)?;
        if self.columns.rows() >= ROW_GROUP_ROWS || self.columns.bytes() >= ROW_GROUP_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the records held as a row group.
    pub fn flush(&mut self) -> Result<(), FormatError> {
        if self.columns.rows() == 0 {
            return Ok(());
        }
        let mut group = self.file.next_row_group()?;
        for leaf in self.columns.leaves() {
            let mut column = group
                .next_column()?
                .expect("the schema has a column per leaf");
            write_leaf(&mut column, leaf)?;
            column.close()?;
        }
        group.close()?;
        self.columns.clear();
        Ok(())
    }

    /// Returns how many bytes of the file were written (row groups
    /// written out; not the records held for the next one).
    pub fn bytes_written(&self) -> usize {
        self.file.bytes_written()
    }

    /// Writes what is held and the file's footer, and returns the output.
    pub fn finish(mut self) -> Result<W, FormatError> {
        self.flush()?;
        Ok(self.file.into_inner()?)
    }
}

impl ParquetWriter<Vec<u8>> {
    /// Returns the output holding every row group written so far (its
    /// bytes may be taken away: the file's offsets are counted apart).
    pub fn flushed_output(&mut self) -> Result<&mut Vec<u8>, FormatError> {
        self.file.flush()?;
        Ok(self.file.inner_mut())
    }
}

fn write_leaf(
    column: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    leaf: &Leaf,
) -> Result<(), FormatError> {
    let def = (leaf.max_def > 0).then_some(leaf.def.as_slice());
    let rep = (leaf.max_rep > 0).then_some(leaf.rep.as_slice());
    match &leaf.values {
        Values::Bytes(values) => column
            .typed::<ByteArrayType>()
            .write_batch(values, def, rep)?,
        Values::Int64(values) => column.typed::<Int64Type>().write_batch(values, def, rep)?,
        Values::Double(values) => column.typed::<DoubleType>().write_batch(values, def, rep)?,
        Values::Boolean(values) => column.typed::<BoolType>().write_batch(values, def, rep)?,
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use serde_json::json;

    use super::*;
    use crate::schema::{Field, Kind};

    fn schema() -> Schema {
        Schema {
            name: "triplet",
            fields: vec![
                Field::required("rollout_id", Kind::String),
                Field::optional("reward", Kind::Double),
                Field::required("prompt_ids", Kind::List(Box::new(Kind::Int64))),
                Field::optional("logprobs", Kind::List(Box::new(Kind::Double))),
                Field::optional("last", Kind::Boolean),
                Field::optional("input", Kind::Json),
                Field::optional(
                    "messages",
                    Kind::List(Box::new(Kind::Struct(vec![
                        Field::required("role", Kind::String),
                        Field::optional("content", Kind::String),
                    ]))),
                ),
                Field::optional(
                    "attempt",
                    Kind::Struct(vec![
                        Field::required("attempt_id", Kind::String),
                        Field::required("sequence_id", Kind::Int64),
                    ]),
                ),
            ],
        }
    }

    fn read(bytes: Vec<u8>) -> (Vec<Value>, usize) {
        let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
        let groups = reader.metadata().num_row_groups();
        let rows = reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| row.unwrap().to_json_value())
            .collect();
        (rows, groups)
    }

    #[test]
    fn records_read_back_as_written() {
        let hostile = "quote \" newline \n NUL \u{0} emoji 🦀";
        let records = [
            json!({"rollout_id": "ro-1", "reward": 0.5, "prompt_ids": [1, 2, 3],
                   "logprobs": [-0.5, -1.25], "last": true, "input": {"q": hostile},
                   "messages": [{"role": "user", "content": hostile}, {"role": "assistant"}],
                   "attempt": {"attempt_id": "at-1", "sequence_id": 2}}),
            json!({"rollout_id": "ro-2", "prompt_ids": [], "messages": []}),
            json!({"rollout_id": "ro-3", "prompt_ids": [7], "logprobs": null, "input": [1, null]}),
        ];
        let mut writer = ParquetWriter::new(Vec::new(), &schema()).unwrap();
        for record in &records {
            writer.write(record).unwrap();
        }
        let (rows, groups) = read(writer.finish().unwrap());
        assert_eq!(groups, 1);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0]["rollout_id"], "ro-1");
        assert_eq!(rows[0]["reward"], 0.5);
        assert_eq!(rows[0]["prompt_ids"], json!([1, 2, 3]));
        assert_eq!(rows[0]["logprobs"], json!([-0.5, -1.25]));
        assert_eq!(rows[0]["last"], true);
        let input: Value = serde_json::from_str(rows[0]["input"].as_str().unwrap()).unwrap();
        assert_eq!(input, json!({"q": hostile}));
        assert_eq!(
            rows[0]["messages"],
            json!([{"role": "user", "content": hostile}, {"role": "assistant", "content": null}])
        );
        assert_eq!(
            rows[0]["attempt"],
            json!({"attempt_id": "at-1", "sequence_id": 2})
        );
        assert_eq!(rows[1]["reward"], Value::Null);
        assert_eq!(rows[1]["prompt_ids"], json!([]));
        assert_eq!(rows[1]["messages"], json!([]));
        assert_eq!(rows[1]["attempt"], Value::Null);
        assert_eq!(rows[2]["logprobs"], Value::Null);
        assert_eq!(rows[2]["input"], "[1,null]");
    }

    #[test]
    fn a_refused_record_leaves_the_file_whole() {
        let mut writer = ParquetWriter::new(Vec::new(), &schema()).unwrap();
        writer
            .write(&json!({"rollout_id": "ro-1", "prompt_ids": [1]}))
            .unwrap();
        let refused = writer.write(&json!({"rollout_id": "ro-2", "prompt_ids": [1, "two"]}));
        assert_eq!(
            refused.unwrap_err().to_string(),
            "field `prompt_ids[]`: expected a 64-bit integer"
        );
        writer
            .write(&json!({"rollout_id": "ro-3", "prompt_ids": [3]}))
            .unwrap();
        let (rows, _) = read(writer.finish().unwrap());
        let ids: Vec<&Value> = rows.iter().map(|row| &row["rollout_id"]).collect();
        assert_eq!(ids, ["ro-1", "ro-3"]);
        assert_eq!(rows[1]["prompt_ids"], json!([3]));
    }

    #[test]
    fn row_groups_bound_what_is_held() {
        let mut writer = ParquetWriter::new(Vec::new(), &schema()).unwrap();
        let total = ROW_GROUP_ROWS * 2 + 5;
        for index in 0..total {
            writer
                .write(&json!({"rollout_id": format!("ro-{index}"), "prompt_ids": [index]}))
                .unwrap();
            assert!(writer.columns.rows() < ROW_GROUP_ROWS);
        }
        let (rows, groups) = read(writer.finish().unwrap());
        assert_eq!(groups, 3);
        assert_eq!(rows.len(), total);
        assert_eq!(rows[total - 1]["prompt_ids"], json!([total - 1]));
    }
}
