# SPDX-License-Identifier: Apache-2.0
"""pk.Model.session (pk_session_*): requests submitted together and while others run each get the
tokens generate() gives them alone, greedy and sampled; a cancel ends one; a full queue and a bad
request raise; generate() is refused while the session is open and works after it closes."""
import pytest

import pk
from conftest import TINY

PROMPTS = [[5, 17, 3, 99], [7, 7, 7, 200, 13], [1000, 1, 2], [42] * 20, [9, 8, 7, 6, 5, 4, 3]]


def test_session_matches_generate():
    with pk.load(TINY, max_requests=3) as m:
        alone = [m.generate(p, max_tokens=12) for p in PROMPTS]
        sampled = m.generate(PROMPTS[0], max_tokens=12, temperature=0.9, top_p=0.95, seed=7)
        text = m.generate("In the beginning", max_tokens=10)
        with m.session() as s:
            reqs = [s.submit(p, max_tokens=12) for p in PROMPTS[:2]]
            seen = {}
            while not all(r.done for r in reqs):
                for r, t in s.poll(0.05):
                    seen.setdefault(r.id, []).append(t)
            reqs += [s.submit(p, max_tokens=12) for p in PROMPTS[2:]]  # join after the first ended
            hot = s.submit(PROMPTS[0], max_tokens=12, temperature=0.9, top_p=0.95, seed=7)
            words = s.submit("In the beginning", max_tokens=10)
            s.wait()
            assert [r.tokens for r in reqs] == alone
            assert all(seen[r.id] == r.tokens for r in reqs[:2])
            assert all(r.finish_reason in ("eos", "length") for r in reqs)
            assert hot.tokens == sampled and hot.seed == 7
            assert words.text == text
            assert s.running == 0
            with pytest.raises(pk.errors.StateError):
                m.generate(PROMPTS[0], max_tokens=2)
        assert m.generate(PROMPTS[1], max_tokens=12) == alone[1]


def test_session_cancel_and_errors():
    with pk.load(TINY, max_requests=1) as m:
        with m.session(queue=2) as s:
            a = s.submit(PROMPTS[3], max_tokens=200)
            b = s.submit(PROMPTS[4], max_tokens=4)
            with pytest.raises(pk.errors.LimitError):
                s.submit(PROMPTS[0], max_tokens=4)  # the queue holds 2
            with pytest.raises(pk.errors.LimitError):
                s.submit([m.tokenizer.vocab_size + 3], max_tokens=4)
            while len(a.tokens) < 2 and not a.done:
                s.poll(0.05)
            s.cancel(a)
            s.wait([a, b])
            assert a.finish_reason == "cancelled" or len(a.tokens) == 200
            assert b.tokens == m_generate_alone(PROMPTS[4], 4)
            c = s.submit(PROMPTS[0], max_tokens=50)
        assert c.done and c.finish_reason in ("cancelled", "eos", "length")  # close ended it


def m_generate_alone(ids, n):
    with pk.load(TINY, max_requests=1) as m:
        return m.generate(ids, max_tokens=n)
