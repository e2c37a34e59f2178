"""vecgraph.entities: entity names and their specificity."""

from __future__ import annotations

import math

import pytest

from vecgraph import entities


def test_name_specificity_is_the_sum_of_idf_and_the_product_of_shares():
    def frequencies(terms):
        df = {"open": 50, "file": 10, "zap": 0}
        return 100, [df[t] for t in terms]

    spec = entities.name_specificity(["open", "open file", "zap"], frequencies)

    def idf(n):
        return math.log(1 + (100 - n + 0.5) / (n + 0.5))

    assert spec["open"] == pytest.approx((idf(50), 0.5))
    assert spec["open file"] == pytest.approx((idf(50) + idf(10), 0.05))
    assert spec["zap"] == pytest.approx((idf(0), 0.0))
    assert entities.name_specificity(["x"], lambda terms: (0, [0])) == {"x": (1.0, 0.0)}
    assert entities.name_terms("A7-Pro controller") == ["a7-pro", "controller"]
