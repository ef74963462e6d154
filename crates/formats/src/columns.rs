//! Records shredded into columns: each leaf field of the schema is a
//! column of values with their definition levels (how much of the field's
//! path is present: a null or an empty list stops short of the leaf) and
//! repetition levels (at which list a value starts a new item), as
//! Parquet stores nested data. A record is shredded whole or not at all.

use parquet::data_type::ByteArray;
use serde_json::{Map, Value};

use super::error::FormatError;
use super::schema::{Kind, Schema, nullable_items};

/// The values of one leaf column, of its physical type.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    Bytes(Vec<ByteArray>),
    Int64(Vec<i64>),
    Double(Vec<f64>),
    Boolean(Vec<bool>),
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Values::Bytes(values) => values.len(),
            Values::Int64(values) => values.len(),
            Values::Double(values) => values.len(),
            Values::Boolean(values) => values.len(),
        }
    }

    fn truncate(&mut self, len: usize) {
        match self {
            Values::Bytes(values) => values.truncate(len),
            Values::Int64(values) => values.truncate(len),
            Values::Double(values) => values.truncate(len),
            Values::Boolean(values) => values.truncate(len),
        }
    }

    fn clear(&mut self) {
        self.truncate(0);
    }
}

/// One leaf column of the row group being built.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    /// The present values, in order.
    pub values: Values,
    /// A definition level per entry (present values and nulls).
    pub def: Vec<i16>,
    /// A repetition level per entry.
    pub rep: Vec<i16>,
    /// The definition level of a present value.
    pub max_def: i16,
    /// The number of lists on the leaf's path.
    pub max_rep: i16,
}

/// A node of the schema, as the shredder walks it.
#[derive(Debug)]
enum Node {
    Leaf {
        kind: Kind,
        leaf: usize,
    },
    Struct {
        fields: Vec<(&'static str, Shape)>,
    },
    List {
        item: Box<Shape>,
        /// The repetition level of the list's items.
        rep: i16,
    },
}

/// A node with whether it may be null and which leaves it holds.
#[derive(Debug)]
struct Shape {
    node: Node,
    optional: bool,
    /// The leaves under it: `leaves.start..leaves.end`.
    leaves: std::ops::Range<usize>,
    /// Its path from the record, for errors.
    path: String,
}

/// The row group being built: a schema's leaves and what was shredded
/// into them.
#[derive(Debug)]
pub struct Columns {
    fields: Vec<(&'static str, Shape)>,
    leaves: Vec<Leaf>,
    rows: usize,
    bytes: usize,
}

impl Columns {
    /// Returns empty columns of `schema`.
    pub fn new(schema: &Schema) -> Self {
        let mut leaves = Vec::new();
        let fields = schema
            .fields
            .iter()
            .map(|field| {
                let path = field.name.to_owned();
                (
                    field.name,
                    shape(&field.kind, field.optional, path, 0, 0, &mut leaves),
                )
            })
            .collect();
        Self {
            fields,
            leaves,
            rows: 0,
            bytes: 0,
        }
    }

    /// Shreds one record (a JSON object) into the columns; a record that
    /// does not fit the schema leaves them as they were.
    pub fn push(&mut self, record: &Value) -> Result<(), FormatError> {
        let Some(object) = record.as_object() else {
            return Err(FormatError::Record {
                path: String::new(),
                message: "a record is a JSON object".to_owned(),
            });
        };
        let marks: Vec<(usize, usize)> = self
            .leaves
            .iter()
            .map(|leaf| (leaf.values.len(), leaf.def.len()))
            .collect();
        let mut shredder = Shredder {
            leaves: &mut self.leaves,
            bytes: 0,
        };
        let result = shredder.shred_fields(&self.fields, object, 0, 0);
        let bytes = shredder.bytes;
        match result {
            Ok(()) => {
                self.rows += 1;
                self.bytes += bytes;
                Ok(())
            }
            Err(error) => {
                for (leaf, (values, levels)) in self.leaves.iter_mut().zip(marks) {
                    leaf.values.truncate(values);
                    leaf.def.truncate(levels);
                    leaf.rep.truncate(levels);
                }
                Err(error)
            }
        }
    }

    /// Records shredded since the last [`Columns::clear`].
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// About how many bytes the shredded values take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The leaf columns, in the schema's order (Parquet's column order).
    pub fn leaves(&self) -> &[Leaf] {
        &self.leaves
    }

