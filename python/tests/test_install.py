# SPDX-License-Identifier: Apache-2.0
"""The package as people install it, offline: a venv with --system-site-packages, `pip install
--no-build-isolation ./python`, then import pk outside the source tree and generate, finding
libpk.so through PK_LIBRARY, and through the venv's prefix after `make install PREFIX=<venv>`."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT, TINY, pk_generate

SNIPPET = ("import pk, sys; print(pk.library_path); "
           f"print(pk.load({TINY!r}, max_seq_length=16, num_workers=2).generate([1, 2, 3], max_tokens=4))")


def venv_ok():
    r = subprocess.run([sys.executable, "-c", "import ensurepip, venv"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not venv_ok(), reason="python3-venv is not installed")
def test_pip_install_into_a_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                                    "*.egg-info"))
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PK_LIBRARY", "PK_PREFIX")}
    want = str(pk_generate(TINY, [1, 2, 3], 4))
    lib = os.path.join(BUILD, "libpk.so")
    r = subprocess.run([py, "-c", SNIPPET], capture_output=True, text=True, cwd=tmp_path,
                       env=dict(env, PK_LIBRARY=lib))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [lib, want]
    r = subprocess.run([py, "-c", "import pk"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode != 0 and "libpk.so not found" in r.stderr
    r = subprocess.run(["make", "-s", "--no-print-directory", f"BUILD={BUILD}", "install", f"PREFIX={venv}"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([py, "-c", SNIPPET], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [str(venv / "lib" / "libpk.so"), want]
