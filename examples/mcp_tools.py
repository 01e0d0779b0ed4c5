"""MCP: an MCP server's tools as a Host's capability, called by a program while it streams.

`pysolate.mcp.register` lists the tools of a connected `ClientSession` and registers them;
their annotations only propose an effect, which the Host confirms (`confirm=`). The program
streams from a stand-in for a model at 50 tokens/s; for a real model pass its SDK stream
(docs/streams.md). docs/tools.md, "An MCP server end to end", explains it.
"""

import contextlib
import os
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from pysolate import Effect, Host
from pysolate.mcp import register
from pysolate.streams import play, source_to_stream

SERVER = Path(__file__).with_name("mcp_server.py")
PROGRAM = 'pages = [kb.search(q) for q in ["retries", "timeouts"]]\nkb.save_note(pages[0][0])\nlen(pages)\n'


def model_stream():  # a stand-in for a model writing the program at 50 tokens/s
    return play(source_to_stream(PROGRAM, tokens_per_second=50))


@contextlib.asynccontextmanager
async def kb_host():
    """A Host with the MCP server's tools as the capability `kb`."""
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            host = Host()
            await register(
                host, session, capability="kb", confirm={"kb.search": Effect.PURE}
            )  # save_note: a write
            yield host


async def main() -> None:
    async with kb_host() as host:
        result = await host.run_stream(model_stream())
    print(result.status, result.value, result.report.counts())
    print([call.result for call in result.calls][-1])


if __name__ == "__main__":
    anyio.run(main)
