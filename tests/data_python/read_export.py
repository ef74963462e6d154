"""Reads an exported Parquet file with each reader a notebook would use.

Usage: read_export.py FILE NESTED

Prints one JSON object: for each reader (pyarrow, pandas, polars, DuckDB,
Hugging Face datasets), what it read: the number of rows, the `rollout_id`
and `reward` columns, and the length of the list column NESTED in each row,
so that the test can compare every reader with the JSON Lines export.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import datasets  # type: ignore[import-untyped]
import duckdb
import pandas as pd  # type: ignore[import-untyped]
import polars as pl
import pyarrow.parquet as pq  # type: ignore[import-untyped]

Rows = list[dict[str, Any]]


def summary(rows: Rows, nested: str) -> dict[str, Any]:
    """What the test compares: row count, ids, rewards, nested lengths."""

    def reward(value: Any) -> float | None:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return float(value)

    def length(value: Any) -> int | None:
        return None if value is None else len(value)

    return {
        "rows": len(rows),
        "rollout_id": [str(row["rollout_id"]) for row in rows],
        "reward": [reward(row["reward"]) for row in rows],
        "nested": [length(row[nested]) for row in rows],
    }


def with_pyarrow(path: str) -> Rows:
    rows: Rows = pq.read_table(path).to_pylist()
    return rows


def with_pandas(path: str) -> Rows:
    # Lists come back as NumPy arrays, missing numbers as NaN.
    rows: Rows = pd.read_parquet(path).to_dict("records")
    return rows


def with_polars(path: str) -> Rows:
    return pl.read_parquet(path).to_dicts()


def with_duckdb(path: str) -> Rows:
    relation = duckdb.sql("SELECT * FROM read_parquet(?)", params=[path])
    assert relation is not None  # a query has a relation; only a statement has none
    columns = relation.columns
    return [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]


def with_datasets(path: str) -> Rows:
    dataset = datasets.Dataset.from_parquet(path)
    assert isinstance(dataset, datasets.Dataset)
    return [dict(row) for row in dataset]


READERS: Sequence[tuple[str, Callable[[str], Rows]]] = (
    ("pyarrow", with_pyarrow),
    ("pandas", with_pandas),
    ("polars", with_polars),
    ("duckdb", with_duckdb),
    ("datasets", with_datasets),
)

if __name__ == "__main__":
    path, nested = sys.argv[1], sys.argv[2]
    datasets.disable_progress_bars()
    print(json.dumps({name: summary(read(path), nested) for name, read in READERS}))
