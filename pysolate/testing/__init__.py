"""Test doubles shipped with Pysolate: scripted tools, an in-memory workspace, an
in-process Guest.

- ``scripted_tool(name=Script(...), ...)`` builds a capability object whose methods have a
  set latency, effect and version, compute their result (or raise) with a plain Python
  function whose signature they take, and record every call: arguments, start and end on
  anyio's clock (so a mock clock makes them exact), outcome.
- ``memory_workspace({"a.txt": "..."})`` is a frozen ``Workspace`` built from a dict.
- ``InProcessGuest`` implements the Guest seam (``_guest_api``) inside the Host process:
  the program runs in a worker thread, in a fresh namespace whose globals are capability
  proxies; ``print`` writes to the run's captured stdout. It shows the program exactly
  what the subprocess Guest shows (``_guest_errors``), so Host tests run fast against it.

``InProcessGuest`` is NOT a security boundary: the program shares the Host's interpreter.
It applies the real Guest's rules an honest program meets (``_guest_view``): only the
standard library imports, and ``os.environ`` is empty; but ``sys.modules``, files and
sockets still reach the Host. Its limits are cooperative: the wall
time ends the run but a thread stuck in pure computation keeps running until it next
prints or calls a tool; there is no CPU or memory limit. Output written to ``sys.stdout``
directly (not through ``print``) is not captured. Use it only for trusted test programs.
"""

from .._report._equivalence import differences, observable
from ._in_process import InProcessGuest, InProcessSession, in_process_guest, in_process_session
from ._invariants import check_invariants
from ._scripted import Script, ScriptedCall, ScriptedTool, memory_workspace, scripted_tool

__all__ = [
    "InProcessGuest",
    "InProcessSession",
    "Script",
    "ScriptedCall",
    "ScriptedTool",
    "check_invariants",
    "differences",
    "in_process_guest",
    "in_process_session",
    "memory_workspace",
    "observable",
    "scripted_tool",
]
