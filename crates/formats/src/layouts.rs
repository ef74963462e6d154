//! The Parquet schema of each export layout: the fields of its JSON records
//! (docs/export.md#the-rollouts-layout, docs/trajectories.md) with their
//! types. What has no fixed shape (a rollout's input and metadata, a
//! span's attributes, events and links) is a `JSON` column holding the
//! value's JSON text. A field a record holds beyond its schema is kept in
//! the struct's `extra` column where the schema has one (a span's fields
//! agent-lightning's `Span` model does not declare).

use super::schema::{Field, Kind, Schema};

/// Returns the schema of the layout named `layout` (`rollouts`,
/// `triplets` or `messages`), or `None` for another name.
pub fn schema(layout: &str) -> Option<Schema> {
    match layout {
        "rollouts" => Some(rollouts()),
        "triplets" => Some(triplets()),
        "messages" => Some(messages()),
        _ => None,
    }
}

fn list(item: Kind) -> Kind {
    Kind::List(Box::new(item))
}

/// One record per rollout, its attempts, spans and 1.x events nested.
pub fn rollouts() -> Schema {
    use Field as F;
    use Kind::{Boolean, Double, Int64, Json, String as Text};
    let config = Kind::Struct(vec![
        F::optional("timeout_seconds", Double),
        F::optional("unresponsive_seconds", Double),
        F::required("max_attempts", Int64),
        F::required("retry_condition", list(Text)),
    ]);
    let attempt = Kind::Struct(vec![
        F::required("rollout_id", Text),
        F::required("attempt_id", Text),
        F::required("sequence_id", Int64),
        F::required("start_time", Double),
        F::optional("end_time", Double),
        F::required("status", Text),
        F::optional("worker_id", Text),
        F::optional("last_heartbeat_time", Double),
        F::optional("metadata", Json),
    ]);
    let span = Kind::Struct(vec![
        F::required("rollout_id", Text),
        F::required("attempt_id", Text),
        F::required("sequence_id", Int64),
        F::required("trace_id", Text),
        F::required("span_id", Text),
        F::optional("parent_id", Text),
        F::required("name", Text),
        F::required("status", Json),
        F::required("attributes", Json),
        F::required("events", Json),
        F::required("links", Json),
        F::optional("start_time", Double),
        F::optional("end_time", Double),
        F::optional("context", Json),
        F::optional("parent", Json),
        F::required("resource", Json),
        F::optional("extra", Kind::Extra),
    ]);
    let event = Kind::Struct(vec![
        F::required("event_type", Text),
        F::required("attempt_id", Text),
        F::required("timestamp", Double),
        F::optional("data", Json),
    ]);
    let dimension = Kind::Struct(vec![
        F::required("name", Text),
        F::required("value", Double),
    ]);
    Schema {
        name: "rollout",
        fields: vec![
            F::optional("cursor", Text),
            F::required("rollout_id", Text),
            F::optional("input", Json),
            F::required("start_time", Double),
            F::optional("end_time", Double),
            F::optional("mode", Text),
            F::optional("resources_id", Text),
            F::required("status", Text),
            F::required("config", config),
            F::optional("metadata", Json),
            F::optional("reward", Double),
            F::required("reward_dimensions", list(dimension)),
            F::required("attempts", list(attempt)),
            F::required("spans", list(span)),
            F::required("spans_evicted", Boolean),
            F::optional("events", list(event)),
        ],
    }
}

/// One record per training row, skipped model call or rollout without
/// rows: the fields of the three kinds, each one null where its kind has
/// no such field.
pub fn triplets() -> Schema {
    use Field as F;
    use Kind::{Double, Int64, Json, String as Text};
    let reason = Kind::Struct(vec![
        F::required("code", Text),
        F::optional("count", Int64),
        F::optional("detail", Text),
    ]);
    Schema {
        name: "triplet",
        fields: vec![
            F::optional("cursor", Text),
            F::required("kind", Text),
            F::required("rollout_id", Text),
            F::optional("attempt_id", Text),
            F::optional("resources_id", Text),
            F::optional("row_index", Int64),
            F::optional("call_index", Int64),
            F::optional("model", Text),
            F::optional("model_version", Int64),
            F::optional("prompt_token_ids", list(Int64)),
            F::optional("response_token_ids", list(Int64)),
            F::optional("response_log_probs", list(Double)),
            F::optional("reward", Double),
            F::optional("image_urls", list(Text)),
            F::optional("routed_experts", Json),
            F::optional("agent_name", Text),
            F::optional("response_id", Text),
            F::optional("reason", Text),
            F::optional("http_status", Int64),
            F::optional("error", Text),
            F::optional("model_calls", Int64),
            F::optional("reasons", list(reason)),
        ],
    }
}

/// One conversation per rollout, in the chat format TRL reads.
pub fn messages() -> Schema {
    use Field as F;
    use Kind::{Double, Int64, Json, String as Text};
    let message = Kind::Struct(vec![
        F::required("role", Text),
        F::required("content", Text),
        F::optional("tool_calls", Json),
        F::optional("tool_call_id", Text),
        F::optional("name", Text),
    ]);
    Schema {
        name: "conversation",
        fields: vec![
            F::optional("cursor", Text),
            F::required("messages", list(message)),
            F::optional("reward", Double),
            F::required("rollout_id", Text),
            F::optional("attempt_id", Text),
            F::optional("resources_id", Text),
            F::required("status", Text),
            F::optional("mode", Text),
            F::optional("model", Text),
            F::required("model_calls", Int64),
            F::required("calls_in_conversation", Int64),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_has_a_schema_that_parquet_accepts() {
        for layout in ["rollouts", "triplets", "messages"] {
            let schema = schema(layout).expect("a schema per layout");
            schema.to_parquet().expect("a valid Parquet schema");
            assert_eq!(schema.fields[0].name, "cursor");
        }
        assert!(schema("spans").is_none());
    }
}
