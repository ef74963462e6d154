//! Request validation with pydantic's lax rules and its error reports (as
//! FastAPI runs it: on the parsed body, in Python mode), so that a request
//! agent-lightning's server accepts is accepted here with the same values,
//! and one it refuses gets the same 422:
//! `{"detail": [{"type", "loc", "msg", "input", "ctx"?}, ...]}`, issues in
//! the models' field order.
//!
//! One validator for both agent-lightning lines: the names of a choice come
//! from the enum it reads ([`Named`]), so that a list of accepted names is
//! never written twice.

use serde::Serialize;

use lightning_store_core::error::{MESSAGE_LIMIT, bounded};
use lightning_store_core::model::{Json, Named};
use lightning_store_core::model::{MaxAttempts, RetryCondition, Seconds, SecondsError};

/// A JSON object.
pub type Object = serde_json::Map<String, Json>;

/// One step of an issue's location: a field name or a list index.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LocPart {
    Key(String),
    Index(usize),
}

/// Where a value sits in the request, e.g. `["body", "rollouts", 0, "mode"]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Loc(Vec<LocPart>);

impl Loc {
    /// Returns the location of the request body.
    pub fn body() -> Self {
        Self(vec![LocPart::Key("body".to_owned())])
    }

    /// Returns the location of a query parameter.
    pub fn query(name: &str) -> Self {
        Self(vec![
            LocPart::Key("query".to_owned()),
            LocPart::Key(name.to_owned()),
        ])
    }

    /// Returns the location of field `key` inside this one.
    pub fn key(&self, key: &str) -> Self {
        let mut parts = self.0.clone();
        parts.push(LocPart::Key(key.to_owned()));
        Self(parts)
    }

    /// Returns the location of element `index` inside this one.
    pub fn index(&self, index: usize) -> Self {
        let mut parts = self.0.clone();
        parts.push(LocPart::Index(index));
        Self(parts)
    }
}

impl Serialize for Loc {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// One validation failure, as pydantic reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Issue {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub loc: Loc,
    pub msg: String,
    pub input: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ctx: Option<Json>,
}

/// A request that does not validate: pydantic's issues, in the order
/// found (the adapters answer it as a 422).
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid(pub Vec<Issue>);

impl Invalid {
    /// Returns the refusal of one issue.
    pub fn one(kind: &'static str, loc: Loc, msg: impl Into<String>, input: &Json) -> Self {
        let mut v = Validator::new();
        v.issue(kind, &loc, msg, input, None);
        v.into_error()
    }
}

/// Collects the issues of one request while its fields are read.
#[derive(Debug, Default)]
pub struct Validator {
    issues: Vec<Issue>,
}

/// Strings pydantic reads as booleans (compared case-insensitively).
const TRUE_WORDS: &[&str] = &["1", "on", "t", "true", "y", "yes"];
const FALSE_WORDS: &[&str] = &["0", "off", "f", "false", "n", "no"];

impl Validator {
    /// Returns a validator without issues.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an issue.
    pub fn issue(
        &mut self,
        kind: &'static str,
        loc: &Loc,
        msg: impl Into<String>,
        input: &Json,
        ctx: Option<Json>,
    ) {
        self.issues.push(Issue {
            kind,
            loc: loc.clone(),
            msg: msg.into(),
            input: echo_json(input),
            ctx,
        });
    }

    /// Returns `value` when nothing failed, else every issue.
    pub fn finish<T>(self, value: Option<T>) -> Result<T, Invalid> {
        match value {
            Some(value) if self.issues.is_empty() => Ok(value),
            _ => Err(Invalid(self.issues)),
        }
    }

    /// Returns the issues recorded.
    pub fn into_error(self) -> Invalid {
        Invalid(self.issues)
    }

    /// Returns true when an issue was recorded.
    pub fn failed(&self) -> bool {
        !self.issues.is_empty()
    }

