"""Every command in every README runs as written, against a live server.

The fenced blocks are read from the documents at test time. Each is one of:

- a file or an output, not a command (`json`, `yaml`, `nginx`, `toml`, `text`, no language):
  not run;
- marked, on the line right before it, `<!-- not run in tests: why -->` (needs Docker, installs
  packages, a fragment of your own agent's code) or `<!-- tested in tests/...py -->` (run
  there, with assertions of its own): not run here; a marked Python block must still compile;
- a shell block: the shell blocks of one section (under one `##` heading) run in order as one
  bash script, in the repository, as a reader types them into one terminal beside `./dev run`;
- a Python block: saved to a file in a directory outside the repository and run with the
  virtualenv's Python (`-P`: the client comes from its distribution, not the repository).

A block of any other kind fails the test: mark it, or teach this test to run it. The only
things given are what the documents tell the reader to set: `PORT`, the server's
`DATABASE_URL`/`LOOPWARDEN_DATA_DIR` (what `./dev run` would use) and, for a Python block, an
agent token in `LOOPWARDEN_TOKEN`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.apps import apps
from django.db import connection

from tests.live import ROOT, terminal_env

DOCUMENTS = sorted(
    {
        ROOT / "README.md",
        ROOT / "clients" / "python" / "README.md",
        *ROOT.glob("examples/**/README*"),
        *ROOT.glob("docs/*.md"),
    }
)
NOT_COMMANDS = {"", "text", "json", "yaml", "nginx", "toml"}
SHELL = {"sh", "bash"}
PYTHON = {"python"}
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>```+)(?P<lang>[\w-]*)[^\n]*\n"
    r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.S | re.M,
)
MARKER = re.compile(r"^<!--\s*(?P<kind>not run in tests|tested in)\b:?\s*(?P<why>.*?)\s*-->$")

# What a run must print besides succeeding, by document, section and kind of block: the outcome
# each step of the tour announces, the quickstart's stop.
EXPECTED = {
    ("README.md", "The first ten minutes", "sh"): [
        "PARTIAL/repeated_output",
        "NEEDS_HUMAN/unknown_commit",
        "STOPPED operator_stop",
        " COMMITTED",
        "RUNNING 2 ",
        "ALLOW",
    ],
    ("README.md", "Guarding LangChain, OpenAI Agents SDK and pydantic-ai agents", "sh"): [
        "PARTIAL/repeated_output"
    ],
    ("clients/python/README.md", "Quickstart", "python"): ["stopped: PARTIAL/", "next: "],
}


@dataclass(frozen=True)
class Block:
    document: str
    line: int
    section: str
    lang: str
    body: str
    marker: re.Match | None

    def __str__(self) -> str:
        return f"{self.document}:{self.line} ({self.lang or 'no language'})"


def blocks_of(path: Path) -> list[Block]:
    text = path.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        lines_before = [line.strip() for line in before.splitlines() if line.strip()]
        headings = re.findall(r"^## (.+)$", before, re.M)
        indent = match.group("indent")
        body = "".join(
            line.removeprefix(indent) for line in match.group("body").splitlines(keepends=True)
        )
        found.append(
            Block(
                document=str(path.relative_to(ROOT)),
                line=before.count("\n") + 1,
                section=headings[-1].strip() if headings else "",
                lang=match.group("lang"),
                body=body,
                marker=MARKER.match(lines_before[-1]) if lines_before else None,
            )
        )
    return found


ALL_BLOCKS = [block for path in DOCUMENTS for block in blocks_of(path)]


def to_run(block: Block) -> bool:
    return block.lang not in NOT_COMMANDS and block.marker is None


def shell_sections() -> list[tuple[str, str, list[Block]]]:
    sections: dict[tuple[str, str], list[Block]] = {}
    for block in ALL_BLOCKS:
        if block.lang in SHELL and to_run(block):
            sections.setdefault((block.document, block.section), []).append(block)
    return [(document, section, blocks) for (document, section), blocks in sections.items()]


def python_blocks() -> list[Block]:
    return [block for block in ALL_BLOCKS if block.lang in PYTHON and to_run(block)]


def test_the_documents_hold_the_blocks_this_test_knows():
    assert {"README.md", "clients/python/README.md"} <= {
        str(path.relative_to(ROOT)) for path in DOCUMENTS
    }
    sections = {(document, section, "sh") for document, section, _ in shell_sections()}
    assert ("README.md", "The first ten minutes", "sh") in sections
    assert set(EXPECTED) <= sections | {
        (block.document, block.section, "python") for block in python_blocks()
    }


def test_every_block_is_a_kind_this_test_runs_or_is_marked():
    unknown = [
        str(block)
        for block in ALL_BLOCKS
        if block.lang not in NOT_COMMANDS | SHELL | PYTHON and block.marker is None
    ]
    assert unknown == [], "mark these `<!-- not run in tests: why -->`, or run them here"


def test_every_mark_gives_its_reason_or_names_a_test_that_exists():
    for block in ALL_BLOCKS:
        if block.marker is None:
            continue
        assert block.marker.group("why"), f"{block}: say why it is not run"
        if block.marker.group("kind") == "tested in":
            named = re.findall(r"tests/[\w/]+\.py", block.marker.group("why"))
            assert named, f"{block}: name the test file"
            for path in named:
                assert (ROOT / path).is_file() or (ROOT / "clients/python" / path).is_file(), (
                    f"{block}: {path} does not exist"
                )


def test_every_python_block_compiles():
    for block in ALL_BLOCKS:
        if block.lang in PYTHON:
            try:
                ast.parse(block.body)
            except SyntaxError as error:
                pytest.fail(f"{block}: {error}")


BARE_PYTHON = re.compile(r"(?<![\w/.-])python (?:manage\.py|-m (?:devtools|loopwarden)\b)")


def test_no_document_runs_manage_py_with_a_python_that_has_no_django():
    """`python manage.py` runs whichever python is first on PATH, which has no Django unless
    the virtualenv is activated: the documents name the virtualenv's (inside a container its
    own is meant, after `docker compose exec web`)."""
    found = []
    for path in [*DOCUMENTS, ROOT / "ARCHITECTURE.md"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in BARE_PYTHON.finditer(line):
                if not line[: match.start()].rstrip().endswith("exec web"):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


@pytest.fixture
def reader_env(live_server, tmp_path) -> dict[str, str]:
    """The environment of a second terminal next to `./dev run`: no virtualenv on PATH.

    The server's database holds what a migrated one does: the `novelty` profile, made by a
    migration, which an earlier live-server test's flush took away (post_migrate, run again by
    the flush, makes the `default` profile and the groups)."""
    import_module("agents.migrations.0006_novelty_profile").create_novelty_profile(apps, None)
    env = terminal_env(
        port=urlparse(live_server.url).port, settings_dict=connection.settings_dict,
        data_dir=tmp_path / "data", drop=("VIRTUAL_ENV", "LOOPWARDEN_TOKEN", "LOOPWARDEN_URL"),
    )  # fmt: skip
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def check(result: subprocess.CompletedProcess, what: str, expected: list[str]) -> None:
    assert result.returncode == 0, f"{what} failed:\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, f"{what}:\n{result.stderr}"
    for text in expected:
        assert text in result.stdout, f"{what}: {text!r} not printed:\n{result.stdout}"


@pytest.mark.slow  # subprocesses against a live server; CI runs them
@pytest.mark.parametrize(
    "document, section, blocks",
    shell_sections(),
    ids=[f"{document}: {section}" for document, section, _ in shell_sections()],
)
def test_the_shell_blocks_run_as_written(document, section, blocks, reader_env):
    assert (ROOT / ".venv" / "bin" / "python").exists(), "the documents expect ./dev's .venv"
    script = "\n".join(block.body for block in blocks)

    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], cwd=ROOT, env=reader_env,
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip

    check(result, f"{document}, {section}", EXPECTED.get((document, section, "sh"), []))
    # `export T=$(...)` hides a failing command from bash: its complaint would be here.
    assert result.stderr == "", f"{document}, {section}:\n{result.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("block", python_blocks(), ids=str)
def test_the_python_blocks_run_as_written(block, reader_env, make_agent, tmp_path):
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    script = workdir / "example.py"
    script.write_text(block.body)
    env = {**reader_env, "LOOPWARDEN_TOKEN": make_agent("docs-reader")[1]}

    result = subprocess.run(
        [sys.executable, "-P", str(script)], cwd=workdir, env=env,
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip

    check(result, str(block), EXPECTED.get((block.document, block.section, "python"), []))
