"""Agent-lightning 0.3.0's own triplets for attempts' spans.

Reads a JSON list of cases from stdin, each a list of spans
({"span_id", "parent_id", "name", "start_time", "end_time", "attributes"},
times in seconds, attributes flat), and writes the list of the triplets
`TracerTraceToTriplet()` (its default settings) makes of each.
"""

import json
import sys

from agentlightning.adapter.triplet import TracerTraceToTriplet
from agentlightning.types import Span


def triplets(case: list) -> list:
    """The adapter's triplets of one attempt's spans."""
    spans = [
        Span.from_attributes(
            attributes=span["attributes"],
            rollout_id="r",
            attempt_id="a",
            sequence_id=index,
            name=span["name"],
            trace_id="t",
            span_id=span["span_id"],
            parent_id=span["parent_id"],
            start_time=span["start_time"],
            end_time=span["end_time"],
        )
        for index, span in enumerate(case)
    ]
    return [triplet.model_dump(mode="json") for triplet in TracerTraceToTriplet().adapt(spans)]


if __name__ == "__main__":
    json.dump([triplets(case) for case in json.load(sys.stdin)], sys.stdout)
