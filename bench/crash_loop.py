"""Crash loop: SIGKILL a vecgraph writer at random moments, reopen, check the recovered state.

Each cycle starts a writer subprocess on the same folder (so recovered folders are recovered
again), lets it issue deterministic writes (add nodes, edges, upserts, deletes of nodes, edges and
tenants, a checkpoint every 50 writes, a compaction every 97) and acknowledge each one on stdout
after it returns, kills it with SIGKILL after a random delay, reopens the folder and checks that
every acknowledged write is present and that the state is exactly the one after a prefix of the
issued writes (compared with a plain-Python model), and that exact search finds surviving nodes
by their own vectors. The workload is tests/crash_workload.py (also used by tests/test_crash.py).

    python bench/crash_loop.py                      # 10,000 cycles
    python bench/crash_loop.py --cycles 500 --sync off
    python bench/crash_loop.py --max-seconds 600    # stop after 10 minutes

A failing cycle's folder is copied to --failures (default: <work dir>/failures) and the loop
continues on a fresh folder. Exit status 1 if any cycle failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import crash_workload as cw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sync", choices=("always", "interval", "off"), default="always")
    parser.add_argument("--max-delay", type=float, default=0.3, help="kill at most this many seconds after ready")
    parser.add_argument("--segment-bytes", type=int, default=4096,
                        help="WAL segment size of odd cycles (even ones: the default 64 MiB); 0: default in all")
    parser.add_argument("--max-seconds", type=float, default=None, help="stop after this long (whole cycles)")
    parser.add_argument("--work-dir", default=None, help="default: a new temporary folder")
    parser.add_argument("--failures", default=None, help="where failing folders are copied")
    parser.add_argument("--progress", type=int, default=100, help="print a line every N cycles (0: never)")
    args = parser.parse_args()

    work_dir = args.work_dir or tempfile.mkdtemp(prefix="vecgraph-crash-")
    os.makedirs(work_dir, exist_ok=True)
    failure_dir = args.failures or os.path.join(work_dir, "failures")
    folder = os.path.join(work_dir, "db")
    print(f"crash loop: folder {folder}, seed {args.seed}, sync {args.sync}, segment bytes of odd cycles "
          f"{args.segment_bytes or 'default'}, up to {args.cycles} cycles", flush=True)

    import random
    import shutil

    rng = random.Random(args.seed)
    model = cw.Model()
    acks, failures, early, prefix_plus_one = [], [], 0, 0
    start = time.monotonic()
    cycle = 0
    try:
        for cycle in range(args.cycles):
            if args.max_seconds is not None and time.monotonic() - start > args.max_seconds:
                break
            result, model = cw.run_cycle(folder, model, args.seed, cycle, rng, sync=args.sync,
                                         max_delay=args.max_delay, work_dir=work_dir,
                                         segment_bytes=(args.segment_bytes or None) if cycle % 2 else None)
            acks.append(result.acks)
            early += result.killed_before_ready
            prefix_plus_one += result.prefix == result.acks + 1
            if not result.ok:
                failures.append(result)
                print(f"FAIL cycle {cycle}: acks {result.acks}: {result.message}", flush=True)
                os.makedirs(failure_dir, exist_ok=True)
                shutil.copytree(folder, os.path.join(failure_dir, f"seed{args.seed}-cycle{cycle}"), dirs_exist_ok=True)
                shutil.rmtree(folder, ignore_errors=True)
                model = cw.Model()
            if args.progress and (cycle + 1) % args.progress == 0:
                elapsed = time.monotonic() - start
                print(f"  {cycle + 1} cycles, {len(failures)} failures, {elapsed:.0f} s, "
                      f"{(cycle + 1) / elapsed:.2f} cycles/s, live nodes {len(model.nodes)}", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    elapsed = time.monotonic() - start
    done = len(acks)
    print("summary:")
    print(f"  cycles            {done}")
    print(f"  elapsed           {elapsed:.1f} s ({done / elapsed if elapsed else 0:.2f} cycles/s)")
    if acks:
        print(f"  acked writes      min {min(acks)}, max {max(acks)}, mean {sum(acks) / done:.1f}, total {sum(acks)}")
    print(f"  killed before ready (import / recovery): {early}")
    print(f"  state matched acks + 1 writes (in-flight write landed, or was a no-op): {prefix_plus_one}")
    print(f"  failures          {len(failures)}")
    for f in failures[:20]:
        print(f"    cycle {f.cycle}: {f.message[:500]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
