"""Agent memory on one graph: an always-loaded overview card per user (layer 1) and detailed
memories recalled on demand (layer 2), with versions, expiry, provenance and verified erasure.

The two tiers follow MemGPT (Packer et al., "MemGPT: Towards LLMs as Operating Systems", 2023:
a core memory always in the prompt, an archival memory searched when needed); superseding a
fact closes its validity interval instead of deleting it, as in Zep / graphiti (Rasmussen et
al., "Zep: A Temporal Knowledge Graph Architecture for Agent Memory", 2025).

>>> import vecgraph as vg                                                     # doctest: +SKIP
>>> mem = vg.Memory.open("agent.vg", embedder="wordllama")                    # doctest: +SKIP
>>> m1 = mem.remember("zhang", "order-service is written in Go 1.22", kind="project")  # doctest: +SKIP
>>> mem.recall("zhang", "which language is order-service in?")[0].text       # doctest: +SKIP
'order-service is written in Go 1.22'

Everything lives in one :class:`vecgraph.Graph` folder (see :mod:`vecgraph.memory.store` for
the layout): the memories, the entities they mention, the cards and the TTL policy, so that
snapshots, recovery and erasure cover all of it.
"""

from .card import default_summarizer, default_token_counter
from .entities import default_extractor
from .erasure import ErasureReceipt, scan_folder
from .store import Memory, MemoryHit, Recall

__all__ = ["Memory", "MemoryHit", "Recall", "ErasureReceipt", "scan_folder", "default_summarizer",
           "default_token_counter", "default_extractor"]
