# SPDX-License-Identifier: Apache-2.0
"""torch tensors (when torch is installed): bf16 CPU tensors attach without a copy and give
the same tokens as numpy uint16 arrays declared bf16; a GPU tensor is copied to the host."""
import numpy as np
import pytest

import pk
from conftest import TINY

torch = pytest.importorskip("torch")


def test_torch_bf16_attach_is_zero_copy():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(torch.bfloat16)
    with pk.PersistentKernel(num_workers=1) as k:
        k.attach_input(t, name="t")
        assert k._keep[-1] is t and k._keep[-1].data_ptr() == t.data_ptr()
        with pytest.raises(pk.StrideError, match="not row-major"):
            k.attach_input(t.T, name="tt")


class TorchDir:
    def __init__(self):
        from pk.safetensors import open_dir
        self.st = open_dir(TINY)

    def bf16_weight(self, name):
        return torch.from_numpy(np.array(self.st.bf16_weight(name)).view(np.int16)).view(torch.bfloat16)


def test_torch_weights_give_the_numpy_tokens(demo):
    c = demo.read_config(TINY)
    with demo.make_kernel(TINY, 4, 6, num_workers=2, eos_token_id=-1) as k:
        want = k([[1, 2, 3, 4]], max_new_tokens=6)[0]
    with pk.PersistentKernel(num_workers=2, max_seq_length=10, max_num_batched_requests=1) as k:
        demo.build(k, TorchDir(), c)
        k.compile()
        assert k([[1, 2, 3, 4]], max_new_tokens=6)[0] == want


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_gpu_tensor_is_copied_to_the_host():
    t = torch.ones(8, dtype=torch.float32, device="cuda")
    with pk.PersistentKernel(num_workers=1) as k:
        k.attach_input(t, name="g")
        assert k._keep[-1].device.type == "cpu"
