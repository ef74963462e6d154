//! Statements and rows: SQL text with the values bound to its parameters,
//! and the cells of a result row, read by position.

use std::borrow::Cow;

use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::model::Timestamp;

/// A value bound to a statement parameter. NULLs carry their type:
/// PostgreSQL types every parameter. Arrays are bound only on a shared
/// database (PostgreSQL); SQLite has none.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg<'a> {
    NullInt,
    NullText,
    Int(i64),
    Text(Cow<'a, str>),
    /// A column of integers, for a shared database's `unnest`.
    Ints(Vec<Option<i64>>),
    /// A column of texts, for a shared database's `unnest`: borrowed where
    /// the caller holds them (the database encodes them at bind time).
    Texts(Vec<Option<Cow<'a, str>>>),
}

/// A parameter type: its NULL.
pub trait Nullable {
    /// The NULL of this type.
    const NULL: Arg<'static>;
}

impl Nullable for i64 {
    const NULL: Arg<'static> = Arg::NullInt;
}

impl Nullable for u64 {
    const NULL: Arg<'static> = Arg::NullInt;
}

impl Nullable for Timestamp {
    const NULL: Arg<'static> = Arg::NullInt;
}

impl Nullable for &str {
    const NULL: Arg<'static> = Arg::NullText;
}

impl Nullable for String {
    const NULL: Arg<'static> = Arg::NullText;
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::Int(value)
    }
}

impl From<u64> for Arg<'_> {
    fn from(value: u64) -> Self {
        Arg::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

impl From<Timestamp> for Arg<'_> {
    fn from(value: Timestamp) -> Self {
        Arg::Int(value.0)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Arg::Text(Cow::Borrowed(value))
    }
}

impl From<String> for Arg<'_> {
    fn from(value: String) -> Self {
        Arg::Text(Cow::Owned(value))
    }
}

impl<'a, T: Into<Arg<'a>> + Nullable> From<Option<T>> for Arg<'a> {
    fn from(value: Option<T>) -> Self {
        value.map_or(T::NULL, Into::into)
    }
}

/// SQL text with its parameters (`$1`, `$2`, … in bind order).
#[derive(Debug, Clone)]
pub struct Statement<'a> {
    pub sql: Cow<'static, str>,
    pub args: Vec<Arg<'a>>,
}

impl<'a> Statement<'a> {
    /// Returns a statement without parameters bound yet.
    pub fn new(sql: &'static str) -> Self {
        Self {
            sql: Cow::Borrowed(sql),
            args: Vec::new(),
        }
    }

    /// Binds the next parameter.
    pub fn bind(mut self, value: impl Into<Arg<'a>>) -> Self {
        self.args.push(value.into());
        self
    }
}

/// One result row; cells are read by position.
pub trait Row {
    /// Returns an integer cell (`None`: NULL).
    fn opt_int(&self, index: usize) -> StoreResult<Option<i64>>;
    /// Returns a text cell (`None`: NULL).
    fn opt_text(&self, index: usize) -> StoreResult<Option<String>>;

    /// Returns an integer cell that must not be NULL.
    fn int(&self, index: usize) -> StoreResult<i64> {
        self.opt_int(index)?.ok_or_else(|| null_cell(index))
    }

    /// Returns a text cell that must not be NULL.
    fn text(&self, index: usize) -> StoreResult<String> {
        self.opt_text(index)?.ok_or_else(|| null_cell(index))
    }
}

/// The error of a NULL in a column that must not hold one (as
/// `codec::corrupt` words it).
fn null_cell(index: usize) -> StoreError {
    StoreError::Internal(format!(
        "stored row does not decode: column {index} is NULL"
    ))
}
