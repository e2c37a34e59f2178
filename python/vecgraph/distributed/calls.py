"""Calls from the coordinator to shard actors: in parallel, with a deadline, retried while Ray
restarts a shard that died (reads only), and errors brought back as the shard raised them."""

from __future__ import annotations

import time
from typing import Any, Optional, Union

from ..errors import ShardUnavailableError

#: Seconds between two tries of a read whose shard is restarting.
RETRY_PAUSE_S = 0.05


def ray_module() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            'vecgraph.distributed runs shards as Ray actors: pip install "vecgraph[ray]"'
        ) from exc
    return ray


def _unwrap(exc: BaseException) -> BaseException:
    """The exception the shard raised, from Ray's wrapper of it."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def call_all(
    actors: list,
    shards: list,
    method: Union[str, dict],
    args: dict,
    *,
    timeout_s: float,
    read: bool,
    allow_partial: bool = False,
    restarts: bool = True,
) -> tuple[dict, list]:
    """Call ``method`` on the actors of ``shards`` (indexes) in parallel, with ``args[shard]``
    (a tuple) for each (``method`` may be a dict {shard: method}): ``({shard: value}, [shards that
    did not answer])``.

    A read whose actor died is sent again until ``timeout_s`` after the first send (Ray restarts
    the actor, which reopens its folder; with ``restarts`` False it is not restarted, and the read
    fails at once); a write is never sent twice (it may have been applied).
    A shard that does not answer in time raises :class:`ShardUnavailableError` naming it, unless
    ``allow_partial``, when it is listed as missing. An error the shard's own code raised
    (a bad argument, a missing key) is raised here as it was raised there.
    """
    ray = ray_module()
    from ray.exceptions import RayActorError, RayTaskError

    try:
        from ray.exceptions import ActorUnavailableError
    except ImportError:  # older Ray
        ActorUnavailableError = RayActorError  # noqa: N806
    deadline = time.monotonic() + timeout_s
    names = method if isinstance(method, dict) else {shard: method for shard in shards}
    method = "/".join(sorted(set(names.values())))
    pending = {shard: getattr(actors[shard], names[shard]).remote(*args[shard]) for shard in shards}
    out: dict = {}
    missing: list = []
    failure: Optional[tuple] = None
    while pending:
        by_ref = {ref: shard for shard, ref in pending.items()}
        ready, _ = ray.wait(
            list(by_ref), num_returns=len(by_ref), timeout=max(0.0, deadline - time.monotonic())
        )
        if not ready:  # the deadline passed: every shard still pending is late
            late = sorted(pending)
            if allow_partial and read:
                missing.extend(late)
                break
            raise ShardUnavailableError(
                f"shard {late[0]} did not answer {method} within {timeout_s:g} s"
                + (f" (nor did shards {late[1:]})" if len(late) > 1 else ""),
                late[0],
            )
        for ref in ready:
            shard = by_ref[ref]
            try:
                out[shard] = ray.get(ref)
                del pending[shard]
            except RayTaskError as exc:
                del pending[shard]
                cause = _unwrap(exc)
                if failure is None:  # raised once every call is back (the first one)
                    failure = (shard, cause)
            except (RayActorError, ActorUnavailableError) as exc:
                if getattr(exc, "actor_init_failed", False):  # it could not open its folder: no retry helps
                    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
                    raise ShardUnavailableError(
                        f"shard {shard} could not start: {lines[-1] if lines else exc}", shard
                    ) from exc
                if read and restarts and time.monotonic() < deadline:
                    time.sleep(RETRY_PAUSE_S)
                    pending[shard] = getattr(actors[shard], names[shard]).remote(*args[shard])
                    continue
                del pending[shard]
                if not read:
                    raise ShardUnavailableError(
                        f"shard {shard} died during {method}: the write may or may not have been applied there "
                        f"(a write it acknowledged with sync='always' is kept); {type(exc).__name__}: {exc}",
                        shard,
                    ) from exc
                if allow_partial:
                    missing.append(shard)
                    continue
                why = (
                    "its process died and was not back in time"
                    if restarts
                    else "its process died, and max_restarts=0 lets Ray not restart it"
                )
                raise ShardUnavailableError(
                    f"shard {shard} did not answer {method} ({why}): {type(exc).__name__}", shard
                ) from exc
    if failure is not None:
        shard, cause = failure
        if isinstance(cause, Exception) and not isinstance(cause, (RayActorError, ActorUnavailableError)):
            raise cause
        raise ShardUnavailableError(f"shard {shard} failed during {method}: {cause}", shard)
    return out, sorted(missing)
