"""The code surface: model-written code in a bubblewrap sandbox, its tool calls through the gate.

``registry.add(python_tool(workspace=..., timeout=..., tools=[...]))`` adds a
``run_python`` tool (effect ``exec:sandbox``). Its code runs confined (see
`callgate.sandbox.launch` and docs/sandbox.md for what is and is not), and
each ``tools.<name>(...)`` call it makes is submitted through the same run:
validated, authorized under the run's authority, approved and recorded.
`shell_tool` adds ``run_shell`` (a ``/bin/sh`` script in the same sandbox,
calling no tools). Where bubblewrap or user namespaces are missing the tools
refuse to run code (`unavailable_reason` says why); ``mode="unsafe_subprocess"``
is for development only. Network egress, where a deployer allows it, is one
gated connection at a time (`network_tool`: the effect ``network:<host>``), relayed
by the host: the code holds one end of a socketpair, never a socket of the host's
network.
"""

from callgate.sandbox.config import Limits, Mode, SandboxConfig
from callgate.sandbox.launch import unavailable_reason
from callgate.sandbox.network import NETWORK_TOOL, network_tool
from callgate.sandbox.runner import SandboxResult, run_code
from callgate.sandbox.seccomp import seccomp_missing
from callgate.sandbox.tool import EXEC_EFFECT, python_tool, shell_tool

__all__ = [
    "EXEC_EFFECT",
    "NETWORK_TOOL",
    "Limits",
    "Mode",
    "SandboxConfig",
    "SandboxResult",
    "network_tool",
    "python_tool",
    "run_code",
    "seccomp_missing",
    "shell_tool",
    "unavailable_reason",
]
