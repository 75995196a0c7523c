"""Collection and the device program: the fused MJX step with its learner updates (``step``),
the replay buffer (``replay``), and C MuJoCo collection on CPU threads (``mujoco``: the
collection schedule the trainer drives; ``collector``: the threads and their device)."""
