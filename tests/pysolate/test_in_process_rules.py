"""The in-process test Guest refuses what the real Guest refuses (imports, environment), so a
test cannot pass where production fails."""

from __future__ import annotations

import os

import pytest

from pysolate import Host
from pysolate._guest import start_subprocess_guest
from pysolate.testing import in_process_guest

pytestmark = pytest.mark.anyio

CASES = [
    "import pydantic",
    "import anyio.lowlevel",
    "from opentelemetry import trace",
    "import os\nos.environ.get('PYSOLATE_SECRET_FOR_TEST')",
    "import os\nos.getenv('PYSOLATE_SECRET_FOR_TEST', 'absent')",
    "from os import environ\n'PYSOLATE_SECRET_FOR_TEST' in environ",
    "import posix\nb'PYSOLATE_SECRET_FOR_TEST' in posix.environ",
    "import os.path\nos.environ.get('PYSOLATE_SECRET_FOR_TEST')",
    "import json, math\njson.dumps([math.pi])",
    "from os.path import join\njoin('a', 'b')",
    "import os\nos.environ['X'] = '1'\n(os.environ['X'], os.getenv('X'))",
    "from . import x",
]


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSOLATE_SECRET_FOR_TEST", "sk-secret")


@pytest.mark.parametrize("source", CASES)
async def test_in_process_guest_matches_the_real_guest(source: str) -> None:
    fake = await Host(guest_factory=in_process_guest, instrument=None).run_source(source)
    real = await Host(guest_factory=start_subprocess_guest, instrument=None).run_source(source)
    assert (fake.status, fake.value, fake.error and (fake.error.type, fake.error.message)) == (
        real.status,
        real.value,
        real.error and (real.error.type, real.error.message),
    )
    assert "sk-secret" not in repr(fake.value)


async def test_a_programs_environment_writes_never_reach_the_host() -> None:
    await Host(guest_factory=in_process_guest, instrument=None).run_source(
        "import os\nos.environ['PYSOLATE_LEAK'] = '1'\nos.putenv('PYSOLATE_LEAK', '1')\n"
    )
    assert "PYSOLATE_LEAK" not in os.environ
