"""τ²-bench's reward for one run of an imported task, written by `evaluator.py import tau2`.

    python tau2_verify.py DOMAIN TASK_ID STATE_DIR        (each case's `verify` command)

It reads the run's result on stdin and the run's id from EVAL_RUN (the evaluator gives both).
Reward 1 (exit 0) as τ² gives it: the conversation ended by itself (not at max_turns, not in
error); the database the run left (the server's state file for its key tau2/DOMAIN/<EVAL_RUN>)
hashes as the one the task's gold actions leave on a fresh database (when the task's reward
counts DB); and every piece of information to communicate appears in some assistant message,
lower-cased with commas removed (when it counts COMMUNICATE). Reward 0: exit 1, the reason on
the first line. The run's state file is removed once read.
"""

import copy
import hashlib
import importlib
import json
import os
import sys
from pathlib import Path


def db_hash(db):
    return hashlib.sha256(json.dumps(db, sort_keys=True, default=str).encode()).hexdigest()


def problem(domain, task_id, state_dir, run):
    server = importlib.import_module(f"tau2_{domain}_mcp.server")
    data = Path(server.__file__).with_name("data") / "tau2" / "domains" / domain
    tasks = json.loads((data / "tasks.json").read_text("utf-8"))
    criteria = next(t for t in tasks if t["id"] == task_id).get("evaluation_criteria") or {}
    basis = criteria.get("reward_basis") or ["DB", "COMMUNICATE"]
    if run.get("ended_by") in ("max_turns", "error"):
        return f"the conversation did not end by itself ({run['ended_by']})"
    key = f"tau2/{domain}/{os.environ['EVAL_RUN']}"
    path = Path(state_dir) / (hashlib.sha256(key.encode()).hexdigest() + ".json")
    left = json.loads(path.read_text("utf-8"))["db"] if path.exists() else server._base_db()
    path.unlink(missing_ok=True)
    if "DB" in basis and criteria.get("actions") is not None:
        gold = copy.deepcopy(server._base_db())
        for action in criteria["actions"]:
            try:
                server._execute_tool(gold, action["name"], dict(action["arguments"]))
            except Exception:  # τ² logs a failing gold action and goes on
                pass
        if db_hash(left) != db_hash(gold):
            return "the database differs from the one the gold actions leave"
    if "COMMUNICATE" in basis:
        said = [
            entry["content"].lower().replace(",", "")
            for entry in run.get("conversation_history", [])
            if entry.get("role") == "assistant" and entry.get("content")
        ]
        missing = [
            info
            for info in criteria.get("communicate_info") or []
            if not any(info.lower() in text for text in said)
        ]
        if missing:
            return "not communicated: " + ", ".join(missing)
    return None


if __name__ == "__main__":
    domain, task_id, state_dir = sys.argv[1:4]
    reason = problem(domain, task_id, state_dir, json.loads(sys.stdin.read() or "{}"))
    print(reason or f"tau2 {domain} task {task_id}: reward 1")
    sys.exit(1 if reason else 0)
