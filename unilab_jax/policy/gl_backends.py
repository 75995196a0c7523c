"""Which OpenGL backend MuJoCo renders offscreen with, chosen before ``mujoco`` makes a context.

``choose_gl_backend`` takes the user's ``MUJOCO_GL`` when set, else the first of
``GL_BACKENDS`` (``egl``, ``osmesa``, ``glfw``) that renders a tiny model in a short-lived
subprocess (``probe_gl_backend``: a failed backend cannot be undone inside a process, PyOpenGL
fixes its platform on first use); ``no_backend_message`` is the one line saying what each
failed on and what to install; ``use_gl_backend`` sets the choice up in this process.
``RenderError`` (rendering or encoding cannot run here) is the error of all of ``play``.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

__all__ = [
    "GL_BACKENDS",
    "RenderError",
    "choose_gl_backend",
    "no_backend_message",
    "probe_gl_backend",
    "use_gl_backend",
]

#: Backends tried, in order, when ``MUJOCO_GL`` is not set.
GL_BACKENDS = ("egl", "osmesa", "glfw")
_INSTALL_HINT = (
    "install EGL (Debian/Ubuntu: apt-get install libegl1 libgl1, with a GPU driver or Mesa's "
    "libegl-mesa0) or OSMesa for software rendering (apt-get install libosmesa6), or run under "
    "a display (e.g. xvfb-run) for glfw; or set MUJOCO_GL to a backend that works here"
)
_DISABLED = ("disable", "disabled", "off", "false", "0")


class RenderError(RuntimeError):
    """Rendering or encoding cannot run here (the message says why and what to install)."""


# A tiny model rendered in a fresh interpreter; prints "ok" or "fail <reason>" as its last line.
_PROBE = r"""
import ctypes.util, os, sys, warnings
backend = os.environ.get("MUJOCO_GL", "")
libs = {"egl": "EGL", "osmesa": "OSMesa"}
if backend in libs and ctypes.util.find_library(libs[backend]) is None:
    print(f"fail lib{libs[backend]}.so not found"); sys.stdout.flush(); os._exit(0)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        import mujoco
        # Directly: ``mujoco.Renderer`` is silently absent when its GL context fails to import.
        from mujoco.rendering.classic.renderer import Renderer
        xml = "<mujoco><worldbody><geom size='1'/></worldbody></mujoco>"
        m = mujoco.MjModel.from_xml_string(xml)
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)
        r = Renderer(m, 8, 8)
        r.update_scene(d)
        px = r.render()
        assert px.shape == (8, 8, 3), px.shape
        r.close()
        print("ok")
    except BaseException as err:
        try:
            text = str(err)
        except Exception:
            text = ""
        text = " ".join(text.split())[:120]
        notes = [" ".join(str(w.message).split()) for w in caught][:1]
        reason = f"{type(err).__name__}: {text}" if text else type(err).__name__
        print("fail " + "; ".join([*notes, reason]))
sys.stdout.flush()
os._exit(0)
"""


def probe_gl_backend(backend: str, timeout: float = 60.0) -> str | None:
    """None when MuJoCo renders with ``MUJOCO_GL=backend`` in a fresh process, else why not
    (the answer is kept for the rest of this process)."""
    if backend not in _PROBED:
        _PROBED[backend] = _probe(backend, timeout)
    return _PROBED[backend]


_PROBED: dict[str, str | None] = {}


def _probe(backend: str, timeout: float) -> str | None:
    env = {**os.environ, "MUJOCO_GL": backend}
    try:
        # close_fds=False lets Python use posix_spawn rather than fork (JAX warns on fork).
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            close_fds=False,
        )
    except subprocess.TimeoutExpired:
        return f"no frame within {timeout:.0f} s"
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if last == "ok":
        return None
    if last.startswith("fail "):
        return last[len("fail ") :]
    tail = " ".join(proc.stderr.strip().splitlines()[-1:])
    return f"exit status {proc.returncode}" + (f": {tail}" if tail else "")


def choose_gl_backend() -> tuple[str | None, dict[str, str]]:
    """``(backend, failures)``: the user's ``MUJOCO_GL`` when set, else the first of
    :data:`GL_BACKENDS` that renders; ``backend`` is None when none does, and ``failures``
    maps every backend tried and failed to its reason."""
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    if requested:
        if requested in _DISABLED:
            return None, {requested: f"MUJOCO_GL={requested} turns MuJoCo's rendering off"}
        reason = probe_gl_backend(requested)
        return (requested, {}) if reason is None else (None, {requested: reason})
    failures: dict[str, str] = {}
    for backend in GL_BACKENDS:
        reason = probe_gl_backend(backend)
        if reason is None:
            return backend, failures
        failures[backend] = reason
    return None, failures


def no_backend_message(failures: dict[str, str]) -> str:
    """One line: what was tried, why each failed, what to do."""
    tried = "; ".join(f"{b} ({why})" for b, why in failures.items())
    if os.environ.get("MUJOCO_GL", "").strip():
        return (
            f"MuJoCo cannot render offscreen with MUJOCO_GL={os.environ['MUJOCO_GL']}: {tried}; "
            f"unset MUJOCO_GL to try {', '.join(GL_BACKENDS)} in turn, or {_INSTALL_HINT}"
        )
    return f"no OpenGL backend renders offscreen here (MUJOCO_GL tried: {tried}); {_INSTALL_HINT}"


def use_gl_backend(backend: str) -> None:
    """Make ``mujoco.Renderer`` create its GL context with ``backend`` in this process."""
    if "mujoco" not in sys.modules:
        os.environ["MUJOCO_GL"] = backend  # read when mujoco is imported
        return
    from mujoco.rendering.classic import gl_context  # what mujoco.Renderer reads

    if getattr(gl_context, "_MUJOCO_GL", None) == backend:
        return
    # mujoco was imported before the choice (MUJOCO_GL unset: glfw): swap in the chosen one.
    name = backend if backend in ("egl", "osmesa") else "glfw"
    try:
        module = importlib.import_module(f"mujoco.{name}")
    except (ImportError, OSError, AttributeError) as err:
        raise RenderError(
            f"the {backend} GL backend renders in a fresh process but cannot be set up in this "
            f"one, which imported mujoco/PyOpenGL for another backend ({err}); set "
            f"MUJOCO_GL={backend} before importing mujoco"
        ) from err
    gl_context.GLContext = module.GLContext
    os.environ["MUJOCO_GL"] = backend
