//! agent-lightning 1.x's request bodies (`agentlightning/schemas.py` and
//! the route modules), read with pydantic's lax rules and reported as its
//! 422s, in field declaration order.

use crate::http::validate::{Loc, Object, Validator, lax_int};
use lightning_store_core::agl1::{Agl1State, ModelServer, NewAgl1Rollout, StatusPatch};
use lightning_store_core::model::Json;

/// The timeout a rollout config gets when none is given (upstream's).
const DEFAULT_TIMEOUT_SECONDS: i64 = 3600;

/// Reads a `RolloutCreate`.
pub fn rollout_create(v: &mut Validator, loc: &Loc, value: &Json) -> Option<NewAgl1Rollout> {
    let object = v.model(loc, value)?;
    let input = v.required(object, loc, "input").cloned();
    let is_train = v.optional(object, loc, "is_train", true, |v, l, x| v.boolean(l, x));
    let config = v.optional(object, loc, "config", default_config(), |v, l, x| match x {
        Json::Null => Some(default_config()),
        other => rollout_config(v, l, other),
    });
    let metadata = v.optional(
        object,
        loc,
        "metadata",
        metadata_dump(&Object::new()),
        rollout_metadata,
    );
    let rollout_id = v.optional(object, loc, "rollout_id", None, |v, l, x| {
        v.opt_string(l, x)
    });
    Some(NewAgl1Rollout {
        input: input?,
        is_train: is_train?,
        config: config?,
        metadata: metadata?,
        rollout_id: rollout_id?,
    })
}

fn default_config() -> Json {
    serde_json::json!({"timeout_seconds": DEFAULT_TIMEOUT_SECONDS, "local": null, "k8s": null})
}

/// Reads a `RolloutConfig` into the form upstream dumps.
fn rollout_config(v: &mut Validator, loc: &Loc, value: &Json) -> Option<Json> {
    let object = v.model(loc, value)?;
    // The controller's timeout: a duration, by the core's rule.
    let timeout = v.optional(
        object,
        loc,
        "timeout_seconds",
        DEFAULT_TIMEOUT_SECONDS,
        |v, l, x| v.whole_seconds(l, x),
    );
    let local = v.optional(object, loc, "local", Json::Null, |v, l, x| match x {
        Json::Null => Some(Json::Null),
        other => local_config(v, l, other),
    });
    let k8s = v.optional(object, loc, "k8s", Json::Null, |v, l, x| match x {
        Json::Null => Some(Json::Null),
        other => {
            let object = v.model(l, other)?;
            let template = v.optional(object, l, "job_template", None, |v, l, x| {
                v.opt_string(l, x)
            })?;
            Some(serde_json::json!({ "job_template": template }))
        }
    });
    Some(serde_json::json!({"timeout_seconds": timeout?, "local": local?, "k8s": k8s?}))
}