    /// Empties the columns for the next row group.
    pub fn clear(&mut self) {
        for leaf in &mut self.leaves {
            leaf.values.clear();
            leaf.def.clear();
            leaf.rep.clear();
        }
        self.rows = 0;
        self.bytes = 0;
    }
}

/// Builds the shape of a field of `kind` at `path`, whose parent's
/// definition level is `def` and repetition level `rep`, adding its leaves.
fn shape(
    kind: &Kind,
    optional: bool,
    path: String,
    def: i16,
    rep: i16,
    leaves: &mut Vec<Leaf>,
) -> Shape {
    let def = def + i16::from(optional);
    let first = leaves.len();
    let node = match kind {
        Kind::Struct(fields) => Node::Struct {
            fields: fields
                .iter()
                .map(|child| {
                    let path = format!("{path}.{}", child.name);
                    (
                        child.name,
                        shape(&child.kind, child.optional, path, def, rep, leaves),
                    )
                })
                .collect(),
        },
        // The repeated group adds one level of each.
        Kind::List(item) => Node::List {
            item: Box::new(shape(
                item,
                nullable_items(item),
                format!("{path}[]"),
                def + 1,
                rep + 1,
                leaves,
            )),
            rep: rep + 1,
        },
        kind => {
            let values = match kind {
                Kind::Int64 => Values::Int64(Vec::new()),
                Kind::Double => Values::Double(Vec::new()),
                Kind::Boolean => Values::Boolean(Vec::new()),
                _ => Values::Bytes(Vec::new()),
            };
            leaves.push(Leaf {
                values,
                def: Vec::new(),
                rep: Vec::new(),
                max_def: def,
                max_rep: rep,
            });
            Node::Leaf {
                kind: kind.clone(),
                leaf: first,
            }
        }
    };
    Shape {
        node,
        optional,
        leaves: first..leaves.len(),
        path,
    }
}

struct Shredder<'a> {
    leaves: &'a mut [Leaf],
    bytes: usize,
}

impl Shredder<'_> {
    /// Shreds `value` (missing: `None`) of `shape`, reached at definition
    /// level `def` and repetition level `rep`.
    fn shred(
        &mut self,
        shape: &Shape,
        value: Option<&Value>,
        rep: i16,
        def: i16,
    ) -> Result<(), FormatError> {
        let value = value.filter(|value| !value.is_null() || is_json_leaf(shape));
        let Some(value) = value else {
            if !shape.optional {
                return Err(error(shape, "is required"));
            }
            self.nulls(shape, def, rep);
            return Ok(());
        };
        let def = def + i16::from(shape.optional);
        match &shape.node {
            Node::Leaf { kind, leaf } => {
                let leaf = &mut self.leaves[*leaf];
                self.bytes +=
                    push_value(&mut leaf.values, kind, value).map_err(|m| error(shape, m))?;
                leaf.def.push(def);
                leaf.rep.push(rep);
            }
            Node::Struct { fields } => {
                let object = value
                    .as_object()
                    .ok_or_else(|| error(shape, "expected an object"))?;
                self.shred_fields(fields, object, rep, def)?;
            }
            Node::List {
                item,
                rep: item_rep,
            } => {
                let items = value
                    .as_array()
                    .ok_or_else(|| error(shape, "expected a list"))?;
                if items.is_empty() {
                    self.nulls(shape, def, rep);
                }
                for (index, value) in items.iter().enumerate() {
                    let rep = if index == 0 { rep } else { *item_rep };
                    self.shred(item, Some(value), rep, def + 1)?;
                }
            }
        }
        Ok(())
    }

