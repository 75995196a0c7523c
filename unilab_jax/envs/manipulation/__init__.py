"""Manipulation tasks on models shipped with the package (``data/``, with their provenance).

``sharpa.py``: SharpaInhandRotation, the reference UniLab's in-hand rotation with the Sharpa Wave
hand, C MuJoCo only; its config (``sharpa_config.py``), model (``sharpa_model.py``), draws
(``sharpa_randomisation.py``), sensing (``sharpa_observation.py``), reward terms
(``sharpa_reward.py``), grasp caches (``grasp_cache.py``) and their collection with the
reference's stable-grasp rule (``sharpa_grasps.py``; ``unilab-jax sharpa-grasps``). The
registry imports the task module; this package imports nothing, so importing it builds no model.
"""
