"""An agent-lightning 1.x agent for the tests, run by agentlightning's own
local controller in a subprocess: two chat turns through the gateway
(`AGL_OPENAI_BASE_URL`), then a reward (`AGL_EVENT_URL`). Like a robust
agent, it retries what failed to reach the server (with backoff, within a
deadline), and its reward carries an `Idempotency-Key`, so a retried POST
is recorded once.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import httpx

# Answers that mean "try again": the server is restarting or busy.
RETRIED_STATUSES = frozenset({429, 502, 503, 504})
DEADLINE_SECONDS = 90.0


def post(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POSTs `body`, retrying transport errors and busy answers until the deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    delay = 0.05
    while True:
        try:
            response = client.post(url, json=body, headers=headers)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
        else:
            if response.status_code not in RETRIED_STATUSES or time.monotonic() > deadline:
                return response
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def reply_of(response: httpx.Response) -> str:
    """Returns the assistant's text of a chat completion."""
    response.raise_for_status()
    content = response.json()["choices"][0]["message"]["content"]
    assert isinstance(content, str)
    return content


class Agent:
    """Answers the task's `QUESTION` in two turns and reports a reward."""

    def run(self) -> None:
        base_url = os.environ["AGL_OPENAI_BASE_URL"]
        event_url = os.environ["AGL_EVENT_URL"]
        key = os.environ.get("AGL_KEY", "")
        question = os.environ["QUESTION"]
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        with httpx.Client(headers=headers, timeout=30.0) as client:
            messages: list[dict[str, str]] = [{"role": "user", "content": question}]
            first = reply_of(
                post(
                    client,
                    f"{base_url}/chat/completions",
                    {"model": "agent", "messages": messages},
                )
            )
            messages += [
                {"role": "assistant", "content": first},
                {"role": "user", "content": "again"},
            ]
            second = reply_of(
                post(
                    client,
                    f"{base_url}/chat/completions",
                    {"model": "agent", "messages": messages},
                )
            )
            reward = {
                "event_type": "reward",
                "data": {"value": float(len(second)), "source": "agent"},
            }
            post(client, event_url, reward, {"Idempotency-Key": uuid.uuid4().hex}).raise_for_status()
