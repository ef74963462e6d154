"""How the server's pages become agent-lightning's `PaginatedResult`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentlightning.types import PaginatedResult

from lightning_store.calls import Page


def paginated(page: Page[Any], convert: Callable[[Any], Any]) -> PaginatedResult[Any]:
    """Returns a server page as agent-lightning's `PaginatedResult` of converted items."""
    return PaginatedResult(
        items=[convert(item) for item in page.items], limit=page.limit, offset=page.offset, total=page.total
    )


def empty(limit: int, offset: int) -> PaginatedResult[Any]:
    """Returns an empty page, as upstream answers for a rollout it does not know."""
    return PaginatedResult(items=[], limit=limit, offset=offset, total=0)


def server_limit(limit: int) -> int | None:
    """Returns the limit to send for agent-lightning's `limit` (-1: none; 0: the total only)."""
    return None if limit == -1 else limit
