//! A span's attributes read as agent-lightning 0.x reads them: one by key
//! (a repeated key: the last one, as a Python dict keeps it), and the
//! flattened ones under a prefix rebuilt as one JSON value
//! (`agentlightning.utils.otel.filter_and_unflatten_attributes`).

use crate::model::{AttributeValue, Json, KeyValue, Span};

/// The attribute `key` of `span`.
pub fn get<'a>(span: &'a Span, key: &str) -> Option<&'a AttributeValue> {
    span.attributes
        .iter()
        .rev()
        .find(|attribute| attribute.key == key)
        .map(|attribute| &attribute.value)
}

/// The attribute `key` when it is a string.
pub fn text<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match get(span, key)? {
        AttributeValue::String(text) => Some(text),
        _ => None,
    }
}

/// The first of `keys` present as a string (a key present with another
/// type is passed over, as upstream's `_attributes_get_multiple`).
pub fn first_text<'a>(span: &'a Span, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|key| text(span, key))
}

/// The first of `keys` present as a list of integers
/// (`_attributes_get_ids_multiple`).
pub fn first_ids(span: &Span, keys: &[&str]) -> Option<Vec<i64>> {
    keys.iter().find_map(|key| match get(span, key)? {
        AttributeValue::Array(items) => items
            .iter()
            .map(|item| match item {
                AttributeValue::Int(id) => Some(*id),
                _ => None,
            })
            .collect(),
        _ => None,
    })
}

/// An attribute value as JSON (a non-finite double is `null`, bytes are
/// their lossy UTF-8 text).
pub fn json(value: &AttributeValue) -> Json {
    match value {
        AttributeValue::Empty => Json::Null,
        AttributeValue::String(text) => Json::String(text.clone()),
        AttributeValue::Bool(flag) => Json::Bool(*flag),
        AttributeValue::Int(number) => Json::from(*number),
        AttributeValue::Double(number) => serde_json::Number::from_f64(*number)
            .map(Json::Number)
            .unwrap_or(Json::Null),
        AttributeValue::Bytes(bytes) => Json::String(String::from_utf8_lossy(bytes).into_owned()),
        AttributeValue::Array(items) => Json::Array(items.iter().map(json).collect()),
        AttributeValue::Map(entries) => Json::Object(object(entries)),
    }
}

fn object(entries: &[KeyValue]) -> serde_json::Map<String, Json> {
    entries
        .iter()
        .map(|entry| (entry.key.clone(), json(&entry.value)))
        .collect()
}

/// The attributes under `prefix.` rebuilt as one value: dotted keys become
/// nested objects, and an object whose keys are exactly `0..n` a list.
/// `None` when there are none (or they rebuild to an empty value). The
/// attribute named `prefix` itself is left out (upstream raises on it).
pub fn unflatten(span: &Span, prefix: &str) -> Option<Json> {
    let mut root = serde_json::Map::new();
    for attribute in &span.attributes {
        let Some(path) = attribute
            .key
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('.'))
        else {
            continue;
        };
        let parts: Vec<&str> = path.split('.').collect();
        let (last, parents) = parts.split_last().expect("split gives one part");
        let mut node = &mut root;
        for part in parents {
            let entry = node
                .entry((*part).to_owned())
                .or_insert_with(|| Json::Object(Default::default()));
            if !entry.is_object() {
                *entry = Json::Object(Default::default());
            }
            node = entry.as_object_mut().expect("made an object");
        }
        node.insert((*last).to_owned(), json(&attribute.value));
    }
    let value = listify(Json::Object(root));
    let empty = match &value {
        Json::Object(object) => object.is_empty(),
        Json::Array(items) => items.is_empty(),
        _ => false,
    };
    (!empty).then_some(value)
}

/// Turns objects whose keys are exactly `0..n` into lists, deepest first.
fn listify(value: Json) -> Json {
    let Json::Object(object) = value else {
        return value;
    };
    let object: serde_json::Map<String, Json> =
        object.into_iter().map(|(k, v)| (k, listify(v))).collect();
    let numeric = !object.is_empty()
        && object
            .keys()
            .all(|key| !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()));
    if numeric {
        let mut indexed: Vec<(usize, Json)> = Vec::with_capacity(object.len());
        for (key, value) in object.iter() {
            match key.parse::<usize>() {
                Ok(index) => indexed.push((index, value.clone())),
                Err(_) => return Json::Object(object),
            }
        }
        indexed.sort_by_key(|(index, _)| *index);
        if indexed
            .iter()
            .enumerate()
            .all(|(i, (index, _))| i == *index)
        {
            return Json::Array(indexed.into_iter().map(|(_, value)| value).collect());
        }
    }
    Json::Object(object)
}

/// Message entries of an unflattened prompt or completion: a list's items,
/// an object's numeric keys in order, or the object itself
/// (`TraceTree.extract_prompt_image_urls`).
pub fn entries(value: &Json) -> Vec<&Json> {
    match value {
        Json::Array(items) => items.iter().collect(),
        Json::Object(object) => {
            let mut numeric: Vec<(u128, &Json)> = object
                .iter()
                .filter(|(key, _)| !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()))
                .filter_map(|(key, value)| Some((key.parse().ok()?, value)))
                .collect();
            if numeric.is_empty() {
                return vec![value];
            }
            numeric.sort_by_key(|(index, _)| *index);
            numeric.into_iter().map(|(_, value)| value).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn span_with(attributes: &[(&str, AttributeValue)]) -> Span {
        let mut span = crate::trajectory::tests::span("s", None, 0, 1);
        span.attributes = attributes
            .iter()
            .map(|(key, value)| KeyValue {
                key: (*key).to_owned(),
                value: value.clone(),
            })
            .collect();
        span
    }

    fn s(text: &str) -> AttributeValue {
        AttributeValue::String(text.to_owned())
    }

    #[test]
    fn flattened_attributes_rebuild_lists_and_objects() {
        let span = span_with(&[
            ("gen_ai.prompt.0.role", s("system")),
            ("gen_ai.prompt.1.role", s("user")),
            ("gen_ai.prompt.1.content", s("hi")),
            ("gen_ai.prompt", s("ignored")),
            ("gen_ai.prompts.0", s("other prefix")),
            ("gen_ai.completion.0.role", s("assistant")),
            ("gen_ai.completion.2.role", s("gap")),
        ]);
        assert_eq!(
            unflatten(&span, "gen_ai.prompt"),
            Some(json!([{"role": "system"}, {"role": "user", "content": "hi"}]))
        );
        let completion = unflatten(&span, "gen_ai.completion").unwrap();
        assert_eq!(
            completion,
            json!({"0": {"role": "assistant"}, "2": {"role": "gap"}}),
            "not 0..n: an object"
        );
        assert_eq!(entries(&completion).len(), 2);
        assert_eq!(unflatten(&span, "llm.input_messages"), None);
        let ids = span_with(&[
            (
                "a",
                AttributeValue::Array(vec![AttributeValue::Int(1), s("x")]),
            ),
            ("b", AttributeValue::Array(vec![AttributeValue::Int(2)])),
            ("a", s("shadowed")),
        ]);
        assert_eq!(first_ids(&ids, &["a", "b"]), Some(vec![2]));
        assert_eq!(first_text(&ids, &["b", "a"]), Some("shadowed"));
    }
}
