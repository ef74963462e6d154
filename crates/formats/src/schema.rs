//! A layout's schema: the fields of its records and what each holds, and
//! the Parquet schema it makes.

use std::sync::Arc;

use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
use parquet::errors::Result;
use parquet::schema::types::{Type, TypePtr};

/// What a field holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A UTF-8 string.
    String,
    /// A 64-bit integer (a JSON number without a fraction).
    Int64,
    /// A 64-bit float (any JSON number).
    Double,
    /// A boolean.
    Boolean,
    /// Any JSON value, kept as its JSON text (Parquet's `JSON` type):
    /// for what has no fixed shape (an input, a span's attributes).
    Json,
    /// A list of items of one kind (Parquet's `LIST`); its items are never
    /// null, except items of kind `Json` (a JSON `null` item is kept).
    List(Box<Kind>),
    /// A group of fields.
    Struct(Vec<Field>),
    /// The fields of the enclosing record or struct that the schema does
    /// not declare, as one JSON object's text (Parquet's `JSON` type);
    /// null when there are none. For an optional field.
    Extra,
}

/// A named field of a record or of a struct.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    /// Whether the field may be missing or `null`.
    pub optional: bool,
}

impl Field {
    /// A field that every record holds.
    pub fn required(name: &'static str, kind: Kind) -> Self {
        Self {
            name,
            kind,
            optional: false,
        }
    }

    /// A field that may be missing or `null`.
    pub fn optional(name: &'static str, kind: Kind) -> Self {
        Self {
            name,
            kind,
            optional: true,
        }
    }
}

/// The schema of a layout's records.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// The Parquet message's name (the layout's).
    pub name: &'static str,
    pub fields: Vec<Field>,
}

impl Schema {
    /// Returns the Parquet schema: lists in the three-level `LIST` form
    /// every reader expects (`<name> (LIST) { repeated group list {
    /// element } }`).
    pub fn to_parquet(&self) -> Result<TypePtr> {
        let fields = self
            .fields
            .iter()
            .map(|field| field_type(field.name, &field.kind, repetition(field.optional)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(
            Type::group_type_builder(self.name)
                .with_fields(fields)
                .build()?,
        ))
    }
}

fn repetition(optional: bool) -> Repetition {
    if optional {
        Repetition::OPTIONAL
    } else {
        Repetition::REQUIRED
    }
}

/// Returns whether a list's items of `kind` may be null.
pub fn nullable_items(kind: &Kind) -> bool {
    matches!(kind, Kind::Json)
}

fn field_type(name: &str, kind: &Kind, repetition: Repetition) -> Result<TypePtr> {
    let primitive = |physical, logical: Option<LogicalType>| -> Result<TypePtr> {
        Ok(Arc::new(
            Type::primitive_type_builder(name, physical)
                .with_repetition(repetition)
                .with_logical_type(logical)
                .build()?,
        ))
    };
    match kind {
        Kind::String => primitive(PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
        Kind::Json | Kind::Extra => primitive(PhysicalType::BYTE_ARRAY, Some(LogicalType::Json)),
        Kind::Int64 => primitive(PhysicalType::INT64, None),
        Kind::Double => primitive(PhysicalType::DOUBLE, None),
        Kind::Boolean => primitive(PhysicalType::BOOLEAN, None),
        Kind::List(item) => {
            let element = field_type("element", item, repetition_of_item(item))?;
            let list = Type::group_type_builder("list")
                .with_repetition(Repetition::REPEATED)
                .with_fields(vec![element])
                .build()?;
            Ok(Arc::new(
                Type::group_type_builder(name)
                    .with_repetition(repetition)
                    .with_logical_type(Some(LogicalType::List))
                    .with_fields(vec![Arc::new(list)])
                    .build()?,
            ))
        }
        Kind::Struct(fields) => {
            let fields = fields
                .iter()
                .map(|field| field_type(field.name, &field.kind, self::repetition(field.optional)))
                .collect::<Result<Vec<_>>>()?;
            Ok(Arc::new(
                Type::group_type_builder(name)
                    .with_repetition(repetition)
                    .with_fields(fields)
                    .build()?,
            ))
        }
    }
}

fn repetition_of_item(item: &Kind) -> Repetition {
    repetition(nullable_items(item))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_take_the_three_level_form() {
        let schema = Schema {
            name: "triplet",
            fields: vec![
                Field::required("rollout_id", Kind::String),
                Field::optional("reward", Kind::Double),
                Field::required("prompt_ids", Kind::List(Box::new(Kind::Int64))),
            ],
        };
        let mut text = Vec::new();
        parquet::schema::printer::print_schema(&mut text, &schema.to_parquet().unwrap());
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("REQUIRED BYTE_ARRAY rollout_id (STRING)"),
            "{text}"
        );
        assert!(text.contains("OPTIONAL DOUBLE reward"), "{text}");
        assert!(text.contains("REQUIRED group prompt_ids (LIST)"), "{text}");
        assert!(text.contains("REPEATED group list"), "{text}");
        assert!(text.contains("REQUIRED INT64 element"), "{text}");
    }
}
