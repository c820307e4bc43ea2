#!/usr/bin/env bash
# Runs the recipes that need torch (Lightning, Hugging Face Trainer, the
# PyTorch DataLoader one), which .ci/run leaves out: torch's PyPI wheel
# brings the CUDA libraries (about 6 GB installed). Usage:
#   bash python/tests/recipes_torch.sh [VENV]   (default target/torch-venv)
# It makes the venv if missing, installs the binding into it with maturin
# and runs the recipe tests; a skip is a failure here.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=$(realpath -m "${1:-target/torch-venv}")
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3.11}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    'maturin>=1.9.4,<2' pytest numpy torch lightning transformers accelerate
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop --release -m python/Cargo.toml
"$venv/bin/python" -m pytest -q -rs python/tests/test_recipes_checkpoint.py python/tests/test_recipes.py \
    -k "lightning or hf_trainer or torch" 2>&1 | tee target/recipes-torch.log
if grep -E "^SKIPPED" target/recipes-torch.log; then
    echo "a recipe test skipped (above)" >&2
    exit 1
fi