/// Reads a `RolloutLocalConfig`.
fn local_config(v: &mut Validator, loc: &Loc, value: &Json) -> Option<Json> {
    let object = v.model(loc, value)?;
    let agent_class = v.optional(object, loc, "agent_class", None, |v, l, x| {
        v.opt_string(l, x)
    });
    let env_map = v.optional(object, loc, "env_map", Object::new(), |v, l, x| {
        let map = v.dict(l, x)?;
        let mut out = Object::new();
        let mut ok = true;
        for (name, value) in map {
            match v.string(&l.key(name), value) {
                Some(text) => {
                    out.insert(name.clone(), Json::String(text));
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    });
    Some(serde_json::json!({"agent_class": agent_class?, "env_map": env_map?}))
}

/// Reads `RolloutMetadata | dict[str, Any] | None` into the form upstream
/// dumps: `batch_idx` and `sample_idx_in_batch` first, then the extras.
fn rollout_metadata(v: &mut Validator, loc: &Loc, value: &Json) -> Option<Json> {
    match value {
        Json::Null => Some(metadata_dump(&Object::new())),
        Json::Object(object) => {
            // Upstream validates a dict as RolloutMetadata after the union
            // accepted it (and answers 500 when that fails); here it is a 422.
            let mut failed = false;
            for key in ["batch_idx", "sample_idx_in_batch"] {
                if let Some(x) = object.get(key) {
                    failed |= v.opt_int(&loc.key(key), x).is_none();
                }
            }
            (!failed).then(|| metadata_dump(object))
        }
        other => {
            v.issue(
                "model_attributes_type",
                &loc.key("RolloutMetadata"),
                "Input should be a valid dictionary or object to extract fields from",
                other,
                None,
            );
            v.issue(
                "dict_type",
                &loc.key("dict[str,any]"),
                "Input should be a valid dictionary",
                other,
                None,
            );
            None
        }
    }
}

/// Returns validated metadata as `RolloutMetadata` dumps it.
fn metadata_dump(object: &Object) -> Json {
    let mut out = Object::new();
    for key in ["batch_idx", "sample_idx_in_batch"] {
        let value = object
            .get(key)
            .map(|x| lax_int(x).map_or(Json::Null, Json::from))
            .unwrap_or(Json::Null);
        out.insert(key.to_owned(), value);
    }
    for (key, value) in object {
        if key != "batch_idx" && key != "sample_idx_in_batch" {
            out.insert(key.clone(), value.clone());
        }
    }
    Json::Object(out)
}

/// Reads a `RolloutPatch` (only its nested status; other fields are
/// ignored, unknown status fields are refused).
pub fn rollout_patch(v: &mut Validator, loc: &Loc, value: &Json) -> Option<StatusPatch> {
    let object = v.model(loc, value)?;
    let Some(status) = object.get("status").filter(|s| !s.is_null()) else {
        return Some(StatusPatch::default());
    };
    let loc = loc.key("status");
    let status = v.model(&loc, status)?;
    const FIELDS: [&str; 4] = ["state", "k8s_job_name", "last_attempt_id", "error_message"];
    let mut patch = StatusPatch::default();
    let mut ok = true;
    // pydantic reports the declared fields in order, then the extra ones.
    if let Some(value) = status.get("state") {
        match value {
            Json::Null => patch.state = Some(None),
            other => match v.member(&loc.key("state"), other, &Agl1State::ALL) {
                Some(s) => patch.state = Some(Some(s)),
                None => ok = false,
            },
        }
    }
    for (key, slot) in [
        ("k8s_job_name", &mut patch.k8s_job_name),
        ("last_attempt_id", &mut patch.last_attempt_id),
        ("error_message", &mut patch.error_message),
    ] {
        if let Some(value) = status.get(key) {
            match v.opt_string(&loc.key(key), value) {
                Some(text) => *slot = Some(text),
                None => ok = false,
            }
        }
    }
    for (key, value) in status {
        if !FIELDS.contains(&key.as_str()) {
            v.issue(
                "extra_forbidden",
                &loc.key(key),
                "Extra inputs are not permitted",
                value,
                None,
            );
            ok = false;
        }
    }
    ok.then_some(patch)
}

/// Reads a `Model`.
pub fn model(v: &mut Validator, loc: &Loc, value: &Json) -> Option<ModelServer> {
    let object = v.model(loc, value)?;
    let model = v
        .required(object, loc, "model")
        .and_then(|x| v.string(&loc.key("model"), x));
    let endpoint = v
        .required(object, loc, "endpoint")
        .and_then(|x| v.string(&loc.key("endpoint"), x));
    let version = v.optional(object, loc, "version", 0, |v, l, x| v.int(l, x));
    Some(ModelServer {
        model: model?,
        endpoint: endpoint?,
        version: version?,
    })
}

/// Reads a `PauseRequest`: the retry delay and the reason.
pub fn pause_request(v: &mut Validator, loc: &Loc, value: &Json) -> Option<(i64, Option<String>)> {
    let object = v.model(loc, value)?;
    let retry_after = v.optional(object, loc, "retry_after_seconds", 5, |v, l, x| v.int(l, x));
    let reason = v.optional(object, loc, "reason", None, |v, l, x| v.opt_string(l, x));
    Some((retry_after?, reason?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::validate::Invalid;
    use serde_json::json;

    fn issues<T: std::fmt::Debug>(
        read: impl FnOnce(&mut Validator, &Loc, &Json) -> Option<T>,
        value: Json,
    ) -> Json {
        let mut v = Validator::new();
        let out = read(&mut v, &Loc::body(), &value);
        match v.finish(out) {
            Err(Invalid(issues)) => serde_json::to_value(issues).unwrap(),
            other => panic!("expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn rollout_creates_normalise_as_pydantic_dumps() {
        let mut v = Validator::new();
        let value = json!({"input": {"q": 1}, "metadata": {"x": 1, "batch_idx": "2"},
            "config": {"timeout_seconds": 30.0, "local": {"agent_class": "m.A"}, "extra": 1}});
        let created = rollout_create(&mut v, &Loc::body(), &value).unwrap();
        assert_eq!(
            created.metadata,
            json!({"batch_idx": 2, "sample_idx_in_batch": null, "x": 1})
        );
        assert_eq!(
            created.config,
            json!({"timeout_seconds": 30, "local": {"agent_class": "m.A", "env_map": {}}, "k8s": null})
        );
        assert!(created.is_train);
        assert_eq!(created.rollout_id, None);
    }

    #[test]
    fn bad_rollout_creates_are_reported_in_field_order() {
        // The shape agentlightning 1.0.2's server answers for the same body.
        let body = json!([{"input": 1, "metadata": 5, "is_train": "x",
            "config": {"timeout_seconds": "z", "local": {"env_map": {"a": 1}}}}, {}]);
        assert_eq!(
            issues(|v, l, x| v.each(l, x, rollout_create), body),
            json!([
                {"type": "bool_parsing", "loc": ["body", 0, "is_train"], "msg": "Input should be a valid boolean, unable to interpret input", "input": "x"},
                {"type": "int_parsing", "loc": ["body", 0, "config", "timeout_seconds"], "msg": "Input should be a valid integer, unable to parse string as an integer", "input": "z"},
                {"type": "string_type", "loc": ["body", 0, "config", "local", "env_map", "a"], "msg": "Input should be a valid string", "input": 1},
                {"type": "model_attributes_type", "loc": ["body", 0, "metadata", "RolloutMetadata"], "msg": "Input should be a valid dictionary or object to extract fields from", "input": 5},
                {"type": "dict_type", "loc": ["body", 0, "metadata", "dict[str,any]"], "msg": "Input should be a valid dictionary", "input": 5},
                {"type": "missing", "loc": ["body", 1, "input"], "msg": "Field required", "input": {}},
            ])
        );
    }

    #[test]
    fn status_patches_refuse_extra_fields() {
        assert_eq!(
            issues(
                rollout_patch,
                json!({"status": {"foo": 1, "state": "bogus"}})
            ),
            json!([
                {"type": "enum", "loc": ["body", "status", "state"], "msg": "Input should be 'queuing', 'running', 'succeeded' or 'failed'", "input": "bogus", "ctx": {"expected": "'queuing', 'running', 'succeeded' or 'failed'"}},
                {"type": "extra_forbidden", "loc": ["body", "status", "foo"], "msg": "Extra inputs are not permitted", "input": 1},
            ])
        );
        let mut v = Validator::new();
        let patch = rollout_patch(
            &mut v,
            &Loc::body(),
            &json!({"status": {"state": null, "error_message": "e"}}),
        );
        assert_eq!(
            patch,
            Some(StatusPatch {
                state: Some(None),
                error_message: Some(Some("e".into())),
                ..StatusPatch::default()
            })
        );
        assert_eq!(
            rollout_patch(&mut Validator::new(), &Loc::body(), &json!({"other": 1})),
            Some(StatusPatch::default())
        );
    }
}
