"""Helpers of the knowledge-base tests: a deterministic embedder without a model."""

from __future__ import annotations

import numpy as np


class Words:
    """Hashed word counts (no model): the same text always gets the same vector."""

    name = "test-words"
    dim = 64

    def __call__(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace(".", " ").replace(",", " ").split():
                out[i, sum(map(ord, word)) % self.dim] += 1.0
            out[i, 0] += 1e-3
        return out
