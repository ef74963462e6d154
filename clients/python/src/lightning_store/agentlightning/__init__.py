"""agent-lightning's `LightningStore` over gRPC (install the extra: `pip install lightning-store[agentlightning]`).

from lightning_store.agentlightning import LightningStore
store = LightningStore("127.0.0.1:4747")
"""

from lightning_store.agentlightning.store import LightningStore

__all__ = ["LightningStore"]
