"""The developer tools' tests: the simulated agent reaches a live server as the thin client's
tests do, with their fixtures."""

from tests.client.conftest import agent_token, api_url, lw_operator  # noqa: F401  (fixtures)
