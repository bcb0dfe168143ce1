"""Tests for the example Profiles MCP server (examples/profiles_server.py)."""

import asyncio
import importlib.util
import os
import sqlite3
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters, stdio_client

SERVER_PATH = Path(__file__).resolve().parents[1] / "examples" / "profiles_server.py"

# examples/ is not a package, so load the file the way --server-module would.
_spec = importlib.util.spec_from_file_location("profiles_server_under_test", SERVER_PATH)
server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(server)

EXPECTED_TOOLS = {
    "about_profiles",
    "search_profiles_docs",
    "get_existing_connections",
    "profiles_workflow_guide",
    "list_warehouse_tables",
    "describe_table",
    "run_sql_query",
    "get_profile",
    "save_note",
}


async def _call(name, args=None):
    async with Client(server.mcp) as client:
        return await client.call_tool(name, args or {})


def call(name, args=None):
    return asyncio.run(_call(name, args))


def text(result):
    return "\n".join(c.text for c in result.content)


def ok(name, args=None):
    result = call(name, args)
    assert not result.is_error, text(result)
    return text(result)


def test_lists_exactly_the_tools_with_descriptions_and_schemas():
    async def go():
        async with Client(server.mcp) as client:
            return (await client.list_tools()).tools

    tools = asyncio.run(go())
    assert {t.name for t in tools} == EXPECTED_TOOLS
    for t in tools:
        assert t.description and len(t.description) > 30, t.name
        assert not t.description.startswith(" ") and "\n    " not in t.description, t.name
        assert t.input_schema["type"] == "object", t.name
        if t.name == "save_note":  # the one tool that changes state
            assert t.annotations.destructive_hint and not t.annotations.read_only_hint
        else:
            assert t.annotations and t.annotations.read_only_hint, t.name
    by_name = {t.name: t for t in tools}
    props = by_name["run_sql_query"].input_schema["properties"]
    assert props["sql"]["description"]
    assert by_name["run_sql_query"].input_schema["required"] == ["sql"]
    assert by_name["get_profile"].input_schema["required"] == ["user_id"]


def test_about_and_connections():
    assert "identity stitching" in ok("about_profiles").lower()
    conns = ok("get_existing_connections")
    for name in ("snowflake_prod", "bigquery_staging", "redshift_legacy"):
        assert name in conns


def test_search_ranks_ltv_page_first():
    out = ok("search_profiles_docs", {"query": "LTV model"})
    first = out.split("\n1. ", 1)[1].splitlines()[0]
    assert "LTV" in first
    assert "\n4. " not in out  # default limit is 3


def test_search_other_topics():
    out = ok("search_profiles_docs", {"query": "identity stitching", "limit": 1})
    assert "1. Identity stitching" in out and "\n2. " not in out
    assert "No documentation pages" in ok("search_profiles_docs", {"query": "kubernetes helm"})


def test_workflow_guide_known_and_unknown_goals():
    out = ok("profiles_workflow_guide", {"goal": "ltv model"})
    assert out.startswith("Guide: ltv model") and "1. " in out
    assert ok("profiles_workflow_guide", {"goal": "setup project"}).startswith(
        "Guide: setup project"
    )
    unknown = ok("profiles_workflow_guide", {"goal": "bake a cake"})
    for goal in ("setup project", "identity graph", "feature table", "ltv model"):
        assert goal in unknown


def test_list_and_describe_tables():
    tables = ok("list_warehouse_tables")
    for t in ("identifies", "tracks", "pages", "orders", "users"):
        assert f"rudder_events.{t}" in tables
    assert not call(
        "list_warehouse_tables", {"connection": "default", "schema": "rudder_events"}
    ).is_error
    assert call("list_warehouse_tables", {"schema": "nope"}).is_error
    assert call("list_warehouse_tables", {"connection": "bigquery_staging"}).is_error

    desc = ok("describe_table", {"table": "orders"})
    assert "9 rows" in desc and "order_id" in desc and "REAL" in desc
    assert ok("describe_table", {"table": "rudder_events.users"}).startswith("rudder_events.users")


def test_describe_unknown_table_is_error():
    result = call("describe_table", {"table": "customers"})
    assert result.is_error
    assert "not found" in text(result) and "orders" in text(result)


def test_run_sql_query_returns_rows_and_caps_them():
    out = ok("run_sql_query", {"sql": "SELECT user_id, email FROM users ORDER BY user_id"})
    assert "u_1001" in out and "maya.chen@example.com" in out and "6 row(s)" in out
    capped = ok("run_sql_query", {"sql": "SELECT * FROM rudder_events.tracks", "limit": 5})
    assert "5 row(s) (truncated" in capped
    cte = ok(
        "run_sql_query", {"sql": "WITH c AS (SELECT count(*) AS n FROM orders) SELECT n FROM c;"}
    )
    assert "9" in cte


def test_run_sql_query_refuses_writes_and_multiple_statements():
    for sql in (
        "DELETE FROM users",
        "SELECT 1; DROP TABLE users",
        "WITH x AS (SELECT 1) DELETE FROM users",
        "PRAGMA table_info(users)",
    ):
        result = call("run_sql_query", {"sql": sql})
        assert result.is_error, sql
    # Nothing was deleted.
    assert "6 row(s)" in ok("run_sql_query", {"sql": "SELECT * FROM users"})
    bad = call("run_sql_query", {"sql": "SELECT nope FROM users"})
    assert bad.is_error and "no such column" in text(bad)


def test_get_profile_stitches_identities():
    out = ok("get_profile", {"user_id": "u_1001"})
    assert "Maya Chen" in out and "anon_7f3a" in out and "anon_c91e" in out
    assert "442.20 USD" in out
    # An anonymous id resolves to the same person.
    assert ok("get_profile", {"user_id": "anon_c91e"}).splitlines()[0] == out.splitlines()[0]
    assert call("get_profile", {"user_id": "u_0000"}).is_error


def test_warehouse_is_rebuilt_when_sql_is_newer(tmp_path, monkeypatch):
    sql = tmp_path / "warehouse.sql"
    db = tmp_path / "warehouse.sqlite"
    sql.write_text("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
    monkeypatch.setattr(server, "DATA_DIR", tmp_path)
    monkeypatch.setattr(server, "WAREHOUSE_SQL", sql)
    monkeypatch.setattr(server, "WAREHOUSE_DB", db)

    assert server.ensure_warehouse() == db
    sql.write_text("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (2);")
    os.utime(sql, (db.stat().st_mtime + 10, db.stat().st_mtime + 10))
    server.ensure_warehouse()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT x FROM t").fetchall() == [(2,)]
    finally:
        conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["warehouse.sql", "warehouse.sqlite"]


def test_stdio_transport():
    async def go():
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER_PATH)])
        async with Client(stdio_client(params)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("about_profiles", {})
            return names, result

    names, result = asyncio.run(go())
    assert names == EXPECTED_TOOLS
    assert not result.is_error and "RudderStack Profiles" in text(result)


def test_save_note_writes_its_own_database(tmp_path, monkeypatch):
    db = tmp_path / "notes.sqlite"
    monkeypatch.setattr(server, "NOTES_DB", db)
    assert (
        ok("save_note", {"title": "plan", "text": "first"})
        == "Saved the note 'plan' (5 characters)."
    )
    assert ok("save_note", {"title": "plan", "text": "second"}).startswith(
        "Replaced the note 'plan'"
    )
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT title, text FROM notes").fetchall() == [("plan", "second")]
    finally:
        conn.close()
