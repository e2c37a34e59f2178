"""Concurrency stress: N searching threads and 1 writing thread on a durable graph.

The writer adds, upserts (existing, new and previously deleted keys), deletes nodes, edges and
tenants, compacts and checkpoints; the searchers run exact and HNSW searches (with hops, tenant
filters), neighbors() and ``key in g``, and fail if they see a key whose delete returned before
they started (and that was not added again since). At the end every live key must be found first
by exact search for its own vector, before and after a reopen. The code is
tests/test_concurrency.py (run_stress); the test runs it for 5 seconds.

    python bench/stress_concurrency.py                 # 30 s, 4 searchers
    python bench/stress_concurrency.py --seconds 300 --searchers 8 --sync always

Exit status 1 on any error.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

# The stress graph is small: keep its searches on HNSW (not the exact scan small graphs take by
# default, vecgraph.FULL_SCAN_MAX_NODES), as the test suite does.
os.environ.setdefault("VECGRAPH_FULL_SCAN_MAX_NODES", "0")

from test_concurrency import run_stress  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--searchers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sync", choices=("always", "interval", "off"), default="interval")
    parser.add_argument("--folder", default=None, help="graph folder (default: a new temporary one)")
    args = parser.parse_args()
    folder = args.folder or os.path.join(tempfile.mkdtemp(prefix="vecgraph-stress-"), "db")
    print(f"stress: {args.searchers} searchers + 1 writer for {args.seconds:g} s on {folder} (sync {args.sync})",
          flush=True)
    start = time.monotonic()
    report = run_stress(folder, args.seconds, searchers=args.searchers, seed=args.seed, sync=args.sync)
    elapsed = time.monotonic() - start
    writes = sum(report.writes.values())
    print("summary:")
    print(f"  elapsed           {elapsed:.1f} s (final checks and reopen included)")
    print(f"  writes            {writes} ({writes / args.seconds:.0f}/s): {dict(report.writes)}")
    print(f"  searches          {report.searches} ({report.searches / args.seconds:.0f}/s), "
          f"{report.queries_for_deleted_vectors} of them for the vector of a deleted key")
    print(f"  neighbors() reads {report.neighbor_reads}, 'key in g' checks of deleted keys {report.contains_checks}")
    print(f"  final graph       {report.live} live keys, {report.deleted} keys deleted (and not re-added)")
    print(f"  errors            {len(report.errors)}")
    for e in report.errors[:10]:
        print("   ", e)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
