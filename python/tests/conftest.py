# SPDX-License-Identifier: Apache-2.0
"""Shared by the pk Python tests: the repository's paths, `pk generate` as the reference, and the
demo module. Run from tests/test_python.sh (PYTHONPATH=python, PK_LIBRARY=build/libpk.so)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
PK = os.path.join(BUILD, "pk")
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
TINY = os.path.join(ROOT, "models", "pk-tiny")


def golden_models():
    """(name, model dir, golden.json) of every golden model and the shipped model."""
    out = [(d, os.path.join(GOLDEN, d), os.path.join(GOLDEN, d, "golden.json")) for d in sorted(os.listdir(GOLDEN))
           if os.path.exists(os.path.join(GOLDEN, d, "golden.json"))]
    return out + [("pk-tiny", TINY, os.path.join(GOLDEN, "pk-tiny.json"))]


def golden_prompts(path):
    with open(path) as f:
        return json.load(f)["prompts"]


def pk_generate(model, ids, max_tokens, *extra):
    """`pk generate --print-ids`'s greedy ids: the reference every Python path must equal."""
    r = subprocess.run([PK, "generate", "--model", model, "--prompt-ids", ",".join(map(str, ids)), "--max-tokens",
                        str(max_tokens), "--print-ids", *extra], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return [int(x) for x in r.stdout.split()]


@pytest.fixture(scope="session")
def demo():
    spec = importlib.util.spec_from_file_location("pk_demo", os.path.join(ROOT, "python", "examples", "demo.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sys.path.insert(0, os.path.join(ROOT, "python"))
