"""Embedding vectors for the near-duplicate check's `semantic` and `embedding` providers.

`semantic` computes them with the embedded model of the `loopwarden[semantic]` extra
(`agents.semantic`, in this process, cached by the text's hash in the process and, with
CACHE_URL, in the cache the web processes share); `embedding` asks an
OpenAI-compatible endpoint. Neither the model nor the endpoint is asked while the task row is
locked (docs/DESIGN.md section 4, check 10): a model run or an HTTP round trip must never hold
the lock other requests of the task wait on.

`semantic` embeds only the new call's text before the lock (`vectors_for`); its window's
texts were embedded when they were asked, so under the lock they are looked up in the caches
(`window_vectors`: this process's, then one read of the shared cache), with no read of the
window before it. A text no cache holds (a window written without asking, a process that has
not seen it and no shared cache) makes the decision leave its transaction unwritten, embed it
outside the lock and decide again, once (`Unembedded`). `embedding` reads the window before
the lock and fetches what its cache (by fingerprint) lacks, in one batched request.

A slow or failing endpoint is not an error: the decision goes on with the vectors it has and
the guard scores the rest lexically (`guard.similarity.VectorSimilarity`). The miss is logged.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.signals import request_finished

from agents import semantic
from agents.guard.similarity import EMBEDDING, SEMANTIC, VECTOR_PROVIDERS
from agents.guard.terms import ToolRequest, WindowEntry
from agents.models import Task
from agents.taskrow import Owner, owned_by, vouched

logger = logging.getLogger("loopwarden.embeddings")

# The embedded model's new vectors go to the shared cache once the response is out.
request_finished.connect(semantic.store_pending, dispatch_uid="loopwarden.semantic.store")

# Vectors do not change for a text and model; a day keeps the cache warm across a task's life.
CACHE_SECONDS = 86_400


def _cache_key(fingerprint: str) -> str:
    return f"lw:emb:{settings.EMBEDDINGS_MODEL}:{fingerprint}"


def fetch_embeddings(texts: list[str]) -> list[list[float]] | None:
    """One POST {url}/embeddings for `texts`, in order; None when slow, failing or malformed.

    The wire format is OpenAI's: {"model", "input": [...]} -> {"data": [{"embedding", "index"}]}.
    """
    url = settings.EMBEDDINGS_URL.rstrip("/") + "/embeddings"
    headers = {"Content-Type": "application/json"}
    if settings.EMBEDDINGS_KEY:
        headers["Authorization"] = f"Bearer {settings.EMBEDDINGS_KEY}"
    started = time.monotonic()
    timeout = settings.EMBEDDINGS_TIMEOUT_MS / 1000
    try:
        # httpx's timeout bounds each network operation, not the whole answer: a body that
        # trickles in a byte at a time would hold the decision for as long as it likes. The
        # body is read in chunks against one deadline.
        with httpx.stream(
            "POST",
            url,
            json={"model": settings.EMBEDDINGS_MODEL, "input": texts},
            headers=headers,
            timeout=timeout,
        ) as response:
            response.raise_for_status()
            body = bytearray()
            for chunk in response.iter_bytes():
                if time.monotonic() - started > timeout:
                    raise httpx.ReadTimeout("the answer took longer than the timeout")
                body += chunk
        rows = json.loads(body)["data"]
        vectors: list[Any] = [None] * len(texts)
        for position, row in enumerate(rows):
            index = row.get("index", position)
            vectors[index] = [float(x) for x in row["embedding"]]
        if any(v is None for v in vectors):
            raise ValueError("fewer embeddings than inputs")
        return vectors
    except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        logger.warning(
            "embeddings endpoint failed after %d ms (%s: %s); near-duplicate falls back to lexical",
            int((time.monotonic() - started) * 1000),
            type(exc).__name__,
            exc,
        )
        return None


def shared_cache() -> semantic.SharedCache | None:
    """Django's cache when the web processes share it (CACHE_URL, Redis): a text is then
    embedded once per deployment, not once per process. The per-process default (LocMem)
    would only copy the model's own in-process cache, so it is not used. The backend itself,
    not Django's per-thread proxy: new vectors are stored from another thread."""
    backend = settings.CACHES["default"]["BACKEND"]
    return None if backend.endswith("LocMemCache") else caches[DEFAULT_CACHE_ALIAS]


def _embed_text(tool: str, args_text: str) -> str:
    return f"{tool}: {args_text}"


_warned: list[bool] = []


