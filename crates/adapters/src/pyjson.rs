//! JSON answers byte for byte as agent-lightning's FastAPI server writes
//! them (pydantic-core's serializer): compact separators, UTF-8 without `\u`
//! escapes for non-ASCII text, and floats as pydantic writes them (`1.0`,
//! `1e+16`, `1e-7`, `0.00001`), so a client that compares or hashes bodies
//! sees no difference.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use std::borrow::Cow;

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
    write(&mut out, value)?;
    Ok(out)
}

/// Appends `value` to `out` as [`to_vec`] writes it.
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(out, PythonFloats);
    value.serialize(&mut serializer)
}

/// Appends a JSON string (escaped as serde_json and pydantic escape it).
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(out, text).expect("a string serialises into a buffer");
}

/// Appends valid JSON text (the store's [`JsonText`](lightning_store_core::agl1::JsonText))
/// as [`to_vec`] writes the value it holds, byte for byte, without parsing
/// it into a tree: compact (whitespace between tokens dropped), strings as
/// serde_json escapes them, numbers as [`python_number`] writes them.
/// Text that is not valid JSON is copied as it is, whitespace aside.
pub fn write_json_text(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b' ' | b'\t' | b'\n' | b'\r' => at += 1,
            b'"' => at = write_string_token(out, text, at),
            b'-' | b'0'..=b'9' => {
                let end = number_end(bytes, at);
                let number = parsed_number(&text[at..end]);
                out.extend_from_slice(python_number(&number).as_bytes());
                at = end;
            }
            // Punctuation and the letters of true, false and null.
            _ => {
                out.push(byte);
                at += 1;
            }
        }
    }
}

/// Returns where the number token that starts at `start` ends.
fn number_end(text: &[u8], start: usize) -> usize {
    text[start..]
        .iter()
        .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
        .map_or(text.len(), |length| start + length)
}

/// Returns a JSON number's text as serde_json's parser keeps it
/// (`arbitrary_precision`): the exponent's `e` lowercase and its sign
/// written (`1E5` is `1e+5`).
fn parsed_number(token: &str) -> Cow<'_, str> {
    let Some(at) = token.find(['e', 'E']) else {
        return Cow::Borrowed(token);
    };
    let (mantissa, exponent) = (&token[..at], &token[at + 1..]);
    if token.as_bytes()[at] == b'e' && exponent.starts_with(['+', '-']) {
        return Cow::Borrowed(token);
    }
    let sign = if exponent.starts_with(['+', '-']) {
        ""
    } else {
        "+"
    };
    Cow::Owned(format!("{mantissa}e{sign}{exponent}"))
}

/// Appends the string token that starts at `start` (its opening quote) and
/// returns where it ends. Without escapes it is what serde_json writes (JSON
/// strings hold no raw control characters, the only ones it escapes
/// besides the quote and the backslash); with escapes it is decoded and
/// written again, so that `\u00e9` and `\/` come out as serde_json writes them.
fn write_string_token(out: &mut Vec<u8>, text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut at = start + 1;
    let mut escaped = false;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => break,
            b'\\' => {
                escaped = true;
                at += 2;
            }
            _ => at += 1,
        }
    }
    let end = (at + 1).min(bytes.len());
    let token = &text[start..end];
    match escaped.then(|| serde_json::from_str::<String>(token)) {
        Some(Ok(decoded)) => write_str(out, &decoded),
        _ => out.extend_from_slice(token.as_bytes()),
    }
    end
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

    fn write_number_str<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: &str,
    ) -> std::io::Result<()> {
        writer.write_all(python_number(value).as_bytes())
    }
}

/// Returns whether the JSON text `text` is byte for byte what serde_json
/// writes for its parsed value: compact, and in strings only the escapes
/// serde_json writes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00xx`
/// for the other control characters); with `python_numbers`, also every
/// number as [`to_vec`] writes it, so that the text is what [`to_vec`]
/// writes. Text that passes can be forwarded and recorded as it is instead
/// of being parsed and written again. Text nested deeper than serde_json
/// parses does not pass, so that what passes can be parsed later. Duplicate
/// keys are not looked for (parsing keeps the last); invalid JSON may pass
/// (the caller parses it).
pub fn is_canonical(text: &[u8], python_numbers: bool) -> bool {
    // serde_json's recursion limit: 127 nested arrays and objects.
    const MAX_DEPTH: usize = 127;
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = text.get(at) {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return false;
                }
                at += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                at += 1;
            }
            b'"' => match string_end(text, at + 1) {
                Some(end) => at = end,
                None => return false,
            },
            b'-' | b'0'..=b'9' => {
                let start = at;
                at = number_end(text, at);
                if python_numbers {
                    let Ok(number) = std::str::from_utf8(&text[start..at]) else {
                        return false;
                    };
                    if python_number(number) != number {
                        return false;
                    }
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => return false,
            _ => at += 1,
        }
    }
    true
}

