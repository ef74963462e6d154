//! Agent-lightning 0.x's rollouts in both layouts, from the spans of an
//! attempt, by `TracerTraceToTriplet` with its default settings
//! (`agentlightning/adapter/triplet.py`): the spans made a tree
//! (`TraceTree.from_spans`, a virtual root over several roots, a virtual
//! span for a parent never recorded), its hierarchy repaired
//! (`repair_hierarchy`), the LLM calls found (`find_llm_calls`: spans
//! named like `openai.chat.completion`, outside reward spans, not nested
//! in another call without a response id, de-duplicated by response id),
//! and rewards matched to them by first occurrence (`match_rewards`).
//!
//! Where upstream raises, this reads what it can: a span without a time
//! is never a closer parent nor before a reward (upstream compares `None`
//! and fails), spans in a parent cycle are left out (upstream recurses
//! without end), parents never recorded are visited in the order they are
//! first named (upstream iterates a `set`), and a trace without a root
//! gives no calls (upstream raises). A reward is read by
//! [`crate::reward::span_reward`], which also reads 0.2's annotation spans.

use std::collections::{HashMap, HashSet};

use super::attributes;
use super::chat::{self, ChatCall};
use super::records::ChatMessage;
use crate::model::{AttributeValue, Json, Span};
use crate::training::usage::{ModelCall, Tokens};

/// The default `llm_call_match` (`openai\.chat\.completion`, a regex
/// search for this literal text).
pub const LLM_CALL_MATCH: &str = "openai.chat.completion";
/// The span name of agent-lightning 0.3's operations.
const AGL_OPERATION: &str = "agentlightning.operation";
/// The operation name of a reward operation.
const AGL_REWARD: &str = "agentlightning.reward";
/// The attribute holding an operation's name.
const OPERATION_NAME: &str = "agentlightning.operation.name";
const RESPONSE_ID_KEYS: &[&str] = &["gen_ai.response.id", "agentlightning.operation.output.id"];
const PROMPT_IDS_KEYS: &[&str] = &[
    "prompt_token_ids",
    "agentlightning.operation.output.prompt_token_ids",
];
const RESPONSE_IDS_KEYS: &[&str] = &[
    "response_token_ids",
    "agentlightning.operation.output.response_token_ids.0",
    "agentlightning.operation.output.choices.0.token_ids",
    "agentlightning.operation.output.choices.0.provider_specific_fields.token_ids",
];
/// Where a call's prompt messages are recorded (OpenTelemetry `gen_ai`,
/// Weave, OpenInference).
const PROMPT_KEYS: &[&str] = &[
    "gen_ai.prompt",
    "agentlightning.operation.input.messages",
    "llm.input_messages",
];
/// Where a call's answers are recorded.
const COMPLETION_KEYS: &[&str] = &[
    "gen_ai.completion",
    "agentlightning.operation.output.choices",
    "llm.output_messages",
];

/// The attributes a call span's prompt tokens are read from, in order
/// (AgentOps writes `prompt_tokens`, newer OpenTelemetry conventions
/// `input_tokens`).
const PROMPT_TOKENS_KEYS: &[&str] = &["gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens"];
/// The attributes its response tokens are read from, in order.
const RESPONSE_TOKENS_KEYS: &[&str] = &[
    "gen_ai.usage.completion_tokens",
    "gen_ai.usage.output_tokens",
];

/// Returns the model call a span records, for the training summary's
/// usage ([`crate::training::usage`]): its start to its end, and the token
/// counts its tracer recorded, if any; `None` when the span is not named
/// like a call ([`LLM_CALL_MATCH`], as the triplets find calls).
pub fn model_call(span: &Span) -> Option<ModelCall> {
    if !span.name.contains(LLM_CALL_MATCH) {
        return None;
    }
    let latency_ms = match (span.start_time, span.end_time) {
        (Some(start), Some(end)) => (end.0 - start.0).max(0) / 1_000_000,
        _ => 0,
    };
    let count = |keys: &[&str]| {
        keys.iter()
            .find_map(|key| match attributes::get(span, key)? {
                AttributeValue::Int(count) => Some(*count),
                _ => None,
            })
    };
    let tokens = Tokens::reported(count(PROMPT_TOKENS_KEYS), count(RESPONSE_TOKENS_KEYS));
    Some(ModelCall { latency_ms, tokens })
}

