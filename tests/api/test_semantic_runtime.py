"""The `semantic` provider's runtime: the ONNX graph against the numpy reference, the built
model kept for the next process, and the cache the web processes share.

The real model runs; what a test replaces is the encoder of the second "worker", so that a
vector it did not get from the shared cache would fail the test instead of being computed.
"""

from __future__ import annotations

import math

import pytest
from django.core.cache import cache
from django.test import override_settings

from agents import semantic, semantic_onnx
from agents.guard.fingerprint import canonical_json
from agents.models import ToolPolicy
from agents.services import catalog

from .helpers import execute, new_task, request_tool
from .test_semantic_provider import REPHRASINGS, ask_three

pytestmark = pytest.mark.skipif(
    not semantic.available() or semantic.runtime() != "onnx-int8",
    reason="needs loopwarden[semantic] with ONNX Runtime",
)

TEXTS = [
    "reset password",
    "forgot my login credentials",
    "cancel subscription",
    "end membership",
    "shipping delays in Germany for enterprise customers",
    "how do I export the quarterly invoices to CSV for the finance team",
]


def cos(a, b) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def encoders():
    root = semantic.model_dir()
    fp32 = semantic_onnx.build_graph(root)
    return (
        semantic.Encoder(root),
        semantic_onnx.OnnxEncoder(root, fp32, semantic.MAX_TOKENS),
        semantic_onnx.OnnxEncoder(root, semantic_onnx.quantize_int8(fp32), semantic.MAX_TOKENS),
    )


def test_the_onnx_graph_gives_the_numpy_encoders_vectors(encoders):
    numpy, fp32, int8 = encoders
    for text in TEXTS:
        reference = numpy.encode(text)
        # fp32: the same computation (numpy's GELU is tanh's approximation, ONNX's erf's).
        assert cos(fp32.encode(text), reference) > 0.999
        # int8 weights move a vector a little (0.992 at worst on these texts).
        assert cos(int8.encode(text), reference) > 0.98


def test_int8_keeps_the_order_that_decides_a_near_duplicate(encoders):
    _, _, int8 = encoders
    a, b, c = (int8.encode(t) for t in (TEXTS[0], TEXTS[1], TEXTS[4]))
    assert cos(a, b) > 0.65 > cos(a, c)


def test_the_built_model_is_kept_and_read_by_the_next_process(tmp_path, monkeypatch):
    root = semantic.model_dir()
    first = semantic_onnx.int8_model(root, tmp_path)
    (kept,) = tmp_path.glob("minilm-int8-*.onnx")

    def no_build(root):
        raise AssertionError("built again although a kept model was there")

    monkeypatch.setattr(semantic_onnx, "build_graph", no_build)
    assert semantic_onnx.int8_model(root, tmp_path) == first == kept.read_bytes()


@pytest.fixture
def shared_cache(tmp_path):
    """A cache every process of the test can read (files), as Redis is for the web workers;
    and this process's own vectors forgotten before and after."""
    location = str(tmp_path / "cache")
    backend = "django.core.cache.backends.filebased.FileBasedCache"
    with override_settings(CACHES={"default": {"BACKEND": backend, "LOCATION": location}}):
        semantic.forget()
        yield cache
        semantic.forget()


@pytest.mark.django_db
def test_a_text_asked_of_one_worker_is_not_embedded_again_by_another(agent_api, shared_cache,
                                                                     monkeypatch):  # fmt: skip
    ToolPolicy.objects.create(
        tool="kb_search", near_duplicate_threshold=0.6, similarity_provider="semantic"
    )
    first = ask_three(agent_api)
    assert (first["decision"], first["reason"]) == ("BLOCK", "near_duplicate")
    key = semantic.text_key(semantic.embed_text(canonical_json({"q": REPHRASINGS[0]})))
    semantic.stored()  # new vectors go to the shared cache on a thread of their own
    stored = shared_cache.get(semantic.shared_key(key))
    assert isinstance(stored, bytes) and len(stored) == 384 * 4  # float32, not a list

    # Another worker: its own cache empty, and no encoder at all.
    semantic.forget()

    def no_encoder():
        raise AssertionError("a text the deployment had embedded was embedded again")

    monkeypatch.setattr(semantic, "_model", no_encoder)
    # Every vector comes from the shared cache: the rephrasing is caught with no model run.
    again = ask_three(agent_api)
    assert (again["decision"], again["reason"]) == ("BLOCK", "near_duplicate")


@pytest.mark.django_db
def test_without_a_shared_cache_the_process_keeps_its_own(agent_api, monkeypatch, settings):
    # The default cache is per process (LocMem): the vectors are not copied into it. Pinned
    # here, so that a CACHE_URL in the developer's environment does not make it shared.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    ToolPolicy.objects.create(
        tool="kb_search", near_duplicate_threshold=0.6, similarity_provider="semantic"
    )
    task = new_task(agent_api)
    execute(agent_api, task["id"], "kb_search", {"q": "reset password"})
    key = semantic.text_key(semantic.embed_text(canonical_json({"q": "reset password"})))
    assert key in semantic._cache
    assert cache.get(semantic.shared_key(key)) is None


@pytest.mark.django_db
def test_a_policy_switched_back_to_lexical_decides_at_once(agent_api, monkeypatch):
    # No catalog statement before the lock for the embedded model: a worker whose copy of the
    # policies predates the switch must still decide by the lexical policy (the lock's check).
    policy = ToolPolicy.objects.create(
        tool="kb_search", near_duplicate_threshold=0.6, similarity_provider="semantic"
    )
    assert ask_three(agent_api)["decision"] == "BLOCK"
    before = catalog.loaded()
    assert before.policies["kb_search"].similarity_provider == "semantic"
    policy.similarity_provider = "lexical"
    policy.save()
    task = new_task(agent_api)
    for q in REPHRASINGS[:2]:
        execute(agent_api, task["id"], "kb_search", {"q": q})
    monkeypatch.setattr(catalog, "_current", before)  # this worker has not reloaded yet

    answer = request_tool(agent_api, task["id"], "kb_search", {"q": REPHRASINGS[2]})

    assert answer["decision"] == "EXECUTE"


def test_unit_vectors_score_by_their_dot_product_as_by_the_cosine():
    from agents.guard.similarity import VectorSimilarity

    texts = [canonical_json({"q": q}) for q in REPHRASINGS]
    vectors = dict(zip("abc", semantic.embed([semantic.embed_text(t) for t in texts]), strict=True))
    full, unit = VectorSimilarity(vectors), VectorSimilarity(vectors, unit=True)
    for a, b in (("a", "b"), ("a", "c"), ("b", "c")):
        ta, tb = texts["abc".index(a)], texts["abc".index(b)]
        assert unit(a, ta, b, tb) == pytest.approx(full(a, ta, b, tb), abs=1e-6)
