//! What can go wrong writing a record.

/// A record that does not fit its schema, or a failure of the file.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A record's field does not hold what the schema declares; nothing
    /// of the record was written.
    #[error("field `{path}`: {message}")]
    Record {
        /// The field's path from the record's root (`messages.content`).
        path: String,
        message: String,
    },
    /// The output failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The Parquet encoder or the output failed.
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
}
