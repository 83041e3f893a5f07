"""The README's client example, run as written, from outside the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_client_example() -> str:
    text = README.read_text()
    marker = text.index("<!-- readme-client-example -->")
    return re.search(r"```python\n(.*?)```", text[marker:], re.S).group(1)


def test_the_readme_client_example_completes_then_reuses(api_url, agent_token, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_client_example())
    env = {**os.environ, "LOOPWARDEN_URL": api_url, "LOOPWARDEN_TOKEN": agent_token}
    env.pop("DJANGO_SETTINGS_MODULE", None)

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-P", str(script)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run() == "{'success': True, 'data': {'refund_id': 'r-42'}} COMPLETED"
    assert run() == "{'success': True, 'reused': True, 'data': {'refund_id': 'r-42'}} RUNNING"
