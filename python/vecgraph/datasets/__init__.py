"""Real data sets that ship with vecgraph, ready to ingest and to evaluate retrieval on.

- :mod:`vecgraph.datasets.wordnet`: Princeton WordNet 3.0 as a knowledge graph (117,659
  synsets, their typed pointers as edges) with two query sets built from its usage examples.

>>> from vecgraph.datasets import wordnet
>>> tables = wordnet.load()
>>> sorted(tables)
['edges', 'nodes', 'queries']
"""

__all__ = ["wordnet"]