/// One node of the trace tree: a span, or a virtual one.
struct Node<'a> {
    id: String,
    span: Option<&'a Span>,
    start: Option<i64>,
    end: Option<i64>,
    children: Vec<usize>,
}

/// The spans of one attempt as upstream's `TraceTree`.
struct Tree<'a> {
    nodes: Vec<Node<'a>>,
    root: usize,
}

/// One LLM call the adapter found, as a transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition<'a> {
    pub span: &'a Span,
    /// The agent it was found in (`*` outside any named agent).
    pub agent_name: String,
    pub prompt_token_ids: Vec<i64>,
    pub response_token_ids: Vec<i64>,
    pub response_id: Option<String>,
    /// The log-probabilities of `logprobs.content`, when every one is a
    /// finite number.
    pub log_probs: Option<Vec<f64>>,
    pub image_urls: Vec<String>,
    pub reward: Option<f64>,
}

/// The transitions of `spans` (one attempt's, in sequence order), in
/// the order the adapter finds them; empty without spans.
pub fn transitions(spans: &[Span]) -> Vec<Transition<'_>> {
    let Some(mut tree) = Tree::from_spans(spans) else {
        return Vec::new();
    };
    tree.repair(tree.root);
    let calls = tree.llm_calls();
    let rewards = tree.match_rewards(&calls);
    calls
        .into_iter()
        .map(|(node, agent_name)| {
            let span = tree.nodes[node].span.expect("calls are recorded spans");
            transition(
                span,
                agent_name,
                rewards.get(&tree.nodes[node].id).copied().flatten(),
            )
        })
        .collect()
}

/// The LLM-call spans of `spans` read as chat calls, in the adapter's order.
pub fn chat_calls(spans: &[Span]) -> Vec<ChatCall> {
    transitions(spans)
        .iter()
        .map(|transition| chat_call(transition.span))
        .collect()
}

fn transition(span: &Span, agent_name: String, reward: Option<f64>) -> Transition<'_> {
    let prompt = PROMPT_KEYS
        .iter()
        .find_map(|key| attributes::unflatten(span, key));
    Transition {
        span,
        agent_name,
        prompt_token_ids: attributes::first_ids(span, PROMPT_IDS_KEYS).unwrap_or_default(),
        response_token_ids: attributes::first_ids(span, RESPONSE_IDS_KEYS).unwrap_or_default(),
        response_id: attributes::first_text(span, RESPONSE_ID_KEYS).map(str::to_owned),
        log_probs: attributes::text(span, "logprobs.content").and_then(log_probs),
        image_urls: prompt
            .map(|prompt| {
                let entries: Vec<Json> =
                    attributes::entries(&prompt).into_iter().cloned().collect();
                chat::image_urls(&Json::Array(entries))
            })
            .unwrap_or_default(),
        reward,
    }
}

/// The `logprob` of each entry of `logprobs.content` (JSON text).
fn log_probs(text: &str) -> Option<Vec<f64>> {
    serde_json::from_str::<Json>(text)
        .ok()?
        .as_array()?
        .iter()
        .map(|entry| entry.get("logprob")?.as_f64().filter(|p| p.is_finite()))
        .collect()
}

/// A call's prompt messages and first answer, from its flattened
/// attributes (an OpenInference entry wraps its message in `message`).
fn chat_call(span: &Span) -> ChatCall {
    let read = |keys: &[&str]| -> Vec<ChatMessage> {
        let Some(value) = keys.iter().find_map(|key| attributes::unflatten(span, key)) else {
            return Vec::new();
        };
        attributes::entries(&value)
            .into_iter()
            .filter_map(|entry| chat::message(entry.get("message").unwrap_or(entry)))
            .collect()
    };
    let answer = read(COMPLETION_KEYS).into_iter().next().map(|mut message| {
        if message.role == "unknown" {
            "assistant".clone_into(&mut message.role);
        }
        message
    });
    ChatCall {
        prompt: read(PROMPT_KEYS),
        answer,
        model: model(span),
    }
}