/// Returns the index after the closing quote of the string whose content
/// starts at `at`, or `None` when an escape in it is not one serde_json
/// writes (or the string is not valid JSON).
fn string_end(text: &[u8], mut at: usize) -> Option<usize> {
    loop {
        match *text.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' => {
                match *text.get(at + 1)? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => at += 2,
                    b'u' => {
                        let hex = text.get(at + 2..at + 6)?;
                        let code = std::str::from_utf8(hex)
                            .ok()
                            .and_then(|hex| u8::from_str_radix(hex, 16).ok())?;
                        // serde_json writes `\u00xx` (lowercase) only for
                        // control characters without a short escape.
                        let written = format!("{code:04x}");
                        if code >= 0x20
                            || matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)
                            || hex != written.as_bytes()
                        {
                            return None;
                        }
                        at += 6;
                    }
                    _ => return None,
                }
            }
            0x00..=0x1f => return None,
            _ => at += 1,
        }
    }
}

/// Writes a JSON number kept as its text (a client's payload) as Python
/// would read and write it without losing its value: an integer as given
/// (Python's `int` is exact; `-0` is `0`), a decimal that a float holds as
/// its shortest digits as pydantic writes that float (`1e16` is `1e+16`,
/// `1.50` is `1.5`), and any other decimal as given, so that no digit of
/// it is lost (`0.1000000000000000055511151231257827`, `1e400`).
fn python_number(text: &str) -> Cow<'_, str> {
    if !text.contains(['.', 'e', 'E']) {
        return Cow::Borrowed(if text == "-0" { "0" } else { text });
    }
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && same_decimal(text, value) => {
            Cow::Owned(pydantic_float(value))
        }
        _ => Cow::Borrowed(text),
    }
}

/// Whether the JSON number `text` is the decimal value of `value`'s
/// shortest round-trip digits.
fn same_decimal(text: &str, value: f64) -> bool {
    let Some((negative, digits, exponent)) = decimal_parts(text) else {
        return false;
    };
    if value == 0.0 {
        return digits.is_empty();
    }
    let shortest = Shortest::of(value);
    negative == shortest.negative && digits == shortest.digits && exponent == shortest.exponent
}

