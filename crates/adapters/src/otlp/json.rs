//! OTLP/JSON decoding. The store keeps client JSON numbers exactly
//! (serde_json's `arbitrary_precision`: a number is its text), which
//! opentelemetry-proto's serde cannot read where it buffers a value (its
//! `AnyValue` is a flattened enum): a buffered decimal arrives as
//! serde_json's private number map instead of a float. An export is
//! therefore parsed into a JSON tree first, its decimals are rewritten as
//! their nearest float (what OTLP/JSON means by a `double`), and the tree is
//! then read as the request: every number reaches opentelemetry-proto as a
//! plain integer or float.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use serde::de::Error as _;

use lightning_store_core::error::echo;
use lightning_store_core::model::Json;

/// Decodes an OTLP/JSON export request.
pub fn decode_export(body: &[u8]) -> serde_json::Result<ExportTraceServiceRequest> {
    let mut tree: Json = serde_json::from_slice(body)?;
    decimals_as_floats(&mut tree)?;
    serde_json::from_value(tree)
}

/// Rewrites every number that is not a 64-bit integer as the float nearest
/// to it; a number beyond a float's range is an error.
fn decimals_as_floats(value: &mut Json) -> serde_json::Result<()> {
    match value {
        Json::Number(n) if !(n.is_u64() || n.is_i64()) => {
            let float = n
                .as_f64()
                .and_then(serde_json::Number::from_f64)
                .ok_or_else(|| {
                    serde_json::Error::custom(format!("number out of range: {}", echo(n.as_str())))
                })?;
            *n = float;
        }
        Json::Array(items) => items.iter_mut().try_for_each(decimals_as_floats)?,
        Json::Object(fields) => fields.values_mut().try_for_each(decimals_as_floats)?,
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;

    use super::*;

    fn attribute(value: &str) -> serde_json::Result<Option<Value>> {
        let body = format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"","spanId":"","name":"s",
            "startTimeUnixNano":1700000000000000000,"attributes":[{{"key":"k","value":{value}}}]}}]}}]}}]}}"#
        );
        let request = decode_export(body.as_bytes())?;
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.start_time_unix_nano, 1_700_000_000_000_000_000);
        Ok(span.attributes[0].value.clone().and_then(|v| v.value))
    }

    #[test]
    fn doubles_in_flattened_values_decode_under_arbitrary_precision() {
        for (text, expected) in [
            ("1.5", 1.5),
            ("1.50", 1.5),
            ("1e16", 1e16),
            ("-2", -2.0),
            ("0.1000000000000000055511151231257827", 0.1),
        ] {
            let value = attribute(&format!(r#"{{"doubleValue":{text}}}"#)).unwrap();
            assert_eq!(value, Some(Value::DoubleValue(expected)), "{text}");
        }
        assert_eq!(
            attribute(r#"{"intValue":"-9223372036854775808"}"#).unwrap(),
            Some(Value::IntValue(i64::MIN))
        );
        assert_eq!(
            attribute(r#"{"intValue":9223372036854775807}"#).unwrap(),
            Some(Value::IntValue(i64::MAX))
        );
        let nested = attribute(
            r#"{"kvlistValue":{"values":[{"key":"x","value":{"arrayValue":{"values":[{"doubleValue":2.25}]}}}]}}"#,
        )
        .unwrap();
        let Some(Value::KvlistValue(list)) = nested else {
            panic!("a key-value list: {nested:?}");
        };
        let Some(Value::ArrayValue(array)) = list.values[0].value.clone().and_then(|v| v.value)
        else {
            panic!("an array");
        };
        assert_eq!(array.values[0].value, Some(Value::DoubleValue(2.25)));
    }

    #[test]
    fn numbers_beyond_a_float_are_refused() {
        let error = attribute(r#"{"doubleValue":1e400}"#).unwrap_err();
        assert!(error.to_string().contains("out of range"), "{error}");
    }
}
