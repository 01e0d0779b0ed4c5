"""The ``pysolate`` command: the demo, and running, replaying and recording streams.

Every command ends in the same place: a token stream goes through ``Host.run_stream``
against a Host's tools, and the outcome and the report are printed (a rich table, or JSON
with ``--json``). The commands differ only in where the stream comes from:

- ``demo``: the bundled recorded reply, also run the slow way (stream, then
  ``run_source(speculate=False)``) to show both times and that the results are equal;
- ``run FILE``: a source or markdown file cut into model-sized tokens at a rate;
- ``replay RECORDING``: a recorded stream (``pysolate.streams`` JSONL);
- ``record OUT``: stdin or a command's stdout, recorded while it streams and runs.

User mistakes (a missing file, a bad recording, a tools module that does not import or
has no ``make_host``) exit with status 2 and one line on stderr, never a traceback: they
are raised as ``CliError`` and reported by ``main``.

One module per job: ``_inputs`` (where streams and tools come from), ``_measure`` (timing a
run), ``_output`` (tables, JSON, the timeline), ``_demo_command``, ``_commands`` (run, replay,
record), ``_guests`` (local or Ray Guests), ``_main`` (the parser and exit statuses).
"""

from ._demo_command import DEMO_RATE, DEMO_RECORDING, DEMO_REPLY, regenerate_demo_recording
from ._errors import CliError
from ._inputs import load_host
from ._main import build_parser, main
from ._measure import Measured, measure_baseline, measure_stream

__all__ = [
    "DEMO_RATE",
    "DEMO_RECORDING",
    "DEMO_REPLY",
    "CliError",
    "Measured",
    "build_parser",
    "load_host",
    "main",
    "measure_baseline",
    "measure_stream",
    "regenerate_demo_recording",
]
