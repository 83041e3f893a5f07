"""The repository stands alone: no file cites a path outside it, and the design notes that
the code cites (`docs/DESIGN.md`) are in it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A bare "DESIGN.md" (or "DESIGN section 4") names a file outside the repository; the
# repository's own notes are cited by their path.
OUTSIDE = re.compile(r"\.\./shared|(?<![/\w])DESIGN(\.md|\s+(section|§)|\s+\d)")
# Files that name the outside spelling only to check it is absent.
CHECKERS = {"tests/docs/test_stands_alone.py", "tests/api/test_schema.py",
            "tests/docs/test_api_reference.py"}  # fmt: skip


def tracked_texts():
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in names:
        path = ROOT / name
        if name in CHECKERS or not path.is_file() or path.suffix in {".png", ".ico", ".woff2"}:
            continue
        try:
            yield name, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


def test_no_file_cites_a_path_outside_the_repository():
    found = [
        f"{name}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
        for name, text in tracked_texts()
        for match in OUTSIDE.finditer(text)
    ]
    assert found == []


def test_the_design_notes_the_code_cites_are_in_the_repository():
    cited = {name for name, text in tracked_texts() if "docs/DESIGN.md" in text}
    assert cited, "nothing cites docs/DESIGN.md: drop this test or the file"
    notes = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    for section in range(1, 12):
        assert f"\n## {section}. " in notes, section
