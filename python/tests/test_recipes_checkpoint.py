"""The checkpoint recipes of docs/python.md (Lightning, Hugging Face
Trainer, Orbax), each killed mid-run and resumed.

Each test runs the recipe as written, in a child process whose training
step logs `step sha256(batch)` (fsynced) and SIGKILLs its own process at
step KILL_AT. It then runs the recipe again, which resumes from the last
checkpoint, and once more in a fresh directory without a kill. The
batches after the resume must be the uninterrupted run's, byte for byte,
from the checkpoint's step on."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"
N = 2000
KILL_AT = 25
MAX_STEPS = 40
TORCH_MISSING = "needs torch (bash python/tests/recipes_torch.sh installs it); .ci/run does not install it"


def recipe(name):
    """The python block after `<!-- recipe: NAME -->` in docs/python.md."""
    after = DOC.read_text().split(f"<!-- recipe: {name} -->", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


# Appended to each harness: the log line of a step, then the kill.
LOG_STEP = """
import hashlib, os, signal
def log_step(step, *arrays):
    digest = hashlib.sha256(b"".join(memoryview(a).tobytes() for a in arrays)).hexdigest()
    with open(os.environ["STEP_LOG"], "a") as f:
        f.write(f"{step} {digest}\\n")
        f.flush()
        os.fsync(f.fileno())
    if step == int(os.environ.get("KILL_AT", "-1")):
        os.kill(os.getpid(), signal.SIGKILL)
"""

LIGHTNING = LOG_STEP + """
import torch, lightning as L
import recipe

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(6, 1)

    def training_step(self, batch, batch_idx):
        log_step(self.trainer.global_step, batch["data"].numpy(), batch["label"].numpy())
        out = self.layer(batch["data"]).squeeze(-1)
        return torch.nn.functional.mse_loss(out, batch["label"].float())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-6)

recipe.fit(Model(), max_steps=int(os.environ["MAX_STEPS"]))
"""

HF_TRAINER = LOG_STEP + """
import torch
import recipe

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(6, 1)
        self.seen = 0

    def forward(self, data, label):
        if self.training:
            log_step(self.seen, data.numpy(), label.numpy())
            self.seen += 1
        out = self.layer(data).squeeze(-1)
        return {"loss": torch.nn.functional.mse_loss(out, label.float())}

model = Model()
_train = recipe.LoaderxTrainer.train
def train(self, resume_from_checkpoint=None, **kw):
    # The step of the first batch: the checkpoint's global step.
    if resume_from_checkpoint:
        model.seen = int(resume_from_checkpoint.rsplit("-", 1)[1])
    return _train(self, resume_from_checkpoint=resume_from_checkpoint, **kw)
recipe.LoaderxTrainer.train = train
recipe.train(model, max_steps=int(os.environ["MAX_STEPS"]))
"""

ORBAX = LOG_STEP + """
import jax, jax.numpy as jnp, numpy as np
import recipe

seen = {"step": None}
def train_step(params, batch):
    # The loader's state says which step this batch is: the log names it.
    log_step(seen["step"], np.asarray(batch["data"]), np.asarray(batch["label"]))
    seen["step"] += 1
    def loss(p):
        out = batch["data"] @ p["w"] + p["b"]
        return jnp.mean((out - batch["label"].astype(jnp.float32)) ** 2)
    grads = jax.grad(loss)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-9 * g, params, grads)

_load = recipe.DataLoader.load_state_dict
class Loader(recipe.DataLoader):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        seen["step"] = self.step
    def load_state_dict(self, state):
        super().load_state_dict(state)
        seen["step"] = self.step
