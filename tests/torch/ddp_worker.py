"""Spawned rank of the 2-process gloo equivalence test (importable by spawned children)."""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.fast_td3.learner import FastTD3Learner

LEARNERS = {"sac": FastSACLearner, "td3": FastTD3Learner}


def one_update(learner, batch: dict, noise: torch.Tensor) -> None:
    """One critic (+ temperature) update, one actor update, one target update."""
    learner.update_critic(batch, noise)
    learner.update_actor(batch, noise)
    learner.soft_update_target()


def rank_main(rank: int, world: int, port: int, algo: str, kwargs: dict, payload: dict, out: str):
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )  # fmt: skip
    try:
        learner = LEARNERS[algo](world_size=world, **kwargs)
        learner.load_state_dict(payload["state"])
        rows = payload["noise"].shape[0] // world
        part = slice(rank * rows, (rank + 1) * rows)
        batch = {k: v[part] for k, v in payload["batch"].items()}
        one_update(learner, batch, payload["noise"][part])
        torch.save(learner.get_state_dict(), f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()
