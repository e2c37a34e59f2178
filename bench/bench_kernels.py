"""The int8 kernels alone, for every ISA this build and CPU have, dim 384:

* gather: ``_core.dot_rows_i8(query, base, rows, isa)`` over 2,000 random rows of a 1M-row
  table (384 MB, far beyond the caches; a fresh row set each call), the scoring pattern of a search;
* scan: ``_core.scan_i8(query, base, isa)`` over 100,000 consecutive rows (38 MB).

Figures: rows/s and effective GB/s (rows x 384 bytes / time), and the speed-up over serial.
The times include the Python call and the binding's row-index check (about 1-3 µs).
"""

from __future__ import annotations

import itertools

import common
import numpy as np
import pytest
import vecgraph as vg
from vecgraph import _core

DIM = common.DIM
COUNT_BASE = 1_000_000
COUNT_GATHER = 2_000
COUNT_SCAN = 100_000
ISAS = vg.available_isas()
MEDIANS: dict = {}


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(0)
    base = rng.integers(-127, 128, size=(COUNT_BASE, DIM), dtype=np.int8)
    query = rng.integers(-127, 128, size=DIM, dtype=np.int8)
    row_sets = [rng.integers(0, COUNT_BASE, size=COUNT_GATHER, dtype=np.uint32) for _ in range(256)]
    return base, query, row_sets


def _record(benchmark, kind, isa, rows):
    median = benchmark.stats.stats.median
    MEDIANS[(kind, isa)] = median
    figures = {"rows_per_s": rows / median, "gb_per_s": rows * DIM / median / 1e9}
    if ("serial" != isa) and (kind, "serial") in MEDIANS:
        figures["speedup_vs_serial"] = MEDIANS[(kind, "serial")] / median
    common.record(benchmark, **figures)


@pytest.mark.parametrize("isa", ISAS)
def bench_kernel_gather(benchmark, tables, isa):
    base, query, row_sets = tables
    benchmark.group = "kernel gather 2000 of 1M rows"
    cycle = itertools.cycle(row_sets)
    benchmark(lambda: _core.dot_rows_i8(query, base, next(cycle), isa))
    _record(benchmark, "gather", isa, COUNT_GATHER)


@pytest.mark.parametrize("isa", ISAS)
def bench_kernel_scan(benchmark, tables, isa):
    base, query, _ = tables
    scan_base = base[:COUNT_SCAN]
    benchmark.group = "kernel scan 100k rows"
    benchmark(_core.scan_i8, query, scan_base, isa)
    _record(benchmark, "scan", isa, COUNT_SCAN)
