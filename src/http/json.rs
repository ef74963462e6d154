//! JSON answers byte for byte as agent-lightning's FastAPI server writes
//! them (pydantic-core's serializer): compact separators, UTF-8 without `\u`
//! escapes for non-ASCII text, and floats as pydantic writes them (`1.0`,
//! `1e+16`, `1e-7`, `0.00001`), so a client that compares or hashes bodies
//! sees no difference.

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

/// serde_json's compact formatter with floats written as pydantic writes them.
struct PythonFloats;

impl serde_json::ser::Formatter for PythonFloats {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        writer.write_all(pydantic_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f32,
    ) -> std::io::Result<()> {
        writer.write_all(pydantic_float(f64::from(value)).as_bytes())
    }
}

/// A finite, non-zero float as its shortest round-trip digits: the sign,
/// the digits, and the decimal exponent of the first digit.
struct Shortest {
    negative: bool,
    digits: String,
    exponent: i32,
}

impl Shortest {
    fn of(value: f64) -> Self {
        // Rust's `{:e}` gives the shortest digits that round-trip, as
        // Python's repr and pydantic-core (ryu) do.
        let scientific = format!("{value:e}");
        let (mantissa, exponent) = scientific
            .split_once('e')
            .expect("scientific notation has an exponent");
        let (negative, mantissa) = match mantissa.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, mantissa),
        };
        Self {
            negative,
            digits: mantissa.chars().filter(|c| *c != '.').collect(),
            exponent: exponent.parse().expect("the exponent is an integer"),
        }
    }

    fn sign(&self) -> &'static str {
        if self.negative { "-" } else { "" }
    }

    /// Writes `d.ddd` and the exponent with its sign, padded to `width`.
    fn scientific(&self, width: usize) -> String {
        let (first, rest) = self.digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if self.exponent < 0 { '-' } else { '+' };
        format!(
            "{}{first}{fraction}e{exponent_sign}{:0width$}",
            self.sign(),
            self.exponent.unsigned_abs()
        )
    }

    /// Writes the number without an exponent, always with a fraction.
    fn positional(&self) -> String {
        let sign = self.sign();
        let digits = &self.digits;
        if self.exponent < 0 {
            let zeros = "0".repeat(self.exponent.unsigned_abs() as usize - 1);
            return format!("{sign}0.{zeros}{digits}");
        }
        let integer_digits = self.exponent as usize + 1;
        if digits.len() <= integer_digits {
            let zeros = "0".repeat(integer_digits - digits.len());
            format!("{sign}{digits}{zeros}.0")
        } else {
            let (integer, fraction) = digits.split_at(integer_digits);
            format!("{sign}{integer}.{fraction}")
        }
    }
}

/// Writes the floats every finite float, `0.0` and non-finite ones included,
/// share; `None` for the others.
fn special(value: f64) -> Option<String> {
    if !value.is_finite() {
        // JSON has no NaN or infinities.
        return Some("null".to_owned());
    }
    (value == 0.0).then(|| {
        if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_owned()
    })
}

/// Renders a float as pydantic-core's JSON serializer (ryu) does:
/// positional from 1e-5 up to 1e16 (always with a fraction), scientific
/// outside with an unpadded, signed exponent (`1e+16`, `1e-7`).
pub fn pydantic_float(value: f64) -> String {
    if let Some(text) = special(value) {
        return text;
    }
    let shortest = Shortest::of(value);
    if (-5..16).contains(&shortest.exponent) {
        shortest.positional()
    } else {
        shortest.scientific(1)
    }
}

/// Renders a float as Python's `repr` and `str` do: positional from 1e-4
/// up to 1e16, scientific outside with an exponent of at least two digits
/// (`1e+16`, `1e-05`).
pub fn python_repr_float(value: f64) -> String {
    if let Some(text) = special(value) {
        return text;
    }
    let shortest = Shortest::of(value);
    if (-4..16).contains(&shortest.exponent) {
        shortest.positional()
    } else {
        shortest.scientific(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_as_pydantic_and_python_write_them() {
        // Triples checked against pydantic_core.to_json and CPython 3.11's repr().
        for (value, pydantic, python) in [
            (1.0, "1.0", "1.0"),
            (-2.5, "-2.5", "-2.5"),
            (0.1, "0.1", "0.1"),
            (100.0, "100.0", "100.0"),
            (1e16, "1e+16", "1e+16"),
            (1.5e16, "1.5e+16", "1.5e+16"),
            (1e15, "1000000000000000.0", "1000000000000000.0"),
            (
                9999999999999998.0,
                "9999999999999998.0",
                "9999999999999998.0",
            ),
            (1e-4, "0.0001", "0.0001"),
            (1e-5, "0.00001", "1e-05"),
            (1.2345e-5, "0.000012345", "1.2345e-05"),
            (1e-6, "1e-6", "1e-06"),
            (1.5e-7, "1.5e-7", "1.5e-07"),
            (-1e-10, "-1e-10", "-1e-10"),
            (1e100, "1e+100", "1e+100"),
            (
                1795437032.0570421,
                "1795437032.0570421",
                "1795437032.0570421",
            ),
            (0.0, "0.0", "0.0"),
            (-0.0, "-0.0", "-0.0"),
            (5e-324, "5e-324", "5e-324"),
            (
                1.7976931348623157e308,
                "1.7976931348623157e+308",
                "1.7976931348623157e+308",
            ),
        ] {
            assert_eq!(pydantic_float(value), pydantic, "{value:?}");
            assert_eq!(python_repr_float(value), python, "{value:?}");
        }
        assert_eq!(pydantic_float(f64::NAN), "null");
    }

    #[test]
    fn bodies_are_compact_and_keep_non_ascii_text() {
        let value = serde_json::json!({"a": [1, 2.0, 1e16, 1e-7], "b": "é\n\"", "c": null});
        assert_eq!(
            String::from_utf8(to_vec(&value).unwrap()).unwrap(),
            r#"{"a":[1,2.0,1e+16,1e-7],"b":"é\n\"","c":null}"#
        );
    }
}
