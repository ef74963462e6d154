//! A rollout's reward as agent-lightning reads it from spans
//! (`agentlightning.emitter.reward.find_final_reward`): the last span that
//! carries a reward wins, and its first dimension is the primary reward.
//! Three formats are recognised, newest first: `emit_reward`'s flattened
//! `agentlightning.reward.<i>.name` / `.value` attributes (0.3), AgentOps'
//! `agentops.task.output` / `agentops.entity.output` holding
//! `{"type": "reward", "value": ...}`, and the legacy annotation span
//! (`agentlightning.annotation`) with a `reward` attribute (0.2).

use super::model::{AttributeValue, Json, KeyValue, Span};

/// The attribute prefix of `emit_reward`'s dimensions.
pub const REWARD_PREFIX: &str = "agentlightning.reward";
/// The span name of agent-lightning's annotations.
pub const ANNOTATION_SPAN: &str = "agentlightning.annotation";

/// One named value of a reward.
#[derive(Debug, Clone, PartialEq)]
pub struct RewardDimension {
    pub name: String,
    pub value: f64,
}

/// The reward a span carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Reward {
    /// The dimensions in order; the first is the primary reward.
    pub dimensions: Vec<RewardDimension>,
    /// The span it was read from (its sequence id).
    pub sequence_id: i64,
}

impl Reward {
    /// Returns the primary reward's value.
    pub fn value(&self) -> f64 {
        self.dimensions[0].value
    }
}

/// Returns the reward of the last span that carries one, as
/// agent-lightning's `find_final_reward` picks it (spans in their order).
pub fn final_reward<'a>(spans: impl DoubleEndedIterator<Item = &'a Span>) -> Option<Reward> {
    spans.rev().find_map(span_reward)
}

/// Returns the reward a span carries, if any (a reward whose value is not
/// a number counts as none, as upstream's `get_reward_value`).
pub fn span_reward(span: &Span) -> Option<Reward> {
    let dimensions = dimensions(&span.attributes)
        .or_else(|| agentops_reward(&span.attributes))
        .or_else(|| legacy_reward(span))?;
    Some(Reward {
        dimensions,
        sequence_id: span.sequence_id,
    })
}

/// `emit_reward`'s attributes: `agentlightning.reward.<i>.name` and
/// `agentlightning.reward.<i>.value`, in index order (or one attribute
/// holding the list of `{name, value}` maps).
fn dimensions(attributes: &[KeyValue]) -> Option<Vec<RewardDimension>> {
    let mut found: Vec<(usize, Option<String>, Option<f64>)> = Vec::new();
    for attribute in attributes {
        if attribute.key == REWARD_PREFIX
            && let AttributeValue::Array(items) = &attribute.value
        {
            let listed: Option<Vec<RewardDimension>> = items.iter().map(map_dimension).collect();
            return listed.filter(|list| !list.is_empty());
        }
        let Some(rest) = attribute
            .key
            .strip_prefix(REWARD_PREFIX)
            .and_then(|rest| rest.strip_prefix('.'))
        else {
            continue;
        };
        let Some((index, field)) = rest.split_once('.') else {
            continue;
        };
        let Ok(index) = index.parse::<usize>() else {
            continue;
        };
        let slot = match found.iter_mut().find(|(i, ..)| *i == index) {
            Some(slot) => slot,
            None => {
                found.push((index, None, None));
                found.last_mut().expect("just pushed")
            }
        };
        match field {
            "name" => slot.1 = text(&attribute.value),
            "value" => slot.2 = number(&attribute.value),
            _ => {}
        }
    }
    if found.is_empty() {
        return None;
    }
    found.sort_by_key(|(index, ..)| *index);
    found
        .into_iter()
        .map(|(_, name, value)| {
            Some(RewardDimension {
                name: name.unwrap_or_else(|| "primary".to_owned()),
                value: value?,
            })
        })
        .collect()
}

fn map_dimension(value: &AttributeValue) -> Option<RewardDimension> {
    let AttributeValue::Map(entries) = value else {
        return None;
    };
    let get = |key: &str| entries.iter().find(|e| e.key == key).map(|e| &e.value);
    Some(RewardDimension {
        name: get("name")
            .and_then(text)
            .unwrap_or_else(|| "primary".to_owned()),
        value: get("value").and_then(number)?,
    })
}

