"""Pysolate: run LLM-written Python code actions while they stream, provably no differently.

See docs/contract.md for the correctness contract: a run is observationally equal to
running the sealed source sequentially. The public names are imported at their first use
(``pysolate._lazy``): ``import pysolate`` costs next to nothing until one is.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from occurrences import Effect as Effect
    from occurrences import MethodSpec as MethodSpec
    from scheduler import LanePolicy as LanePolicy

    from ._calls._share_config import ShareConfig as ShareConfig
    from ._calls._share_config import ShareStatistics as ShareStatistics
    from ._exceptions import ApplyConflict as ApplyConflict
    from ._exceptions import CommitError as CommitError
    from ._exceptions import GuestStartError as GuestStartError
    from ._exceptions import IsolationMismatch as IsolationMismatch
    from ._exceptions import IsolationUnavailable as IsolationUnavailable
    from ._exceptions import NotStreamingWarning as NotStreamingWarning
    from ._exceptions import PysolateError as PysolateError
    from ._exceptions import PysolateWarning as PysolateWarning
    from ._exceptions import RegistrationError as RegistrationError
    from ._exceptions import SessionBroken as SessionBroken
    from ._exceptions import SessionBusy as SessionBusy
    from ._exceptions import SessionClosed as SessionClosed
    from ._exceptions import SessionError as SessionError
    from ._exceptions import SessionExpired as SessionExpired
    from ._exceptions import ToolError as ToolError
    from ._exceptions import UnqualifiedToolsWarning as UnqualifiedToolsWarning
    from ._exceptions import WorkspaceChanged as WorkspaceChanged
    from ._exceptions import WorkspaceError as WorkspaceError
    from ._guest_api import ErrorInfo as ErrorInfo
    from ._guest_api import GuestLimits as GuestLimits
    from ._guest_api import Isolation as Isolation
    from ._guest_api import ToolFailure as ToolFailure
    from ._report._result import CallRecord as CallRecord
    from ._report._result import RunReport as RunReport
    from ._report._result import RunResult as RunResult
    from ._report._result import RunStatus as RunStatus
    from ._report._result import ValueDigest as ValueDigest
    from ._report._result_text import result_text as result_text
    from ._report._timeline import Timeline as Timeline
    from ._report._timeline import render_svg as render_svg
    from ._run._blocking import SyncHost as SyncHost
    from ._run._blocking import SyncSession as SyncSession
    from ._run._code_tool import CodeTool as CodeTool
    from ._run._host import Host as Host
    from ._run._session import Session as Session
    from ._run._session import SessionLimits as SessionLimits
    from ._run._session import SessionState as SessionState
    from ._run._session import SessionStatistics as SessionStatistics
    from ._tools._capability import EffectProposal as EffectProposal
    from ._tools._capability import capability as capability
    from ._tools._capability import propose_effect as propose_effect
    from ._workspace._workspace import Workspace as Workspace

__all__ = [
    "ApplyConflict",
    "CallRecord",
    "CodeTool",
    "CommitError",
    "Effect",
    "EffectProposal",
    "ErrorInfo",
    "GuestLimits",
    "GuestStartError",
    "Host",
    "Isolation",
    "IsolationMismatch",
    "IsolationUnavailable",
    "LanePolicy",
    "MethodSpec",
    "NotStreamingWarning",
    "PysolateError",
    "PysolateWarning",
    "RegistrationError",
    "RunReport",
    "RunResult",
    "RunStatus",
    "Session",
    "SessionBroken",
    "SessionBusy",
    "SessionClosed",
    "SessionError",
    "SessionExpired",
    "SessionLimits",
    "SessionState",
    "SessionStatistics",
    "ShareConfig",
    "ShareStatistics",
    "SyncHost",
    "SyncSession",
    "Timeline",
    "ToolError",
    "ToolFailure",
    "UnqualifiedToolsWarning",
    "ValueDigest",
    "Workspace",
    "WorkspaceChanged",
    "WorkspaceError",
    "capability",
    "propose_effect",
    "render_svg",
    "result_text",
]

if not TYPE_CHECKING:  # each name is imported at its first use (``pysolate._lazy``)
    from ._lazy import attach

    __getattr__, __dir__ = attach(__name__, __all__)
