"""Real data sets that ship with vecgraph, ready to ingest and to evaluate retrieval on.

- :mod:`vecgraph.datasets.wordnet`: Princeton WordNet 3.0 as a knowledge graph (117,659
  synsets, their typed pointers as edges) with two query sets built from its usage examples.

Three development data sets, built (then cached in ``~/.cache/vecgraph/datasets``) from Debian
packages installed on the machine rather than shipped:

- :mod:`vecgraph.datasets.manpages`: the Linux man-pages (``manpages``, ``manpages-dev``), one
  node per page (its DESCRIPTION), SEE ALSO references as edges, known-item queries from the
  NAME summaries.
- :mod:`vecgraph.datasets.jargon`: the Jargon File (``dict-jargon``), one node per entry, its
  ``{cross references}`` as edges, each linking entry as a leave-one-out query for its targets.
- :mod:`vecgraph.datasets.debian_docs`: the Debian FAQ (``debian-faq``) and the Debian Reference
  (``debian-reference-en``) as Markdown documents for :class:`vecgraph.KnowledgeBase`, with the
  FAQ's questions (their headings taken out of the documents) as known-item queries for the
  chunks of their answers.

>>> from vecgraph.datasets import wordnet
>>> tables = wordnet.load()
>>> sorted(tables)
['edges', 'nodes', 'queries']
"""

__all__ = ["debian_docs", "jargon", "manpages", "wordnet"]