    /// Shreds the fields of `object` (a record or a struct) declared in
    /// `fields`; an `Extra` field takes those not declared.
    fn shred_fields(
        &mut self,
        fields: &[(&'static str, Shape)],
        object: &Map<String, Value>,
        rep: i16,
        def: i16,
    ) -> Result<(), FormatError> {
        for (name, child) in fields {
            if matches!(
                child.node,
                Node::Leaf {
                    kind: Kind::Extra,
                    ..
                }
            ) {
                let extra = undeclared(fields, object);
                self.shred(child, extra.as_ref(), rep, def)?;
            } else {
                self.shred(child, object.get(*name), rep, def)?;
            }
        }
        Ok(())
    }

    /// Marks every leaf under `shape` absent at level `def`.
    fn nulls(&mut self, shape: &Shape, def: i16, rep: i16) {
        for leaf in &mut self.leaves[shape.leaves.clone()] {
            leaf.def.push(def);
            leaf.rep.push(rep);
        }
    }
}

/// Returns the fields of `object` that `fields` does not declare (an
/// `Extra` field's own name included), or `None` when there are none.
fn undeclared(fields: &[(&'static str, Shape)], object: &Map<String, Value>) -> Option<Value> {
    let declared = |key: &str| {
        fields.iter().any(|(name, shape)| {
            *name == key
                && !matches!(
                    shape.node,
                    Node::Leaf {
                        kind: Kind::Extra,
                        ..
                    }
                )
        })
    };
    let rest: Map<String, Value> = object
        .iter()
        .filter(|(key, _)| !declared(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    (!rest.is_empty()).then_some(Value::Object(rest))
}

/// A JSON field keeps a `null` as the JSON text `null` only where it is a
/// list's item (a field's `null` is Parquet's null).
fn is_json_leaf(shape: &Shape) -> bool {
    matches!(
        &shape.node,
        Node::Leaf {
            kind: Kind::Json,
            ..
        }
    ) && shape.path.ends_with("[]")
}

fn error(shape: &Shape, message: &str) -> FormatError {
    FormatError::Record {
        path: shape.path.clone(),
        message: message.to_owned(),
    }
}

/// Appends `value` as `kind`, returning the bytes it takes.
fn push_value(values: &mut Values, kind: &Kind, value: &Value) -> Result<usize, &'static str> {
    match (values, kind) {
        (Values::Bytes(values), Kind::String) => {
            let text = value.as_str().ok_or("expected a string")?;
            values.push(ByteArray::from(text.as_bytes().to_vec()));
            Ok(text.len())
        }
        (Values::Bytes(values), _) => {
            let text = value.to_string();
            let len = text.len();
            values.push(ByteArray::from(text.into_bytes()));
            Ok(len)
        }
        (Values::Int64(values), _) => {
            values.push(value.as_i64().ok_or("expected a 64-bit integer")?);
            Ok(8)
        }
        (Values::Double(values), _) => {
            values.push(value.as_f64().ok_or("expected a number")?);
            Ok(8)
        }
        (Values::Boolean(values), _) => {
            values.push(value.as_bool().ok_or("expected a boolean")?);
            Ok(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::Field;

    fn conversation() -> Schema {
        Schema {
            name: "conversation",
            fields: vec![
                Field::required("id", Kind::String),
                Field::optional("reward", Kind::Double),
                Field::required(
                    "messages",
                    Kind::List(Box::new(Kind::Struct(vec![
                        Field::required("role", Kind::String),
                        Field::optional("content", Kind::String),
                    ]))),
                ),
            ],
        }
    }

    #[test]
    fn levels_say_where_a_path_stops() {
        let mut columns = Columns::new(&conversation());
        columns
            .push(&json!({"id": "a", "reward": 1.5, "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant"},
            ]}))
            .unwrap();
        columns.push(&json!({"id": "b", "messages": []})).unwrap();
        let leaves = columns.leaves();
        assert_eq!(leaves.len(), 4);
        let (reward, role, content) = (&leaves[1], &leaves[2], &leaves[3]);
        assert_eq!(reward.def, [1, 0]);
        assert_eq!(reward.values, Values::Double(vec![1.5]));
        // Two items in the first record, an empty list in the second.
        assert_eq!((role.max_def, role.max_rep), (1, 1));
        assert_eq!(role.def, [1, 1, 0]);
        assert_eq!(role.rep, [0, 1, 0]);
        assert_eq!(
            (content.max_def, content.def.as_slice()),
            (2, &[2, 1, 0][..])
        );
        assert_eq!(columns.rows(), 2);
    }

    #[test]
    fn an_extra_field_holds_what_the_schema_does_not_declare() {
        let schema = Schema {
            name: "span",
            fields: vec![
                Field::required("name", Kind::String),
                Field::optional("extra", Kind::Extra),
            ],
        };
        let mut columns = Columns::new(&schema);
        columns
            .push(&json!({"name": "a", "custom": [1, null], "extra": true}))
            .unwrap();
        columns.push(&json!({"name": "b"})).unwrap();
        let extra = &columns.leaves()[1];
        assert_eq!(extra.def, [1, 0]);
        let Values::Bytes(values) = &extra.values else {
            panic!("an Extra column holds JSON text")
        };
        let text = std::str::from_utf8(values[0].data()).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(value, json!({"custom": [1, null], "extra": true}));
    }

    #[test]
    fn a_record_that_does_not_fit_leaves_nothing_behind() {
        let mut columns = Columns::new(&conversation());
        columns.push(&json!({"id": "a", "messages": []})).unwrap();
        let before = columns.leaves().to_vec();
        let refused = columns
            .push(&json!({"id": "b", "messages": [{"role": "user"}, {"role": 3}]}))
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "field `messages[].role`: expected a string"
        );
        assert_eq!(columns.leaves(), before.as_slice());
        assert_eq!(columns.rows(), 1);
        let missing = columns.push(&json!({"messages": []})).unwrap_err();
        assert_eq!(missing.to_string(), "field `id`: is required");
    }
}
