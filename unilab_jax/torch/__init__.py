"""The core's torch side (needs ``torch``; nothing else in the core imports it).

- ``actors`` (``SACActor``, ``TD3Actor``) and ``flash_actor`` (``FlashSACActor``): one torch
  actor per algorithm, the layer layout the JAX actors have; each builds itself from its
  algorithm's config (``from_config``), names its deterministic action (``deterministic``) and
  lists its weights' JAX leaves (``jax_rows``).
- ``lazy``: how those classes are defined on first use (their methods in plain mixins; torch is
  imported when a class is first looked up, never when a module is imported).
- ``weights``: the exact tables between torch tensors and JAX leaves (``Row``) and the copies
  both ways, bit for bit in float32.

The facade's torch learners (``unilab.algos.torch``) train these actors, and its converters
extend these tables with the critics and optimisers; ``unilab_jax.policy.export`` wraps the actor of
a run's algorithm (``AlgoSpec.torch_actor`` in the algorithm registry) with the observation
normaliser.
"""