/// A JSON number's sign, significant digits (no leading or trailing zeros;
/// empty for zero) and the decimal exponent of its first digit; `None` when
/// the exponent does not fit an `i32`.
fn decimal_parts(text: &str) -> Option<(bool, String, i32)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i32>().ok()?),
        None => (unsigned, 0),
    };
    let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = [integer, fraction].concat();
    let Some(first) = all.find(|c| c != '0') else {
        return Some((negative, String::new(), 0));
    };
    let digits = all[first..].trim_end_matches('0').to_owned();
    let first_exponent = i32::try_from(integer.len()).ok()? - 1 - i32::try_from(first).ok()?;
    Some((negative, digits, first_exponent.checked_add(exponent)?))
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
    fn client_numbers_keep_their_value_and_floats_are_written_as_pydantic_writes_them() {
        for (text, written) in [
            ("12345678901234567890123", "12345678901234567890123"),
            ("18446744073709551615", "18446744073709551615"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("-0", "0"),
            (
                "0.1000000000000000055511151231257827",
                "0.1000000000000000055511151231257827",
            ),
            ("1e400", "1e400"),
            ("1e-400", "1e-400"),
            ("1e99999999999", "1e99999999999"),
            ("0.1", "0.1"),
            ("1.50", "1.5"),
            ("1e16", "1e+16"),
            ("1E-7", "1e-7"),
            ("0.0", "0.0"),
            ("-0.0", "-0.0"),
            ("0e5", "0.0"),
            ("120.5e-1", "12.05"),
            ("9007199254740993.0", "9007199254740993.0"),
        ] {
            assert_eq!(python_number(text), written, "{text}");
        }
    }

    /// What [`write_json_text`] must equal: the text parsed into a tree
    /// and written by [`to_vec`].
    fn through_a_tree(text: &str) -> String {
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        String::from_utf8(to_vec(&value).unwrap()).unwrap()
    }

    fn copied(text: &str) -> String {
        let mut out = Vec::new();
        write_json_text(&mut out, text);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_text_is_written_as_its_value_would_be() {
        for text in [
            r#"{"n": 12345678901234567890123, "d": 0.1000000000000000055511151231257827, "e": 1E400, "x": -2.50E-7}"#,
            r#"{"a":[1,2.0,1e16,1e-7,-0,-0.0,0e5,120.5e-1],"b":"é\n\"","c":null,"t":true,"f":false}"#,
            r#" [ "\u00e9\/\t\u0001\ud83d\ude00" , {"k\"ey" : "a\\b"} , [] , {} ] "#,
            r#""just a string""#,
            "-12.50",
            "null",
            r#"{"nested":{"deeper":[{"x":[[1.5e300,-1e-300]]}]},"":""}"#,
            "{\n  \"pretty\": [\n    1,\n    \"two\"\n  ]\n}",
        ] {
            assert_eq!(copied(text), through_a_tree(text), "{text}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_json_text_is_written_as_its_value_would_be(value in json_values()) {
            let compact = value.to_string();
            proptest::prop_assert_eq!(copied(&compact), through_a_tree(&compact));
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            proptest::prop_assert_eq!(copied(&pretty), through_a_tree(&pretty));
        }
    }

    /// JSON values with numbers written in every way a client may write
    /// them and strings that need escapes.
    fn json_values() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let number = prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| f.to_string()),
            "-?(0|[1-9][0-9]{0,29})(\\.[0-9]{1,30})?([eE][+-]?[0-9]{1,4})?",
        ]
        .prop_map(|text| serde_json::from_str::<serde_json::Value>(&text).unwrap());
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            number,
            "(\\PC|[\"\\\\\n\t\u{1}\u{7f}é€😀/])*".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                proptest::collection::vec(("\\PC{0,6}", inner), 0..6)
                    .prop_map(|fields| serde_json::Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn bodies_are_compact_and_keep_non_ascii_text() {
        let value = serde_json::json!({"a": [1, 2.0, 1e16, 1e-7], "b": "é\n\"", "c": null});
        assert_eq!(
            String::from_utf8(to_vec(&value).unwrap()).unwrap(),
            r#"{"a":[1,2.0,1e+16,1e-7],"b":"é\n\"","c":null}"#
        );
    }

    #[test]
    fn compact_text_as_serde_json_writes_it_is_canonical() {
        let written = to_vec(
            &serde_json::json!({"a": [1, 2.5, -3, 1e-7], "b": "é\n\"\\\u{1f}\u{7f}", "c": [null, true, {}]}),
        );
        assert!(is_canonical(&written.unwrap(), true));
        assert!(is_canonical(br#"{"a":" [ {\t} ","b":1.50,"c":-0}"#, false));
        for (text, python_numbers) in [
            (r#"{"a": 1}"#, false),
            ("{\"a\":1}\n", false),
            (r#"{"a":"\/"}"#, false),
            (r#"{"a":"\u00e9"}"#, false),
            (r#"{"a":"\ud800"}"#, false),
            (r#"{"a":"\u000a"}"#, false),
            (r#"{"a":"\u001F"}"#, false),
            ("{\"a\":\"\u{1}\"}", false),
            (r#"{"a":"x"#, false),
            (r#"{"a":1.50}"#, true),
            (r#"{"a":-0}"#, true),
            (r#"{"a":1e16}"#, true),
        ] {
            assert!(!is_canonical(text.as_bytes(), python_numbers), "{text}");
        }
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(is_canonical(nested(127).as_bytes(), true));
        assert!(serde_json::from_str::<serde_json::Value>(&nested(127)).is_ok());
        assert!(!is_canonical(nested(128).as_bytes(), true));
        assert!(serde_json::from_str::<serde_json::Value>(&nested(128)).is_err());
    }
}