/// The model a call names (`gen_ai.response.model`, else the request's).
pub fn model(span: &Span) -> Option<String> {
    attributes::first_text(span, &["gen_ai.response.model", "gen_ai.request.model"])
        .map(str::to_owned)
}

/// An attribute value as the text of an agent name.
fn scalar(value: &AttributeValue) -> Option<String> {
    match value {
        AttributeValue::Empty => None,
        AttributeValue::String(text) => Some(text.clone()),
        other => Some(attributes::json(other).to_string()),
    }
}

/// The agent a span stands for (`TraceTree.agent_name`).
fn agent_name(span: &Span) -> Option<String> {
    let get = |key: &str| attributes::get(span, key).and_then(scalar);
    let is = |key: &str, value: &str| attributes::text(span, key) == Some(value);
    get("agent.name")
        .or_else(|| is("agentops.span.kind", "agent").then(|| get("operation.name"))?)
        .or_else(|| get("recipient_agent_type"))
        .or_else(|| get("langchain.chain.type"))
        .or_else(|| get("executor.id"))
        .or_else(|| is("type", "agent").then(|| get("agentlightning.operation.input.name"))?)
        .or_else(|| {
            span.name
                .starts_with("langchain.Chain.")
                .then(|| get("lc_name"))?
        })
}

/// The reward a span carries (`get_reward_value`).
fn reward(span: &Span) -> Option<f64> {
    crate::reward::span_reward(span).map(|reward| reward.value())
}

/// Whether a span is a reward span (`TraceTree.is_reward_span`).
fn is_reward_span(span: &Span) -> bool {
    reward(span).is_some()
        || (span.name == AGL_OPERATION
            && attributes::text(span, OPERATION_NAME) == Some(AGL_REWARD))
}

impl<'a> Tree<'a> {
    /// `TraceTree.from_spans`; `None` without spans or without a root.
    fn from_spans(spans: &'a [Span]) -> Option<Self> {
        let mut by_id: HashMap<&str, &Span> = HashMap::new();
        let mut children_of: HashMap<&str, Vec<&str>> = HashMap::new();
        let mut roots: Vec<&str> = Vec::new();
        let mut parents: Vec<&str> = Vec::new();
        for span in spans {
            by_id.insert(&span.span_id, span);
            match &span.parent_id {
                None => roots.push(&span.span_id),
                Some(parent) => {
                    let children = children_of.entry(parent).or_insert_with(|| {
                        parents.push(parent);
                        Vec::new()
                    });
                    children.push(&span.span_id);
                }
            }
        }
        roots.extend(
            parents
                .into_iter()
                .filter(|parent| !by_id.contains_key(parent)),
        );
        let mut tree = Tree {
            nodes: Vec::new(),
            root: 0,
        };
        let mut visit = Visit {
            by_id: &by_id,
            children_of: &children_of,
            path: Vec::new(),
        };
        let mut tops: Vec<usize> = roots
            .iter()
            .filter_map(|root| visit.node(&mut tree.nodes, root))
            .collect();
        tree.root = match tops.len() {
            0 => return None,
            1 => tops.pop().expect("one"),
            _ => {
                let (start, end) = (tree.nodes[tops[0]].start, tree.nodes[*tops.last()?].end);
                tree.nodes.push(Node {
                    id: "virtual-root".into(),
                    span: None,
                    start,
                    end,
                    children: tops,
                });
                tree.nodes.len() - 1
            }
        };
        Some(tree)
    }

    /// Every node below and including `node`, depth first (`traverse`).
    fn traverse(&self, node: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![node];
        while let Some(next) = stack.pop() {
            out.push(next);
            stack.extend(self.nodes[next].children.iter().rev());
        }
        out
    }