recipe.DataLoader = Loader
params = {"w": jnp.zeros((6,)), "b": jnp.zeros(())}
recipe.train(train_step, params, int(os.environ["MAX_STEPS"]), os.path.abspath("ckpt"))
"""


@pytest.fixture
def datasets(tmp_path):
    from loaderx_rs import write_dataset

    rng = np.random.default_rng(31)
    data = rng.standard_normal((N, 6)).astype(np.float32)
    data[:, 0] = np.arange(N)
    write_dataset(tmp_path / "train_data.zr", data)
    write_dataset(tmp_path / "train_label.zr", np.arange(N, dtype=np.int64))
    return tmp_path


def run(workdir, recipe_name, harness, kill_at=None):
    """Runs the harness over the recipe in `workdir`; returns its exit code."""
    workdir.mkdir(exist_ok=True)
    (workdir / "recipe.py").write_text(recipe(recipe_name))
    env = dict(os.environ, STEP_LOG=str(workdir / "steps.log"), MAX_STEPS=str(MAX_STEPS),
               PYTHONPATH=str(workdir), JAX_PLATFORMS="cpu", TOKENIZERS_PARALLELISM="false")
    env.pop("KILL_AT", None)
    if kill_at is not None:
        env["KILL_AT"] = str(kill_at)
    out = subprocess.run([sys.executable, "-c", harness], cwd=workdir, env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"{recipe_name} exited {out.returncode}:\n{out.stderr[-4000:]}")
    return out.returncode


def steps(workdir):
    """The log's lines as (step, digest), in order."""
    lines = (workdir / "steps.log").read_text().split()
    return [(int(s), d) for s, d in zip(lines[::2], lines[1::2])]


def kill_and_resume(datasets, recipe_name, harness):
    """The killed-and-resumed run's steps and the uninterrupted run's."""
    for name in ("train_data.zr", "train_label.zr"):
        for run_dir in ("killed", "whole"):
            (datasets / run_dir).mkdir(exist_ok=True)
            (datasets / run_dir / name).symlink_to(datasets / name)
    assert run(datasets / "killed", recipe_name, harness, kill_at=KILL_AT) == -signal.SIGKILL
    before = steps(datasets / "killed")
    assert before[-1][0] == KILL_AT, before[-3:]
    assert run(datasets / "killed", recipe_name, harness) == 0
    assert run(datasets / "whole", recipe_name, harness) == 0
    return steps(datasets / "killed")[len(before):], before, dict(steps(datasets / "whole"))


def check(resumed, before, whole):
    assert sorted(whole) == list(range(MAX_STEPS))
    # The killed run saw the uninterrupted run's batches...
    assert all(whole[s] == d for s, d in before)
    # ... and the resumed one starts at a checkpoint (every 10 steps; an
    # asynchronous save still in flight at the kill is not one) and sees
    # the same batches from there to the end.
    first = resumed[0][0]
    assert first % 10 == 0 and 0 < first <= KILL_AT, first
    assert [s for s, _ in resumed] == list(range(first, MAX_STEPS))
    mismatched = [s for s, d in resumed if whole[s] != d]
    assert not mismatched, f"steps whose batch differs after the resume: {mismatched}"


def test_lightning_resumes_the_loader_from_its_checkpoint(datasets):
    pytest.importorskip("torch", reason=TORCH_MISSING)
    pytest.importorskip("lightning", reason="needs lightning (bash python/tests/recipes_torch.sh installs it)")
    check(*kill_and_resume(datasets, "lightning", LIGHTNING))


def test_hf_trainer_resumes_the_loader_from_its_checkpoint(datasets):
    pytest.importorskip("torch", reason=TORCH_MISSING)
    pytest.importorskip("transformers", reason="needs transformers (bash python/tests/recipes_torch.sh)")
    pytest.importorskip("accelerate", reason="needs accelerate (bash python/tests/recipes_torch.sh)")
    check(*kill_and_resume(datasets, "hf-trainer", HF_TRAINER))


def test_orbax_restores_the_loader_with_the_model(datasets):
    pytest.importorskip("jax", reason="needs jax (pip install jax); .ci/run installs its CPU wheel")
    pytest.importorskip("orbax.checkpoint", reason="needs orbax-checkpoint; .ci/run installs it")
    check(*kill_and_resume(datasets, "orbax", ORBAX))
