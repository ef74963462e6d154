//! JSON responses byte-for-byte as agent-lightning's FastAPI server writes
//! them: compact separators, UTF-8 without `\u` escapes for non-ASCII text,
//! and floats as Python's `repr` renders them (`1.0`, `1e+16`, `1e-05`), so a
//! client that compares or hashes bodies sees no difference.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

/// A response whose body is `T` as agent-lightning's server renders JSON.
#[derive(Debug)]
pub struct PyJson<T>(pub StatusCode, pub T);

impl<T: Serialize> IntoResponse for PyJson<T> {
    fn into_response(self) -> Response {
        match to_vec(&self.1) {
            Ok(body) => {
                let mut response = (self.0, body).into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Err(error) => {
                tracing::error!(%error, "response does not serialise");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }
}

/// Serialises `value` as agent-lightning's server would.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonFloats);
    value.serialize(&mut serializer)?;
    Ok(out)
}

/// serde_json's compact formatter with floats written as Python writes them.
struct PythonFloats;

impl serde_json::ser::Formatter for PythonFloats {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        writer.write_all(python_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f32,
    ) -> std::io::Result<()> {
        writer.write_all(python_float(f64::from(value)).as_bytes())
    }
}

/// Renders a float as Python's `repr` does: the shortest digits that round
/// trip, positional between 1e-4 and 1e16 (always with a fractional part),
/// scientific with a signed two-digit exponent outside. JSON has no NaN or
/// infinities; they are written as `null`.
pub fn python_float(value: f64) -> String {
    if !value.is_finite() {
        return "null".to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_owned();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits as Python's repr.
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("scientific notation has an exponent");
    let exponent: i32 = exponent.parse().expect("the exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if !(-4..16).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exponent_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    if exponent < 0 {
        let zeros = "0".repeat(exponent.unsigned_abs() as usize - 1);
        return format!("{sign}0.{zeros}{digits}");
    }
    let integer_digits = exponent as usize + 1;
    if digits.len() <= integer_digits {
        let zeros = "0".repeat(integer_digits - digits.len());
        format!("{sign}{digits}{zeros}.0")
    } else {
        let (integer, fraction) = digits.split_at(integer_digits);
        format!("{sign}{integer}.{fraction}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_as_python_repr_writes_them() {
        // Pairs checked against CPython 3.11's repr().
        for (value, python) in [
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (1e-4, "0.0001"),
            (1.5e-4, "0.00015"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (1795437032.0570421, "1795437032.0570421"),
            (123456789.125, "123456789.125"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
        ] {
            assert_eq!(python_float(value), python, "{value:?}");
        }
        assert_eq!(python_float(f64::NAN), "null");
    }

    #[test]
    fn bodies_are_compact_and_keep_non_ascii_text() {
        let value = serde_json::json!({"a": [1, 2.0, 1e16], "b": "é\n\"", "c": null});
        assert_eq!(
            String::from_utf8(to_vec(&value).unwrap()).unwrap(),
            r#"{"a":[1,2.0,1e+16],"b":"é\n\"","c":null}"#
        );
    }
}
