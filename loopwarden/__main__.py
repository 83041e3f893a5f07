"""`python -m loopwarden port HOST PORT`: the port check `./dev run` makes before it starts;
`python -m loopwarden env NAME...`: the `.env` file's values of those variables, for bash.

Here rather than in `loopwarden.startup` run with `-m`: the package imports that module (the
Celery app does), and running an imported module again as `__main__` makes runpy warn.
"""

from __future__ import annotations

import sys

from loopwarden.startup import main

main(sys.argv[1:])
