"""How agent-lightning's paging and filter conventions map onto the server's queries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from agentlightning.types import PaginatedResult

from lightning_store.calls import Page


def paginated(page: Page[Any], convert: Callable[[Any], Any], limit: int) -> PaginatedResult[Any]:
    """Returns a server page as agent-lightning's `PaginatedResult` of converted items.

    `limit` is the caller's: 0 asked for the total only (see `server_limit`).
    """
    items = [convert(item) for item in page.items] if limit != 0 else []
    return PaginatedResult(items=items, limit=0 if limit == 0 else page.limit, offset=page.offset, total=page.total)


def empty(limit: int, offset: int) -> PaginatedResult[Any]:
    """Returns an empty page, as upstream answers where nothing can match."""
    return PaginatedResult(items=[], limit=limit, offset=offset, total=0)


def server_limit(limit: int) -> int | None:
    """Returns the limit to send for agent-lightning's `limit` (-1: none).

    `limit=0` asks for the total only: upstream answers an empty page, the server refuses 0 until
    the proto accepts it (issue 12), so the client asks for one item and drops it.
    """
    return None if limit == -1 else max(limit, 1) if limit == 0 else limit


def settle_empty_lists(
    filter_logic: Literal["and", "or"], lists: Sequence[Sequence[Any] | None], has_other: bool
) -> Literal["and", "or"] | None:
    """Returns the logic to send once explicitly empty `*_in` lists are dropped; None: nothing matches.

    Upstream pools every condition under `filter_logic`: an empty list is a
    condition nothing meets, and a query without any condition returns
    everything, with AND or OR. The server reads an empty list as "no
    filter", so the client settles them here (the proto's explicit empty
    filter of issue 12 will let the server do it).
    """
    any_empty = any(values is not None and len(values) == 0 for values in lists)
    given = any(values for values in lists) or has_other
    if any_empty and (filter_logic == "and" or not given):
        return None  # AND with a condition nothing meets, or OR over such conditions only
    return filter_logic if given else "and"  # no condition at all: everything, whatever the logic