    /// `TraceTree.repair_hierarchy`: each child of `node` moved under the
    /// node that envelopes it most closely in time.
    fn repair(&mut self, node: usize) {
        if self.nodes[node].children.len() == 1 {
            let only = self.nodes[node].children[0];
            return self.repair(only);
        }
        let to_repair = self.nodes[node].children.clone();
        for child in to_repair {
            if self.nodes[node].children.len() == 1 {
                break;
            }
            let (Some(start), Some(end)) = (self.nodes[child].start, self.nodes[child].end) else {
                continue;
            };
            // Its own subtree never adopts it (upstream would loop).
            let own: HashSet<usize> = self.traverse(child).into_iter().collect();
            let mut closest: Option<(i128, usize)> = None;
            for candidate in self.traverse(node) {
                if candidate == node
                    || own.contains(&candidate)
                    || self.nodes[candidate].id == self.nodes[child].id
                {
                    continue;
                }
                let (Some(c_start), Some(c_end)) =
                    (self.nodes[candidate].start, self.nodes[candidate].end)
                else {
                    continue;
                };
                if c_start <= start && c_end >= end {
                    let delta = i128::from(c_end) - i128::from(end) + i128::from(start)
                        - i128::from(c_start);
                    if delta > 0 && closest.is_none_or(|(best, _)| delta < best) {
                        closest = Some((delta, candidate));
                    }
                }
            }
            if let Some((_, parent)) = closest {
                let children = &mut self.nodes[node].children;
                if let Some(at) = children.iter().position(|c| *c == child) {
                    children.remove(at);
                }
                self.nodes[parent].children.push(child);
            }
        }
    }

    /// `find_llm_calls` with the defaults: each call node with its agent.
    fn llm_calls(&self) -> Vec<(usize, String)> {
        let mut found = Vec::new();
        let mut seen_ids: HashSet<String> = HashSet::new();
        // (node, agent, within a reward, within a call)
        let mut stack: Vec<(usize, Option<String>, bool, bool)> =
            vec![(self.root, Some("*".to_owned()), false, false)];
        while let Some((node, mut agent, mut in_reward, mut in_call)) = stack.pop() {
            if let Some(span) = self.nodes[node].span {
                if agent.is_some() && !in_reward && span.name.contains(LLM_CALL_MATCH) {
                    let response_id = attributes::first_text(span, RESPONSE_ID_KEYS);
                    let nested = response_id.is_none() && in_call;
                    let seen = response_id.is_some_and(|id| seen_ids.contains(id));
                    if !nested && !seen {
                        found.push((node, agent.clone().expect("checked")));
                        if let Some(id) = response_id {
                            seen_ids.insert(id.to_owned());
                        }
                        in_call = true;
                    }
                }
                if let Some(name) = agent_name(span) {
                    agent = Some(name);
                }
                in_reward = in_reward || is_reward_span(span);
            }
            for child in self.nodes[node].children.iter().rev() {
                stack.push((*child, agent.clone(), in_reward, in_call));
            }
        }
        found
    }

    /// `match_rewards` by first occurrence: by start time, each reward goes
    /// to the latest call that ended before it and has none yet.
    fn match_rewards(&self, calls: &[(usize, String)]) -> HashMap<String, Option<f64>> {
        let call_ids: HashSet<&str> = calls
            .iter()
            .map(|(node, _)| self.nodes[*node].id.as_str())
            .collect();
        let mut by_time = self.traverse(self.root);
        by_time.sort_by_key(|node| self.nodes[*node].start);
        let mut rewards: HashMap<String, Option<f64>> = HashMap::new();
        let mut assign_to: Vec<(&str, Option<i64>)> = Vec::new();
        for node in by_time {
            let item = &self.nodes[node];
            if call_ids.contains(item.id.as_str()) {
                assign_to.push((&item.id, item.end));
            }
            let Some(value) = item.span.and_then(reward) else {
                continue;
            };
            for (id, end) in assign_to.iter().rev() {
                match (end, item.start) {
                    (Some(end), Some(start)) if *end <= start => {}
                    _ => continue,
                }
                if rewards.contains_key(*id) {
                    continue;
                }
                rewards.insert((*id).to_owned(), Some(value));
                break;
            }
        }
        rewards
    }
}

