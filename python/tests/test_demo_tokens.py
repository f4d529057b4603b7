# SPDX-License-Identifier: Apache-2.0
"""The demo's graph, built in Python layer by layer, against `pk generate` on every golden model
and the shipped model: identical greedy ids. Also pk.load's generate on the same prompts."""
import pytest

import pk
from conftest import TINY, golden_models, golden_prompts, pk_generate

MAX_TOKENS = 12
MODELS = golden_models()


@pytest.mark.parametrize("name,model,golden", MODELS, ids=[m[0] for m in MODELS])
def test_demo_graph_equals_pk_generate(demo, name, model, golden):
    ids = golden_prompts(golden)[0]
    want = pk_generate(model, ids, MAX_TOKENS)
    assert len(want) == MAX_TOKENS or want[-1] == demo.read_config(model)["eos"]
    for graph, workers in (("pk", None), ("pk", 3), ("mpk", None)):
        with demo.make_kernel(model, len(ids), MAX_TOKENS, num_workers=workers, graph=graph) as mpk:
            got = mpk([ids], max_new_tokens=MAX_TOKENS)[0]
        assert got == want, f"{name}: graph {graph}, {workers or 'auto'} workers"


@pytest.mark.parametrize("name,model,golden", MODELS, ids=[m[0] for m in MODELS])
def test_load_generate_equals_pk_generate(name, model, golden):
    prompts = golden_prompts(golden)[:2]
    with pk.load(model, max_seq_length=max(len(p) for p in prompts) + MAX_TOKENS) as m:
        for ids in prompts:
            assert m.generate(ids, max_tokens=MAX_TOKENS) == pk_generate(model, ids, MAX_TOKENS)
            assert list(m.generate(ids, max_tokens=MAX_TOKENS, stream=True)) == pk_generate(model, ids, MAX_TOKENS)


def test_text_generate_equals_pk_generate():
    import subprocess
    from conftest import PK, ROOT
    prompt = "In the beginning"
    r = subprocess.run([PK, "generate", "--model", TINY, "--prompt", prompt, "--max-tokens", "20"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    with pk.load(TINY) as m:
        text = m.generate(prompt, max_tokens=20)
        assert prompt + text + "\n" == r.stdout
        assert "".join(m.generate(prompt, max_tokens=20, stream=True)) == text
        assert m.tokenizer.decode(m.tokenizer.encode(prompt)) == prompt


def test_demo_text_prompt_runs_as_a_program():
    import subprocess
    import sys
    from conftest import PK, ROOT
    args = ["--model", TINY, "--prompt", "In the beginning", "--max-tokens", "10"]
    r = subprocess.run([sys.executable, "python/examples/demo.py", *args], capture_output=True, text=True, cwd=ROOT)
    want = subprocess.run([PK, "generate", *args], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout == want.stdout


def test_speculation_keeps_the_tokens():
    """pk.load(spec_length=L): the same greedy text as without speculation, and drafts were kept
    on a prompt whose continuation repeats it (pk_kernel_stats through the model's kernel)."""
    prompt = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
              "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. "
              "And God said, Let there be light: and there was light. In the beginning God created")
    with pk.load(TINY) as m:
        want = m.generate(prompt, max_tokens=40)
    for length in (1, 4, 8):
        with pk.load(TINY, spec_length=length) as m:
            assert m.generate(prompt, max_tokens=40) == want, f"spec_length {length}"
            stats = m.stats()
            assert stats["spec_drafted"] >= stats["spec_accepted"] > 0, stats


def test_sampled_generate_equals_pk_generate():
    """Sampling: the same seed and settings give `pk generate`'s tokens; the seed picked when none
    is given repeats its run."""
    ids = [5, 17, 3, 99]
    want = pk_generate(TINY, ids, 16, "--temperature", "0.8", "--top-p", "0.9", "--top-k", "50", "--seed", "42")
    with pk.load(TINY) as m:
        assert m.generate(ids, max_tokens=16, temperature=0.8, top_p=0.9, top_k=50, seed=42) == want
        assert list(m.generate(ids, max_tokens=16, stream=True, temperature=0.8, top_p=0.9, top_k=50, seed=42)) == want
        assert m.generate(ids, max_tokens=16) != want  # greedy differs
        first = m.generate(ids, max_tokens=16, temperature=1.0)
        assert m.seed is not None
        assert m.generate(ids, max_tokens=16, temperature=1.0, seed=m.seed) == first
        with pytest.raises(pk.errors.InvalidArgumentError):
            m.generate(ids, max_tokens=4, temperature=-1.0)
