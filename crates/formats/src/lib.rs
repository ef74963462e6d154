//! The file formats of an export ([`records`]): its records, each a line
//! of JSON, written as JSON Lines, gzipped JSON Lines, or Apache Parquet by
//! the schema of their layout ([`layouts`], declared with [`schema`]).
//! Nested fields (lists, structs, lists of structs) become Parquet's nested
//! types, shredded into columns as Dremel's definition and repetition
//! levels ([`columns`]); the Parquet writer holds one row group at a time,
//! so that its memory is bounded whatever the export's size ([`writer`]).
//!
//! The crate uses the `parquet` crate's column writers, not Apache Arrow's
//! arrays, which would add several megabytes to the binary
//! (docs/performance.md#parquet-without-arrow).

pub mod columns;
pub mod error;
pub mod layouts;
pub mod records;
pub mod schema;
pub mod writer;

pub use error::FormatError;
pub use records::{Format, RecordWriter};
pub use schema::{Field, Kind, Schema};
pub use writer::ParquetWriter;
