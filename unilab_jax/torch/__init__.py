"""The core's torch side: plain ``nn.Module`` classes, whose modules import ``torch``. Nothing
else in the core imports them, or torch, when it is imported: the algorithm registry names each
actor as ``"module:class"`` (``AlgoSpec.torch_actor_class`` imports it where torch is needed).

- ``actors`` (``SACActor``, ``TD3Actor``) and ``flash_actor`` (``FlashSACActor``): one torch
  actor per algorithm, the layer layout the JAX actors have; each builds itself from its
  algorithm's config (``from_config``), names its deterministic action (``deterministic``) and
  lists its weights' JAX leaves (``jax_rows``).
- ``exported`` (``ExportedPolicy``): the observation normaliser and a run's actor, the module
  ``unilab_jax.policy.export`` writes.
- ``weights``: the exact tables between torch tensors and JAX leaves (``Row``) and the copies
  both ways, bit for bit in float32.

The facade's torch learners (``unilab.algos.torch``) train these actors, and its converters
extend these tables with the critics and optimisers; ``unilab_jax.policy.export`` wraps the actor of
a run's algorithm (``AlgoSpec.torch_actor`` in the algorithm registry) with the observation
normaliser.
"""
