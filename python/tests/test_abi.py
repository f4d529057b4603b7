# SPDX-License-Identifier: Apache-2.0
"""pk._lib's ctypes structs against pk.h as a C compiler lays them out (size and every field's
offset), and the library's exports against the prototypes the package declares."""
import ctypes
import os
import shutil
import subprocess

import pytest

from conftest import ROOT
from pk import _lib

STRUCTS = {"pk_config": _lib.Config, "pk_device_info": _lib.DeviceInfo, "pk_attention_params": _lib.AttentionParams,
           "pk_compile_options": _lib.CompileOptions, "pk_request": _lib.Request, "pk_graph_stats": _lib.GraphStats,
           "pk_layer_info": _lib.LayerInfo, "pk_step_times": _lib.StepTimes, "pk_memory_stats": _lib.MemoryStats,
           "pk_model_info": _lib.ModelInfo, "pk_model_options": _lib.ModelOptions}


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler")
def test_struct_layouts_match_pk_h(tmp_path):
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "pk.h"', "int main(void) {"]
    for cname, py in STRUCTS.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        lines += [f'printf("{cname}.{f} %zu\\n", offsetof({cname}, {f}));' for f, _ in py._fields_]
    lines.append("return 0; }")
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines))
    subprocess.run(["cc", "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)], check=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                                 check=True).stdout.splitlines())
    for cname, py in STRUCTS.items():
        assert int(got[cname]) == ctypes.sizeof(py), cname
        for f, _ in py._fields_:
            assert int(got[f"{cname}.{f}"]) == getattr(py, f).offset, f"{cname}.{f}"


def test_every_pk_h_function_is_declared():
    import re
    with open(os.path.join(ROOT, "include", "pk.h")) as f:
        names = set(re.findall(r"\b(pk_[a-z0-9_]+)\(", f.read()))
    assert names == set(_lib._PROTOTYPES), f"pk.h only: {names - set(_lib._PROTOTYPES)}; " \
                                           f"package only: {set(_lib._PROTOTYPES) - names}"