/// The recursive `visit` of `from_spans`, guarded against parent cycles.
struct Visit<'s, 'a> {
    by_id: &'s HashMap<&'a str, &'a Span>,
    children_of: &'s HashMap<&'a str, Vec<&'a str>>,
    /// The ids from the root to the node being visited.
    path: Vec<&'a str>,
}

impl<'a> Visit<'_, 'a> {
    fn node(&mut self, nodes: &mut Vec<Node<'a>>, id: &'a str) -> Option<usize> {
        if self.path.contains(&id) {
            return None;
        }
        self.path.push(id);
        let children: Vec<usize> = self
            .children_of
            .get(id)
            .map(|ids| {
                ids.iter()
                    .filter_map(|child| self.node(nodes, child))
                    .collect()
            })
            .unwrap_or_default();
        self.path.pop();
        let node = match self.by_id.get(id) {
            Some(span) => Node {
                id: id.to_owned(),
                span: Some(span),
                start: span.start_time.map(|t| t.0),
                end: span.end_time.map(|t| t.0),
                children,
            },
            None if children.is_empty() => return None,
            None => Node {
                id: id.to_owned(),
                span: None,
                start: children.iter().filter_map(|c| nodes[*c].start).min(),
                end: children.iter().filter_map(|c| nodes[*c].end).max(),
                children,
            },
        };
        nodes.push(node);
        Some(nodes.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KeyValue;
    use crate::trajectory::tests::span;

    fn with(mut span: Span, name: &str, attributes: Vec<(&str, AttributeValue)>) -> Span {
        span.name = name.into();
        span.attributes = attributes
            .into_iter()
            .map(|(key, value)| KeyValue {
                key: key.into(),
                value,
            })
            .collect();
        span
    }

    fn s(text: &str) -> AttributeValue {
        AttributeValue::String(text.into())
    }

    fn ids(ids: &[i64]) -> AttributeValue {
        AttributeValue::Array(ids.iter().map(|id| AttributeValue::Int(*id)).collect())
    }

    /// An LLM call `id` with response id `response` and token ids.
    fn llm(id: &str, parent: Option<&str>, start: i64, end: i64, response: &str) -> Span {
        with(
            span(id, parent, start, end),
            "openai.chat.completion",
            vec![
                ("gen_ai.response.id", s(response)),
                ("prompt_token_ids", ids(&[1, 2])),
                ("response_token_ids", ids(&[3])),
                ("gen_ai.prompt.0.role", s("user")),
                ("gen_ai.prompt.0.content", s("hi")),
                ("gen_ai.completion.0.role", s("assistant")),
                ("gen_ai.completion.0.content", s("yo")),
                (
                    "logprobs.content",
                    s(r#"[{"token": "yo", "logprob": -0.5}]"#),
                ),
            ],
        )
    }

    fn reward(id: &str, parent: Option<&str>, start: i64, value: f64) -> Span {
        with(
            span(id, parent, start, start + 1),
            "agentlightning.operation",
            vec![(
                "agentlightning.reward.0.value",
                AttributeValue::Double(value),
            )],
        )
    }

    #[test]
    fn a_call_is_a_span_named_like_one_with_its_tracers_token_counts() {
        let timed = |millis: i64| {
            span(
                "c",
                None,
                5_000_000_000,
                5_000_000_000 + millis * 1_000_000 + 999_999,
            )
        };
        let int = AttributeValue::Int;
        let agentops = with(
            timed(1_250),
            LLM_CALL_MATCH,
            vec![
                ("gen_ai.usage.prompt_tokens", int(120)),
                ("gen_ai.usage.completion_tokens", int(30)),
            ],
        );
        let tokens = |prompt, response| Some(Tokens { prompt, response });
        assert_eq!(
            model_call(&agentops),
            Some(ModelCall {
                latency_ms: 1_250,
                tokens: tokens(120, 30),
            })
        );
        let semconv = with(
            timed(7),
            "openai.chat.completion.create",
            vec![
                ("gen_ai.usage.input_tokens", int(9)),
                ("gen_ai.usage.output_tokens", int(4)),
            ],
        );
        assert_eq!(model_call(&semconv).unwrap().tokens, tokens(9, 4));
        let untold = with(
            timed(7),
            LLM_CALL_MATCH,
            vec![("gen_ai.usage.prompt_tokens", s("9"))],
        );
        assert_eq!(model_call(&untold).unwrap().tokens, None);
        let step = with(
            timed(7),
            "agent.step",
            vec![("gen_ai.usage.prompt_tokens", int(9))],
        );
        assert_eq!(model_call(&step), None);
    }

    #[test]
    fn calls_are_found_once_outside_rewards_and_rewards_go_to_the_call_before() {
        let agent = with(
            span("agent", None, 0, 100),
            "agent",
            vec![("agent.name", s("solver"))],
        );
        let spans = vec![
            agent,
            llm("c1", Some("agent"), 10, 20, "resp-1"),
            // The same response seen again (an instrumentation's duplicate).
            llm("c1-dup", Some("agent"), 11, 19, "resp-1"),
            // Nested in c1 without a response id: not a call of its own.
            with(
                span("inner", Some("c1"), 12, 13),
                "openai.chat.completion.inner",
                vec![],
            ),
            reward("r1", Some("agent"), 25, 0.5),
            llm("c2", Some("agent"), 30, 40, "resp-2"),
            // A call inside a reward span is the judge's, not the agent's.
            llm("judge", Some("r1"), 25, 26, "resp-3"),
            reward("r2", Some("agent"), 35, 9.0),
        ];
        let found = transitions(&spans);
        let names: Vec<&str> = found.iter().map(|t| t.span.span_id.as_str()).collect();
        assert_eq!(names, ["c1", "c2"]);
        assert_eq!(found[0].agent_name, "solver");
        assert_eq!(found[0].reward, Some(0.5));
        assert_eq!(found[1].reward, None, "r2 starts before c2 ends");
        assert_eq!(found[0].log_probs, Some(vec![-0.5]));
        assert_eq!(found[0].response_id.as_deref(), Some("resp-1"));
        let calls = chat_calls(&spans);
        assert_eq!(calls[0].prompt[0].content, "hi");
        assert_eq!(calls[0].answer.as_ref().unwrap().content, "yo");
    }

    #[test]
    fn the_hierarchy_is_repaired_and_hostile_traces_end() {
        // Two roots: a virtual root over them; the call floating at the top
        // moves under the agent span that envelopes it in time.
        let agent = with(
            span("agent", None, 0, 100),
            "agent",
            vec![("agent.name", s("a"))],
        );
        let floating = llm("c", None, 10, 20, "x");
        let spans = [agent, floating];
        let found = transitions(&spans);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].agent_name, "a", "re-parented under the agent");
        // A parent never recorded becomes a virtual span; a cycle is left out.
        let orphan = llm("o", Some("missing"), 1, 2, "y");
        let cycle_a = llm("ca", Some("cb"), 1, 2, "z1");
        let cycle_b = llm("cb", Some("ca"), 1, 2, "z2");
        let self_parent = llm("self", Some("self"), 1, 2, "z3");
        let spans = [orphan, cycle_a, cycle_b, self_parent];
        let found = transitions(&spans);
        let names: Vec<&str> = found.iter().map(|t| t.span.span_id.as_str()).collect();
        assert_eq!(names, ["o"]);
        assert!(transitions(&[]).is_empty());
        let mut timeless = llm("t", None, 0, 0, "w");
        timeless.start_time = None;
        timeless.end_time = None;
        let spans = [timeless, reward("r", None, 5, 1.0)];
        let found = transitions(&spans);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].reward, None, "no time, no reward");
    }
}
