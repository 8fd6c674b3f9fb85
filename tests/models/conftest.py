from __future__ import annotations

from collections.abc import Iterator

import pytest

from openai_stub import StubServer


@pytest.fixture
def stub_server() -> Iterator[StubServer]:
    server = StubServer()
    yield server
    server.close()
