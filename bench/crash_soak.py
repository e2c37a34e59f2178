"""Crash soak: SIGKILL a multi-threaded vecgraph writer thousands of times, check every
acknowledged write after each reopen.

Each cycle starts a writer subprocess on the same folder (so recovered folders are recovered
again): three writer threads issue adds (now and then a bulk add of 4,500 nodes, which leaves
the next open a background HNSW pass), upserts that bring deleted keys back, deletes, edges,
edge deletes and ``delete_tenant``, each thread on its own keys, while another thread
checkpoints every 20-80 ms and compacts every third time; ``sync="always"``, 64 KiB WAL
segments. The writer is killed with SIGKILL at a random moment (10% of cycles during import or
``Graph.open``), the folder is reopened, and each thread's keys must hold exactly its writes up
to its last acknowledgement (or one more, whose acknowledgement the kill cut off), with nothing
else in the graph; exact searches find surviving nodes by their own vectors. The workload is
tests/soak_workload.py (a short run is tests/test_crash_soak.py and part of .ci/run).

    python bench/crash_soak.py                       # 10,000 cycles, two folders at once
    python bench/crash_soak.py --cycles 50 --jobs 1  # the short run of .ci/run
    python bench/crash_soak.py --max-seconds 600

``--jobs N`` runs N folders side by side (their cycles add up to --cycles). A failing cycle's
folder is copied to ``<work dir>/failures`` and its job goes on with a fresh folder. Prints the
cycles, acknowledged writes, failures (a failure is an acknowledged write lost, or a state no
prefix of the writes explains), where the kills struck and the time; exit status 1 on any
failure.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import soak_workload as sw  # noqa: E402
from crash_workload import Model  # noqa: E402


def run_job(job: int, cycles: int, seed: int, threads: int, work_dir: str, max_seconds: float | None,
            progress: int) -> dict:
    """``cycles`` cycles on one folder; returns the job's figures."""
    job_dir = os.path.join(work_dir, f"job{job}")
    os.makedirs(job_dir, exist_ok=True)
    folder = os.path.join(job_dir, "db")
    rng = random.Random(f"{seed}/{job}")
    models = [Model() for _ in range(threads)]
    figures = {"cycles": 0, "acks": 0, "failures": [], "struck": Counter(), "background_passes": 0}
    start = time.monotonic()
    for cycle in range(cycles):
        if max_seconds is not None and time.monotonic() - start > max_seconds:
            break
        result, models = sw.run_cycle(folder, models, seed * 1000 + job, cycle, rng, work_dir=job_dir)
        figures["cycles"] += 1
        figures["acks"] += result.acks
        figures["struck"][result.struck] += 1
        figures["background_passes"] += result.pending >= 4096
        if not result.ok:
            figures["failures"].append(f"job {job} cycle {cycle}: {result.message}")
            print(f"FAIL job {job} cycle {cycle} ({result.struck}): {result.message}", flush=True)
            failed = os.path.join(work_dir, "failures", f"job{job}-cycle{cycle}")
            shutil.copytree(folder, failed, dirs_exist_ok=True)
            shutil.rmtree(folder, ignore_errors=True)
            models = [Model() for _ in range(threads)]
        if progress and (cycle + 1) % progress == 0:
            elapsed = time.monotonic() - start
            print(f"  job {job}: {cycle + 1} cycles, {figures['acks']} acknowledged writes, "
                  f"{len(figures['failures'])} failures, {elapsed:.0f} s", flush=True)
    figures["seconds"] = time.monotonic() - start
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=10_000, help="cycles in all (default 10,000)")
    parser.add_argument("--jobs", type=int, default=2, help="folders killed side by side (default 2)")
    parser.add_argument("--threads", type=int, default=3, help="writer threads per writer process (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=None, help="stop after this long (whole cycles)")
    parser.add_argument("--work-dir", default=None, help="default: a new temporary folder")
    parser.add_argument("--progress", type=int, default=250, help="print a line every N cycles of a job (0: never)")
    args = parser.parse_args()
    if args.cycles < 1 or args.jobs < 1 or args.threads < 1:
        parser.error("--cycles, --jobs and --threads must be >= 1")
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="vecgraph-soak-")
    os.makedirs(work_dir, exist_ok=True)
    print(f"crash soak: {args.cycles} cycles in {args.jobs} folder(s) under {work_dir}, {args.threads} writer "
          f"threads, seed {args.seed}", flush=True)
    shares = [args.cycles // args.jobs + (j < args.cycles % args.jobs) for j in range(args.jobs)]
    start = time.monotonic()
    if args.jobs == 1:
        results = [run_job(0, shares[0], args.seed, args.threads, work_dir, args.max_seconds, args.progress)]
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_job, j, shares[j], args.seed, args.threads, work_dir, args.max_seconds,
                                   args.progress) for j in range(args.jobs)]
            results = [f.result() for f in futures]
    elapsed = time.monotonic() - start
    cycles = sum(r["cycles"] for r in results)
    acks = sum(r["acks"] for r in results)
    failures = [f for r in results for f in r["failures"]]
    struck = sum((r["struck"] for r in results), Counter())
    print("summary:")
    print(f"  cycles                 {cycles}")
    print(f"  acknowledged writes    {acks} (checkpoints and compactions not counted)")
    print(f"  failures (lost)        {len(failures)}")
    print(f"  kills struck           " + ", ".join(f"{name} {struck[name]}" for name in
                                                   ("open", "checkpoint", "index pass", "writes")))
    print(f"  opens with a background index pass  {sum(r['background_passes'] for r in results)}")
    print(f"  elapsed                {elapsed:.0f} s ({cycles / elapsed if elapsed else 0:.2f} cycles/s)")
    for failure in failures[:20]:
        print(f"    {failure[:500]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
