"""The real reference UniLab (GitHub ``unilabsim/UniLab`` at ``9aa57115``) beside ours.

``venv.py``: the reference in a venv of its own, from a checkout. ``beside.py``
(``python -m bench.reference``): the reference, our core and our facade's torch path on one of
its tasks, speed and learning, one invocation per task. ``golden_g1.py`` / ``golden_go2.py``:
run in the reference's venv, they record the golden files our task tests compare against
(``tests/golden/reference``).
"""