/// AgentOps' reward operation: its output `{"type": "reward", "value": x}`.
fn agentops_reward(attributes: &[KeyValue]) -> Option<Vec<RewardDimension>> {
    ["agentops.task.output", "agentops.entity.output"]
        .iter()
        .find_map(|key| {
            let attribute = attributes.iter().find(|a| a.key == *key)?;
            let AttributeValue::String(text) = &attribute.value else {
                return None;
            };
            let output: Json = serde_json::from_str(text).ok()?;
            if output.get("type")?.as_str()? != "reward" {
                return None;
            }
            let value = output.get("value")?.as_f64()?;
            Some(vec![RewardDimension {
                name: "primary".to_owned(),
                value,
            }])
        })
}

/// agent-lightning 0.2's annotation span with a `reward` attribute.
fn legacy_reward(span: &Span) -> Option<Vec<RewardDimension>> {
    if span.name != ANNOTATION_SPAN {
        return None;
    }
    let attribute = span.attributes.iter().find(|a| a.key == "reward")?;
    Some(vec![RewardDimension {
        name: "primary".to_owned(),
        value: number(&attribute.value)?,
    }])
}

fn text(value: &AttributeValue) -> Option<String> {
    match value {
        AttributeValue::String(text) => Some(text.clone()),
        _ => None,
    }
}

fn number(value: &AttributeValue) -> Option<f64> {
    match value {
        AttributeValue::Double(number) => Some(*number),
        AttributeValue::Int(number) => Some(*number as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SpanKind, SpanStatus};

    fn span(sequence_id: i64, name: &str, attributes: Vec<(&str, AttributeValue)>) -> Span {
        Span {
            rollout_id: "r".into(),
            attempt_id: "a".into(),
            sequence_id,
            trace_id: "t".into(),
            span_id: format!("s{sequence_id}"),
            parent_id: None,
            name: name.into(),
            status: SpanStatus::default(),
            attributes: attributes
                .into_iter()
                .map(|(key, value)| KeyValue {
                    key: key.into(),
                    value,
                })
                .collect(),
            events: Vec::new(),
            links: Vec::new(),
            start_time: None,
            end_time: None,
            context: None,
            parent: None,
            resource: None,
            kind: SpanKind::Internal,
            scope: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn the_last_reward_span_wins_with_its_dimensions_in_order() {
        use AttributeValue::{Double, Int, String as Text};
        let spans = [
            span(1, ANNOTATION_SPAN, vec![("reward", Double(0.1))]),
            span(
                2,
                ANNOTATION_SPAN,
                vec![
                    ("agentlightning.reward.1.name", Text("speed".into())),
                    ("agentlightning.reward.1.value", Int(2)),
                    ("agentlightning.reward.0.name", Text("accuracy".into())),
                    ("agentlightning.reward.0.value", Double(0.75)),
                ],
            ),
            span(3, "llm", vec![("gen_ai.system", Text("openai".into()))]),
        ];
        let reward = final_reward(spans.iter()).unwrap();
        assert_eq!(reward.sequence_id, 2);
        assert_eq!(reward.value(), 0.75);
        assert_eq!(
            reward.dimensions,
            [
                RewardDimension {
                    name: "accuracy".into(),
                    value: 0.75
                },
                RewardDimension {
                    name: "speed".into(),
                    value: 2.0
                }
            ]
        );
        assert_eq!(
            final_reward(spans[..1].iter()).unwrap().value(),
            0.1,
            "0.2's format"
        );
        assert_eq!(final_reward(spans[2..].iter()), None);
    }

    #[test]
    fn agentops_outputs_and_non_numbers_are_read_as_upstream_reads_them() {
        let output = |text: &str| {
            span(
                1,
                "reward",
                vec![("agentops.task.output", AttributeValue::String(text.into()))],
            )
        };
        assert_eq!(
            span_reward(&output(r#"{"type": "reward", "value": 1.5}"#))
                .unwrap()
                .value(),
            1.5
        );
        assert_eq!(
            span_reward(&output(r#"{"type": "other", "value": 1}"#)),
            None
        );
        assert_eq!(span_reward(&output("not json")), None);
        let no_value = span(
            1,
            "x",
            vec![(
                "agentlightning.reward.0.name",
                AttributeValue::String("primary".into()),
            )],
        );
        assert_eq!(span_reward(&no_value), None, "a reward without a value");
    }
}
