import pytest

from ratchet.envs.remote import envs_python


@pytest.fixture(scope="session")
def py312() -> str:
    python, why = envs_python()
    if python is None:
        pytest.skip(f"no Python >= 3.12 environment worker here: {why}")
    return python
