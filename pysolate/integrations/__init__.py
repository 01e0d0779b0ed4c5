"""Pysolate inside the agent frameworks people already use (docs/integrations.md).

Each framework has its own module, imported on purpose: nothing here imports a framework,
so ``import pysolate`` works without any of them installed.

- ``pysolate.integrations.pydantic_ai`` (extra ``pysolate[pydantic-ai]``): ``PysolateCodeMode``,
  a Pydantic AI capability that gives an agent a ``run_code`` tool, streamed through
  Pysolate while the model is still writing the tool call's arguments.
- ``pysolate.integrations.smolagents`` (extra ``pysolate[smolagents]``): ``PysolateExecutor``,
  a smolagents ``PythonExecutor`` for ``CodeAgent``, with ``StreamingModel`` to overlap the
  program with the model's streamed output.
- ``pysolate.integrations.openai_agents`` (extra ``pysolate[openai-agents]``):
  ``PysolateCodeTool``, a ``run_code`` tool for an OpenAI Agents SDK ``Agent`` whose code is
  fed to Pysolate while ``Runner.run_streamed`` streams the call's arguments.

Agent tools carry no Pysolate qualification, so each treats every tool as ``unknown`` (never
run early) unless the builder qualifies it by name (``effects={"search": Effect.PURE}``).
"""
