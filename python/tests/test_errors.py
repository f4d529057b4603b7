# SPDX-License-Identifier: Apache-2.0
"""Every method's misuse raises the pk.Error subclass of its status with the C library's message
(or, where Python refuses before C, a message in the same style); the interpreter survives."""
import numpy as np
import pytest

import pk
from conftest import TINY

BF16 = pk.bfloat16


def raises(cls, *words):
    """pytest.raises for a pk.Error subclass whose message holds each of words."""
    class Ctx:
        def __enter__(self):
            self.ctx = pytest.raises(cls)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            if not handled:
                return False
            msg = self.info.value.message
            for w in words:
                assert w in msg, f"'{w}' not in '{msg}'"
            assert self.info.value.status == cls.status and pk.status_name(cls.status) == cls.status_name
            return handled
    return Ctx()


@pytest.fixture
def k():
    with pk.PersistentKernel(num_workers=1, max_seq_length=32, max_num_batched_tokens=4) as kernel:
        yield kernel


def w16(*dims):
    return np.zeros(dims, np.uint16)


def test_constructor(k):
    with raises(pk.InvalidArgumentError, "config: num_workers -1"):
        pk.PersistentKernel(num_workers=-1)
    with raises(pk.InvalidArgumentError, "world_size 2"):
        pk.PersistentKernel(world_size=2)
    with raises(pk.InvalidArgumentError, "max_seq_length 0"):
        pk.PersistentKernel(max_seq_length=0)
    with raises(pk.UnsupportedError, "spec_decode_config method 'lookahead'"):
        pk.PersistentKernel(spec_decode_config={"method": "lookahead", "spec_length": 7})
    with raises(pk.InvalidArgumentError, "spec_length 17"):
        pk.PersistentKernel(spec_decode_config=pk.PromptLookupConfig(spec_length=17))
    with raises(pk.InvalidArgumentError, "ngram_size '3'"):
        pk.PersistentKernel(spec_decode_config={"ngram_size": "3"})
    with raises(pk.InvalidArgumentError, "backend"):
        pk.PersistentKernel(backend="tpu")
    with raises(pk.InvalidArgumentError, "meta_tensors"):
        pk.PersistentKernel(meta_tensors=[1])
    with raises(pk.InvalidArgumentError, "num_workers"):
        pk.PersistentKernel(num_workers="2")


def test_attach_input(k):
    a = np.zeros((8, 4), np.float32)
    with raises(pk.StrideError, "pk_attach_input 'wt'", "not row-major"):
        k.attach_input(a.T, name="wt")
    with raises(pk.InvalidArgumentError, "pk_attach_input", "name is NULL or empty"):
        k.attach_input(a, name=None)
    k.attach_input(a, name="a")
    with raises(pk.InvalidArgumentError, "'a' exists already"):
        k.attach_input(a, name="a")
    with raises(pk.InvalidArgumentError, "pk_attach_input 'mis'", "not aligned"):
        k.attach_input(np.zeros(40, np.uint8)[1:33].view(np.float32), name="mis")
    with raises(pk.ShapeError, "pk_attach_input 'five'", "ndim 5"):
        k.attach_input(np.zeros((1, 1, 1, 1, 1), np.float32), name="five")
    with raises(pk.DtypeError, "uint16", "pk.bfloat16"):
        k.attach_input(w16(4), name="u")
    with raises(pk.DtypeError, "float64"):
        k.attach_input(np.zeros(4), name="d")
    with raises(pk.DtypeError, "is not pk.float16"):
        k.attach_input(a, name="x", dtype=pk.float16)
    with raises(pk.InvalidArgumentError, "cannot attach a list"):
        k.attach_input([1, 2], name="l")


def test_new_tensor_and_fuse(k):
    with raises(pk.ShapeError, "pk_new_tensor 'neg'", "dim 0 is -1"):
        k.new_tensor((-1, 4), name="neg")
    with raises(pk.DtypeError, "float8"):
        k.new_tensor((4,), dtype="float8", name="f8")
    with raises(pk.InvalidArgumentError, "io_category"):
        k.new_tensor((4,), name="c", io_category="host")
    with raises(pk.StrideError, "not row-major"):
        k.new_tensor((4, 2), strides=(1, 4), name="s")
    a = k.attach_input(w16(4, 8), name="a", dtype=BF16)
    b = k.attach_input(w16(3, 8), name="b", dtype=BF16)
    with raises(pk.GridError, "pk_fuse_tensors 'ab'", "num_groups 2 does not divide dim 0 (3) of 'b'"):
        k.fuse_tensors([a, b], fused_dim=0, num_groups=2, name="ab")
    with raises(pk.InvalidArgumentError, "inputs[1] is a int"):
        k.fuse_tensors([a, 3], 0, 1, "ab")


