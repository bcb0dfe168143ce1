"""A stdio MCP server as Claude Code starts it for `--harness claude-code`: in the folder the
evaluator's hub starts it in (Claude Code's MCP config has no working folder, and a run's own
folder is its temporary project). Run as `python -I -S in_folder.py FOLDER COMMAND [ARG...]`;
package data, never imported by the package."""

import os
import sys

if __name__ == "__main__":
    os.chdir(sys.argv[1])
    os.execvp(sys.argv[2], sys.argv[2:])
