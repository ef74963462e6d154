//! The file formats of `lightning-store export`: records, as the export's
//! JSON documents, written as Apache Parquet by a schema each layout
//! declares ([`schema`]). Nested fields (lists, structs, lists of structs)
//! become Parquet's nested types, shredded into columns as Dremel's
//! definition and repetition levels ([`columns`]); the writer holds one row
//! group at a time, so that its memory is bounded whatever the export's
//! size ([`writer`]).
//!
//! The crate uses the `parquet` crate's column writers, not Apache Arrow's
//! arrays: Arrow's crates would add about 7.6 MB to the binary, the column
//! writers 0.7 MB (docs/performance.md, "Parquet without Arrow").

pub mod columns;
pub mod error;
pub mod schema;
pub mod writer;

pub use error::FormatError;
pub use schema::{Field, Kind, Schema};
pub use writer::ParquetWriter;