def test_layers(k):
    w = k.attach_input(w16(8, 4), name="w", dtype=BF16)
    x, y = k.new_tensor((4, 4), name="x"), k.new_tensor((4, 8), name="y")
    with raises(pk.ShapeError, "pk_linear_layer"):
        k.linear_layer(y, w, x, 1)
    with raises(pk.GridError, "pk_linear_layer: grid 0 < 1"):
        k.linear_layer(x, w, y, 0)
    with raises(pk.InvalidArgumentError, "grid_dim"):
        k.linear_layer(x, w, y, "1")
    with raises(pk.DtypeError, "pk_embedding_layer", "int32"):
        k.embed_layer(x, w, y, 1)
    with raises(pk.InvalidArgumentError, "input is a ndarray"):
        k.silu_mul_layer(np.zeros(3), x, 1)
    with pk.PersistentKernel(num_workers=1) as other:
        z = other.new_tensor((4, 4), name="z")
        with raises(pk.InvalidArgumentError, "'z' belongs to another PersistentKernel"):
            k.linear_layer(z, w, y, 1)
    with raises(pk.StateError, "argmax_reduce_layer"):
        k.argmax_reduce_layer((x, y), k.step_output, 1)
    with raises(pk.ShapeError, "argmax_partial_layer"):
        k.argmax_partial_layer(y, (x, x), grid_dim=(2, 1, 1))
    with raises(pk.StateError, "pk_run: compile the kernel first"):
        k([[1]])
    k.linear_layer(x, w, y, (2, 1, 1))
    k.compile()
    with raises(pk.StateError, "pk_silu_mul_layer"):
        k.silu_mul_layer(y, x, 1)
    with raises(pk.StateError):
        k.compile()


def test_attention_rope_tables(k):
    D, S = 8, 32
    kc = k.new_tensor((k.max_num_pages, k.page_size, 1, D), name="kc")
    vc = k.new_tensor((k.max_num_pages, k.page_size, 1, D), name="vc")
    qkv, out = k.new_tensor((4, 3 * D), name="qkv"), k.new_tensor((4, D), name="out")
    # transformers' tables in float64, independently of pk.rope: cat(freqs, freqs)
    freqs = np.arange(S)[:, None] * (1.0 / 10000.0 ** (np.arange(0, D, 2) / D))[None, :]
    ang = np.concatenate([freqs, freqs], 1)
    cos = k.attach_input(np.cos(ang).astype(np.float32), name="cos")
    sin = k.attach_input(np.sin(ang).astype(np.float32), name="sin")
    with raises(pk.InvalidArgumentError, "cos_pos_embed", "rope_theta 500000"):
        k.attention_layer(qkv, kc, vc, None, None, cos, sin, out, 1, rope_theta=500000.0)
    with raises(pk.InvalidArgumentError, "both"):
        k.attention_layer(qkv, kc, vc, None, None, cos, None, out, 1)
    with raises(pk.UnsupportedError, "yarn"):
        k.attention_layer(qkv, kc, vc, None, None, None, None, out, 1, rope_scaling={"rope_type": "yarn"})
    with raises(pk.GridError, "pk_attention_layer"):
        k.attention_layer(qkv, kc, vc, None, None, cos, sin, out, 3)
    k.attention_layer(qkv, kc, vc, None, None, cos, sin, out, 1)  # the tables agree with theta 10000


def run_tiny(demo, ids, **kw):
    return demo.make_kernel(TINY, len(ids), 4, num_workers=1, **kw)


def test_run(demo):
    with run_tiny(demo, [1, 2, 3]) as k:
        with raises(pk.LimitError, "4096"):
            k([[1, 99999]], max_new_tokens=2)
        with raises(pk.LimitError, "int32"):
            k([[1, 2 ** 40]])
        with raises(pk.InvalidArgumentError, "prompts"):
            k("1 2 3")
        with raises(pk.InvalidArgumentError, "prompt 0"):
            k([["a"]])
        with raises(pk.InvalidArgumentError, "max_new_tokens has 2 entries"):
            k([[1]], max_new_tokens=[1, 2])
        with raises(pk.InvalidArgumentError, "pk_run"):
            k([[1]], max_new_tokens=0)
        with raises(pk.InvalidArgumentError, "meta_tensors 'tokens'"):
            k()

        def boom(request, token):
            raise KeyError("from on_token")
        with pytest.raises(KeyError, match="from on_token"):
            k([[1, 2, 3]], max_new_tokens=4, on_token=boom)
        assert k([[1, 2, 3]], max_new_tokens=2)[0] == k([[1, 2, 3]], max_new_tokens=4)[0][:2]
    with raises(pk.StateError, "finalized"):
        k([[1]])
    with raises(pk.StateError, "finalized"):
        k.new_tensor((4,), name="late")
    k.finalize()  # twice is fine


def test_load_and_tokenizer(tmp_path):
    with raises(pk.IOError, str(tmp_path)):
        pk.load(tmp_path)
    with raises(pk.InvalidArgumentError, "fused_mlp is 5"):
        pk.load(TINY, fused_mlp=5)
    with raises(pk.InvalidArgumentError, "unknown setting"):
        pk.load(TINY, workers=2)
    with raises(pk.LimitError, "max_seq_length 100000", "max_position_embeddings"):
        pk.load(TINY, max_seq_length=100000)
    # every row's logits or the sampled rows' only, the prefix cache on or off: the same tokens
    outs = [pk.load(TINY, num_workers=2, all_logits=a, prefix_cache=c).generate("In the beginning", max_tokens=8)
            for a, c in ((0, 1), (1, 0))]
    assert outs[0] == outs[1] and outs[0]
    (tmp_path / "tokenizer.json").write_text("{")
    with raises(pk.FormatError):
        pk.Tokenizer(tmp_path / "tokenizer.json")
    with pk.load(TINY, max_seq_length=16) as m:
        with raises(pk.LimitError, "token id 99999"):
            m.tokenizer.decode([99999])
        with raises(pk.LimitError):
            m.generate([1] * 40, max_tokens=2)
    with raises(pk.StateError, "closed"):
        m.generate([1, 2])
