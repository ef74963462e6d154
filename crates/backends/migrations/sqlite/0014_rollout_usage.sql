-- What each rollout's model calls used (crates/core/src/training/usage.rs,
-- `RolloutUsage`): added to as its model requests (1.x) or model call
-- spans (0.x) are recorded, read when the rollout counts in the training
-- summary, whose measures (codes 2: prompt tokens, 3: response tokens,
-- 4: call latency) it gives. Calls recorded before this migration are not
-- in it.

-- `latency_ms`: the calls' latencies' sum; `reported`: the calls that
-- reported their tokens, whose tokens the last two columns sum.
CREATE TABLE rollout_usage (
    rollout_id TEXT PRIMARY KEY,
    calls INTEGER NOT NULL,
    latency_ms INTEGER NOT NULL,
    reported INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    response_tokens INTEGER NOT NULL
) WITHOUT ROWID;
