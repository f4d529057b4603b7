#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make_tokenizer_goldens.py — writes tests/data/tokenizer_goldens.json with Hugging Face's
`tokenizers` Python package (0.23), for pk's tokenizer test.

    python3 scripts/make_tokenizer_goldens.py QWEN3_TOKENIZER_JSON LLAMA3_TOKENIZER_JSON \\
        [--texts tests/data/tokenizer_texts.json] [--out tests/data/tokenizer_goldens.json]

For every text: ids = encode(text, add_special_tokens=False).ids and
decoded = decode(ids, skip_special_tokens=False). The output is byte for byte what
scripts/make_tokenizer_goldens.mjs (the same Rust library through npm) writes, except the
"generator" line, so `diff` shows whether the two agree. Needs no network.
"""
import argparse
import json
import os

import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def s(x):
    return json.dumps(x, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qwen3")
    ap.add_argument("llama3")
    ap.add_argument("--texts", default=os.path.join(ROOT, "tests/data/tokenizer_texts.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/tokenizer_goldens.json"))
    a = ap.parse_args()
    with open(a.texts, encoding="utf-8") as f:
        cases = json.load(f)
    gen = ("tokenizers %s (Hugging Face Rust library, Python binding) via "
           "scripts/make_tokenizer_goldens.py" % tokenizers.__version__)
    o = ['{\n', ' "generator": %s,\n' % s(gen), ' "tokenizers": {\n']
    for k, (name, path) in enumerate([("qwen3", a.qwen3), ("llama3", a.llama3)]):
        tok = Tokenizer.from_file(path)
        o.append('  %s: {\n   "vocab_size": %d,\n   "cases": [\n'
                 % (s(name), tok.get_vocab_size(with_added_tokens=True)))
        for i, c in enumerate(cases):
            ids = tok.encode(c["text"], add_special_tokens=False).ids
            decoded = tok.decode(ids, skip_special_tokens=False)
            o.append('    {"name": %s, "text": %s, "ids": [%s], "decoded": %s}%s\n'
                     % (s(c["name"]), s(c["text"]), ", ".join(str(i) for i in ids), s(decoded),
                        "," if i + 1 < len(cases) else ""))
        o.append('   ]\n  }%s\n' % ("," if k == 0 else ""))
    o.append(' }\n}\n')
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(o))
    print("wrote %s: %d texts x 2 tokenizers (tokenizers %s)"
          % (a.out, len(cases), tokenizers.__version__))


if __name__ == "__main__":
    main()