def _warn_missing_extra() -> None:
    """Once per process: a policy says semantic but the extra is gone (scored lexically)."""
    if not _warned:
        _warned.append(True)
        logger.warning("%s; near-duplicate falls back to lexical", semantic.MissingExtra())


def vectors_for(
    *, task_id: uuid.UUID | str, agent: Owner, request: ToolRequest
) -> dict[str, Sequence[float]]:
    """Vectors by fingerprint, asked before the task row is locked.

    `semantic`: only the new call's text, when its policy sets a threshold: it is the only
    text that may need the model, and its window's texts were embedded when they were asked
    (looked up under the lock by `window_vectors`, with no read of the window here).
    `embedding`: this call's and the window's calls' of the same tool, when a threshold could
    apply; the window is read without a lock: a call that joins it before the decision has no
    vector and is scored lexically, which is the same fallback as a miss.
    """
    provider = request.similarity_provider
    if provider not in VECTOR_PROVIDERS or request.job_id:
        return {}
    if provider == EMBEDDING and not settings.EMBEDDINGS_URL:
        return {}
    if provider == SEMANTIC and not semantic.available():
        _warn_missing_extra()
        return {}
    fp, args_text = request.identity
    if provider == SEMANTIC:
        if request.near_duplicate_threshold is None:
            # Only the task's limits may set one: known under the lock (`window_vectors`).
            return {}
        if not vouched(agent):
            # The lock refuses this token; the model does not run for it meanwhile.
            return {}
        return semantic.vectors({fp: args_text}, shared_cache())
    row = Task.objects.filter(owned_by(agent), pk=task_id).values_list("window", "limits").first()
    if row is None:
        return {}
    window, limits = row
    if request.near_duplicate_threshold is None and limits.get("near_duplicate_threshold") is None:
        return {}
    texts = {fp: args_text}
    for raw in window:
        entry = WindowEntry.from_dict(raw)
        if entry.tool == request.tool:
            texts.setdefault(entry.fingerprint, entry.args)
    cached = cache.get_many([_cache_key(f) for f in texts])
    vectors: dict[str, Sequence[float]] = {
        f: cached[_cache_key(f)] for f in texts if _cache_key(f) in cached
    }
    missing = [f for f in texts if f not in vectors]
    if missing:
        fetched = fetch_embeddings([_embed_text(request.tool, texts[f]) for f in missing])
        if fetched is not None:
            new = dict(zip(missing, fetched, strict=True))
            cache.set_many({_cache_key(f): v for f, v in new.items()}, CACHE_SECONDS)
            vectors.update(new)
    return vectors


class Unembedded(Exception):
    """Under the lock, texts of the decision that no cache holds (a window written without
    asking, a process that has not seen them and no shared cache, a policy changed since the
    request came in): the transaction is left without a write, they are embedded outside the
    lock, and the decision is made again (`embed_missing`)."""

    def __init__(self, calls: dict[str, str]):
        super().__init__(f"{len(calls)} texts to embed")
        self.calls = calls


def window_vectors(
    request: ToolRequest, window: Sequence[WindowEntry], threshold: float | None, *, may_retry: bool
) -> None:
    """Under the task's lock, for the `semantic` provider: add to `request.vectors` those of
    the new call and of the window's calls of its tool, from the caches only (this process's,
    then one read of the shared cache for the rest); the model never runs under the lock.

    Texts none holds raise `Unembedded` when `may_retry`; on the decision's second attempt a
    text still missing (a call that joined the window since) is scored lexically, the same
    fallback as before the lock. Nothing when no threshold applies (`threshold`: the task's).
    """
    if request.similarity_provider != SEMANTIC or request.job_id:
        return
    if request.near_duplicate_threshold is None and threshold is None:
        return
    if not semantic.available():
        _warn_missing_extra()
        return
    fp, args_text = request.identity
    calls = {} if fp in request.vectors else {fp: args_text}
    for entry in window:
        if entry.tool == request.tool and entry.fingerprint not in request.vectors:
            calls.setdefault(entry.fingerprint, entry.args)
    if not calls:
        return
    found, missing = semantic.cached(calls, shared_cache())
    if missing and may_retry:
        raise Unembedded(missing)
    request.vectors = {**request.vectors, **found}


def embed_missing(calls: dict[str, str]) -> None:
    """Embed the texts `Unembedded` named, outside the lock: kept in the caches, where the
    decision's second attempt finds them."""
    semantic.vectors(calls, shared_cache())