    /// Reads a model: `value` must be an object.
    pub fn model<'a>(&mut self, loc: &Loc, value: &'a Json) -> Option<&'a Object> {
        match value {
            Json::Object(object) => Some(object),
            other => {
                self.issue(
                    "model_attributes_type",
                    loc,
                    "Input should be a valid dictionary or object to extract fields from",
                    other,
                    None,
                );
                None
            }
        }
    }

    /// Reads a required field; a missing one is an issue.
    pub fn required<'a>(&mut self, object: &'a Object, loc: &Loc, key: &str) -> Option<&'a Json> {
        let value = object.get(key);
        if value.is_none() {
            self.issue(
                "missing",
                &loc.key(key),
                "Field required",
                &Json::Object(object.clone()),
                None,
            );
        }
        value
    }

    /// Reads a string.
    pub fn string(&mut self, loc: &Loc, value: &Json) -> Option<String> {
        match value {
            Json::String(s) => Some(s.clone()),
            other => {
                self.issue(
                    "string_type",
                    loc,
                    "Input should be a valid string",
                    other,
                    None,
                );
                None
            }
        }
    }

    /// Reads a string or `null`.
    pub fn opt_string(&mut self, loc: &Loc, value: &Json) -> Option<Option<String>> {
        match value {
            Json::Null => Some(None),
            other => self.string(loc, other).map(Some),
        }
    }

    /// Reads an integer (integral numbers, numeric strings and booleans
    /// convert, as in pydantic's lax mode).
    pub fn int(&mut self, loc: &Loc, value: &Json) -> Option<i64> {
        match lax_int(value) {
            Ok(i) => Some(i),
            Err((kind, msg)) => {
                self.issue(kind, loc, msg, value, None);
                None
            }
        }
    }

    /// Reads a number (numeric strings and booleans convert).
    pub fn float(&mut self, loc: &Loc, value: &Json) -> Option<f64> {
        match lax_float(value) {
            Ok(f) => Some(f),
            Err((kind, msg)) => {
                self.issue(kind, loc, msg, value, None);
                None
            }
        }
    }

    /// Reads a number or `null`.
    pub fn opt_float(&mut self, loc: &Loc, value: &Json) -> Option<Option<f64>> {
        match value {
            Json::Null => Some(None),
            other => self.float(loc, other).map(Some),
        }
    }

    /// Reads a boolean (0/1 and pydantic's yes/no words convert).
    pub fn boolean(&mut self, loc: &Loc, value: &Json) -> Option<bool> {
        match lax_bool(value) {
            Ok(b) => Some(b),
            Err((kind, msg)) => {
                self.issue(kind, loc, msg, value, None);
                None
            }
        }
    }

    /// Reads one of `allowed` (a `Literal[...]` of strings).
    pub fn literal<'s>(&mut self, loc: &Loc, value: &Json, allowed: &[&'s str]) -> Option<&'s str> {
        if let Some(text) = value.as_str()
            && let Some(found) = allowed.iter().find(|name| **name == text)
        {
            return Some(found);
        }
        let expected = choice_list(allowed.iter().copied());
        self.issue(
            "literal_error",
            loc,
            format!("Input should be {expected}"),
            value,
            Some(serde_json::json!({ "expected": expected })),
        );
        None
    }

    /// Reads one of `allowed` by name, as pydantic reads a `Literal[...]`
    /// of the enum's names (its refusal is a `literal_error`).
    pub fn choice<T: Named>(&mut self, loc: &Loc, value: &Json, allowed: &[T]) -> Option<T> {
        let names: Vec<&'static str> = allowed.iter().map(|choice| choice.name()).collect();
        let name = self.literal(loc, value, &names)?;
        allowed.iter().copied().find(|choice| choice.name() == name)
    }

    /// Reads one of `allowed` by name, as pydantic reads a field typed by a
    /// string `Enum` (its refusal is an `enum` issue).
    pub fn member<T: Named>(&mut self, loc: &Loc, value: &Json, allowed: &[T]) -> Option<T> {
        if let Some(text) = value.as_str()
            && let Some(found) = allowed.iter().find(|choice| choice.name() == text)
        {
            return Some(*found);
        }
        let expected = choice_list(allowed.iter().map(|choice| choice.name()));
        self.issue(
            "enum",
            loc,
            format!("Input should be {expected}"),
            value,
            Some(serde_json::json!({ "expected": expected })),
        );
        None
    }

    /// Reads a list.
    pub fn list<'a>(&mut self, loc: &Loc, value: &'a Json) -> Option<&'a [Json]> {
        match value {
            Json::Array(items) => Some(items),
            other => {
                self.issue(
                    "list_type",
                    loc,
                    "Input should be a valid list",
                    other,
                    None,
                );
                None
            }
        }
    }

    /// Reads a dictionary (`Dict[str, ...]`).
    pub fn dict<'a>(&mut self, loc: &Loc, value: &'a Json) -> Option<&'a Object> {
        match value {
            Json::Object(object) => Some(object),
            other => {
                self.issue(
                    "dict_type",
                    loc,
                    "Input should be a valid dictionary",
                    other,
                    None,
                );
                None
            }
        }
    }

    /// Reads a dictionary or `null`, keeping it as JSON.
    pub fn opt_dict(&mut self, loc: &Loc, value: &Json) -> Option<Json> {
        match value {
            Json::Null => Some(Json::Null),
            other => self.dict(loc, other).map(|_| other.clone()),
        }
    }

    /// Reads a duration in seconds by the core's rule ([`Seconds`]): a
    /// number as pydantic reads a float, refused as pydantic refuses a
    /// `confloat(ge=0, allow_inf_nan=False)` (`finite_number`,
    /// `greater_than_equal`).
    pub fn seconds(&mut self, loc: &Loc, value: &Json) -> Option<Seconds> {
        let seconds = self.float(loc, value)?;
        match Seconds::new(seconds) {
            Ok(seconds) => Some(seconds),
            Err(SecondsError::NotFinite) => {
                self.issue(
                    "finite_number",
                    loc,
                    "Input should be a finite number",
                    value,
                    None,
                );
                None
            }
            Err(SecondsError::Negative) => {
                self.greater_than_equal(loc, value, 0);
                None
            }
        }
    }

    /// Reads a whole number of seconds by the core's rule (not negative),
    /// as pydantic reads an int.
    pub fn whole_seconds(&mut self, loc: &Loc, value: &Json) -> Option<i64> {
        let seconds = self.int(loc, value)?;
        if Seconds::new(seconds as f64).is_err() {
            self.greater_than_equal(loc, value, 0);
            return None;
        }
        Some(seconds)
    }

    /// Reads a number of attempts by the core's rule ([`MaxAttempts`]),
    /// refused as pydantic refuses an int out of its bounds.
    pub fn max_attempts(&mut self, loc: &Loc, value: &Json) -> Option<MaxAttempts> {
        let count = self.int(loc, value)?;
        if let Some(attempts) = MaxAttempts::new(count) {
            return Some(attempts);
        }
        if count < 1 {
            self.greater_than_equal(loc, value, 1);
        } else {
            let le = MaxAttempts::LARGEST;
            self.issue(
                "less_than_equal",
                loc,
                format!("Input should be less than or equal to {le}"),
                value,
                Some(serde_json::json!({ "le": le })),
            );
        }
        None
    }

    /// Reads a retry condition by the core's rule ([`RetryCondition`]): a
    /// list of the statuses that can requeue a rollout.
    pub fn retry_condition(&mut self, loc: &Loc, value: &Json) -> Option<RetryCondition> {
        let statuses = self.each(loc, value, |v, loc, item| {
            v.choice(loc, item, RetryCondition::RETRYABLE)
        })?;
        Some(RetryCondition::new(statuses).expect("only retryable statuses are read"))
    }

    fn greater_than_equal(&mut self, loc: &Loc, value: &Json, ge: i64) {
        self.issue(
            "greater_than_equal",
            loc,
            format!("Input should be greater than or equal to {ge}"),
            value,
            Some(serde_json::json!({ "ge": ge })),
        );
    }

    /// Reads an integer or `null`.
    pub fn opt_int(&mut self, loc: &Loc, value: &Json) -> Option<Option<i64>> {
        match value {
            Json::Null => Some(None),
            other => self.int(loc, other).map(Some),
        }
    }

    /// Reads the optional field `key` of `object` with `read`; `default`
    /// when it is absent.
    pub fn optional<T>(
        &mut self,
        object: &Object,
        loc: &Loc,
        key: &str,
        default: T,
        read: impl FnOnce(&mut Self, &Loc, &Json) -> Option<T>,
    ) -> Option<T> {
        match object.get(key) {
            Some(value) => read(self, &loc.key(key), value),
            None => Some(default),
        }
    }

    /// Reads every element of a list with `read`; `None` when the value is
    /// not a list or an element failed.
    pub fn each<T>(
        &mut self,
        loc: &Loc,
        value: &Json,
        mut read: impl FnMut(&mut Self, &Loc, &Json) -> Option<T>,
    ) -> Option<Vec<T>> {
        let items = self.list(loc, value)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match read(self, &loc.index(i), item) {
                Some(value) => out.push(value),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

/// Returns the input an issue quotes, as pydantic does, but bounded: a
/// string or a structure whose JSON is longer than [`MESSAGE_LIMIT`]
/// becomes a string of its bounded prefix, so a 422 never echoes a huge body.
fn echo_json(input: &Json) -> Json {
    match input {
        Json::String(text) => Json::String(bounded(text, MESSAGE_LIMIT).into_owned()),
        Json::Array(_) | Json::Object(_) => {
            let text = input.to_string();
            if text.len() <= MESSAGE_LIMIT {
                input.clone()
            } else {
                Json::String(bounded(&text, MESSAGE_LIMIT).into_owned())
            }
        }
        scalar => scalar.clone(),
    }
}

/// Renders `'a', 'b' or 'c'` as pydantic lists the choices of a literal.
fn choice_list<'a>(allowed: impl Iterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = allowed.map(|a| format!("'{a}'")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

type LaxError = (&'static str, &'static str);

/// pydantic's lax integer: integers, integral floats, booleans, numeric strings.
pub fn lax_int(value: &Json) -> Result<i64, LaxError> {
    const PARSING: LaxError = (
        "int_parsing",
        "Input should be a valid integer, unable to parse string as an integer",
    );
    match value {
        Json::Number(n) => match n.as_i64() {
            Some(i) => Ok(i),
            None => {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() != 0.0 {
                    Err((
                        "int_from_float",
                        "Input should be a valid integer, got a number with a fractional part",
                    ))
                } else if f.abs() < 9.2e18 {
                    Ok(f as i64)
                } else {
                    Err((
                        "int_parsing_size",
                        "Unable to parse input string as an integer, exceeded maximum size",
                    ))
                }
            }
        },
        Json::Bool(b) => Ok(i64::from(*b)),
        Json::String(s) => s.trim().parse().map_err(|_| PARSING),
        _ => Err(("int_type", "Input should be a valid integer")),
    }
}

/// pydantic's lax float: numbers, booleans, numeric strings.
pub fn lax_float(value: &Json) -> Result<f64, LaxError> {
    match value {
        Json::Number(n) => n
            .as_f64()
            .ok_or(("float_type", "Input should be a valid number")),
        Json::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        Json::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "inf" | "+inf" | "infinity" | "+infinity" => Ok(f64::INFINITY),
            "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
            "nan" => Ok(f64::NAN),
            text => text.parse().map_err(|_| {
                (
                    "float_parsing",
                    "Input should be a valid number, unable to parse string as a number",
                )
            }),
        },
        _ => Err(("float_type", "Input should be a valid number")),
    }
}

/// pydantic's lax boolean: booleans, 0/1, and its yes/no words.
pub fn lax_bool(value: &Json) -> Result<bool, LaxError> {
    const PARSING: LaxError = (
        "bool_parsing",
        "Input should be a valid boolean, unable to interpret input",
    );
    match value {
        Json::Bool(b) => Ok(*b),
        Json::Number(n) => match n.as_f64() {
            Some(0.0) => Ok(false),
            Some(1.0) => Ok(true),
            _ => Err(PARSING),
        },
        Json::String(s) => {
            let word = s.to_ascii_lowercase();
            if TRUE_WORDS.contains(&word.as_str()) {
                Ok(true)
            } else if FALSE_WORDS.contains(&word.as_str()) {
                Ok(false)
            } else {
                Err(PARSING)
            }
        }
        _ => Err(("bool_type", "Input should be a valid boolean")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightning_store_core::model::RolloutMode;
    use serde_json::json;

    #[test]
    fn lax_conversions_follow_pydantic() {
        assert_eq!(lax_int(&json!("2")), Ok(2));
        assert_eq!(lax_int(&json!(true)), Ok(1));
        assert_eq!(lax_int(&json!(2.0)), Ok(2));
        assert_eq!(lax_int(&json!(1.5)).unwrap_err().0, "int_from_float");
        assert_eq!(lax_int(&json!(1e20)).unwrap_err().0, "int_parsing_size");
        assert_eq!(lax_int(&json!("x")).unwrap_err().0, "int_parsing");
        assert_eq!(lax_int(&json!(null)).unwrap_err().0, "int_type");
        assert_eq!(lax_float(&json!("1.5")), Ok(1.5));
        assert_eq!(lax_float(&json!(true)), Ok(1.0));
        assert_eq!(lax_float(&json!([])).unwrap_err().0, "float_type");
        assert_eq!(lax_bool(&json!("Yes")), Ok(true));
        assert_eq!(lax_bool(&json!(0)), Ok(false));
        assert_eq!(lax_bool(&json!(2)).unwrap_err().0, "bool_parsing");
    }

    #[test]
    fn issues_serialise_as_pydantic_reports_them() {
        let mut v = Validator::new();
        let body = json!({"rollouts": [{"mode": "bad"}]});
        let object = v.model(&Loc::body(), &body).unwrap();
        let loc = Loc::body().key("rollouts").index(0).key("mode");
        v.choice(&loc, &json!("bad"), RolloutMode::ALL);
        assert!(v.required(object, &Loc::body(), "limit").is_none());
        let Invalid(issues) = v.finish(Some(())).unwrap_err();
        assert_eq!(
            serde_json::to_value(&issues).unwrap(),
            json!([
                {"type": "literal_error", "loc": ["body", "rollouts", 0, "mode"],
                 "msg": "Input should be 'train', 'val' or 'test'", "input": "bad",
                 "ctx": {"expected": "'train', 'val' or 'test'"}},
                {"type": "missing", "loc": ["body", "limit"], "msg": "Field required",
                 "input": {"rollouts": [{"mode": "bad"}]}},
            ])
        );
    }
}
