"""GraphRAG over documents: :class:`KnowledgeBase`.

Documents (Markdown, HTML, plain text, PDF) become document → section → chunk nodes with
``part_of`` and ``next`` edges; each chunk carries a contextual prefix (Anthropic, "Introducing
Contextual Retrieval", 2024) and its document's metadata (source, version, date, status); the
entities the chunks name become nodes linked by ``mentions`` (entity resolution merges
spellings, with a log); Leiden communities of the entity graph get summaries for global search
(Edge et al., "From Local to Global: A Graph RAG Approach to Query-Focused Summarization", 2024);
a RAPTOR tree (Sarthi et al., ICLR 2024) summarises clusters of chunks up to a root.

>>> import vecgraph as vg                                                      # doctest: +SKIP
>>> kb = vg.KnowledgeBase.open("kb.vg", embedder="wordllama")                  # doctest: +SKIP
>>> kb.add_documents(["manual/", "notes.md"])                                  # doctest: +SKIP
>>> kb.build_communities(); kb.build_tree()                                    # doctest: +SKIP
>>> kb.local_search("which service does the billing job depend on?").to_context(2000)  # doctest: +SKIP

Every step is a hook with an offline default: ``chunker``, ``contextualizer``, ``extractor``,
``summarizer`` and global search's ``map``; :mod:`vecgraph.kb.llm_hooks` has implementations
that ask a model through an OpenAI-compatible chat endpoint (:class:`vecgraph.llm.OpenAIChat`),
used only when configured. Everything lives in one :class:`vecgraph.Graph` folder (layout:
:mod:`vecgraph.kb.store`). The libraries it uses come with ``pip install "vecgraph[kb]"``.
"""

from .build import CommunityReport, TreeReport
from .chunking import Chunk, Chunker, FixedChunker
from .documents import Document, Section, read_document
from .extract import EntityResolver, Merge, RuleExtractor
from .hooks import Entity, Extraction, HookError, Relation
from .results import ChunkHit, CommunityHit, EntityHit, KBResult, RelationHit, SummaryHit
from .store import AddReport, KnowledgeBase, default_contextualizer

__all__ = [
    "AddReport",
    "Chunk",
    "ChunkHit",
    "Chunker",
    "CommunityHit",
    "CommunityReport",
    "Document",
    "Entity",
    "EntityHit",
    "EntityResolver",
    "Extraction",
    "FixedChunker",
    "HookError",
    "KBResult",
    "KnowledgeBase",
    "Merge",
    "Relation",
    "RelationHit",
    "RuleExtractor",
    "Section",
    "SummaryHit",
    "TreeReport",
    "default_contextualizer",
    "read_document",
]
