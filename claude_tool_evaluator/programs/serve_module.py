"""A module server (--server-module) as Claude Code starts it for `--harness claude-code`: a
process serving it over stdio. Run as `python serve_module.py NAME MODULE ATTR` with the
evaluator's folder on PYTHONPATH (ATTR may be empty); package data, never imported by the
package."""

import sys

from claude_tool_evaluator.hub.processes import load_server_object
from claude_tool_evaluator.run_types import ServerSpec

if __name__ == "__main__":
    name, module, attr = sys.argv[1:4]
    load_server_object(ServerSpec(name=name, kind="module", module=module, attr=attr or None)).run()
