"""Example MCP server: a small, local stand-in for RudderStack Profiles.

It gives the evaluator something realistic to exercise: product docs, a
workflow guide, the user's warehouse connections and a sample event warehouse
(SQLite, built from data/warehouse.sql) that can be explored and queried.
Every tool is annotated read-only but one: save_note writes a note into a
small database (data/notes.sqlite, or $PROFILES_NOTES_DB) and is annotated
destructive, so the evaluator's default tool policy does not run it.
Nothing touches the network.

    python examples/profiles_server.py                      # stdio
    python examples/profiles_server.py --http --port 8765   # streamable HTTP at /mcp
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

DATA_DIR = Path(__file__).resolve().parent / "data"
WAREHOUSE_SQL = DATA_DIR / "warehouse.sql"
WAREHOUSE_DB = DATA_DIR / "warehouse.sqlite"
# save_note's database (the one tool that changes state); PROFILES_NOTES_DB points it elsewhere.
NOTES_DB = Path(os.environ.get("PROFILES_NOTES_DB") or DATA_DIR / "notes.sqlite")
DOCS = json.loads((DATA_DIR / "profiles_docs.json").read_text(encoding="utf-8"))

SCHEMA = "rudder_events"  # SQLite has no schemas; the sample poses as this one
MAX_ROWS = 200
QUERY_TIMEOUT_S = 5.0

CONNECTIONS = [
    {
        "name": "snowflake_prod",
        "type": "snowflake",
        "default": True,
        "details": "account acme-xy12345, database ANALYTICS, schema RUDDER_EVENTS, role PROFILES_ROLE",
        "targets": ["dev", "prod"],
        "status": "ok (sample data available locally)",
    },
    {
        "name": "bigquery_staging",
        "type": "bigquery",
        "default": False,
        "details": "project acme-staging, dataset rudder_events_stg, service account profiles-sa",
        "targets": ["staging"],
        "status": "ok",
    },
    {
        "name": "redshift_legacy",
        "type": "redshift",
        "default": False,
        "details": "cluster acme-legacy.us-east-1, database events, schema public",
        "targets": ["prod"],
        "status": "credentials expired on 2024-03-01; run pb init connection to refresh",
    },
]

GUIDES: dict[str, dict[str, Any]] = {
    "setup project": {
        "aliases": [
            "setup",
            "set up",
            "new project",
            "project",
            "getting started",
            "start",
            "init",
        ],
        "steps": [
            "Install the CLI: pip install profiles-rudderstack, then check with pb version.",
            "Pick a warehouse connection (see get_existing_connections) or create one with pb init connection.",
            "Scaffold the project: pb init pb-project -o my_profiles_project.",
            "In pb_project.yaml set the connection name, the user entity and its id_types "
            "(user_id, anonymous_id, email).",
            "List your input tables (identifies, tracks, orders...) in models/inputs.yaml and map their id columns.",
            "Check permissions with pb validate access.",
            "Run pb compile to inspect the generated SQL, then pb run.",
        ],
    },
    "identity graph": {
        "aliases": ["identity", "stitch", "stitching", "id graph", "id_stitcher", "merge users"],
        "steps": [
            "Declare every identifier as an id_type in pb_project.yaml; add filters for junk values.",
            "Map identifier columns of each input in models/inputs.yaml (e.g. lower(email) as email).",
            "Rely on the default id_stitcher model or declare one in models/profiles.yaml to choose edge sources.",
            "Run pb run and inspect the output <entity>_id_graph table.",
            "Check cluster sizes: a rudder_id with very many ids signals over-stitching; tighten id filters.",
        ],
    },
    "feature table": {
        "aliases": [
            "feature",
            "features",
            "entity var",
            "entity vars",
            "customer 360",
            "c360",
            "feature view",
        ],
        "steps": [
            "Make sure the identity graph builds (see the 'identity graph' guide).",
            "Add var_groups with entity_vars in models/profiles.yaml, e.g. total_revenue = sum(total) from orders.",
            "Use input_vars for per-row logic, and is_feature: false for helper vars.",
            "Optionally define feature_views keyed by user_id or email for Reverse ETL.",
            "Run pb run; the feature table has one row per entity and one column per feature.",
        ],
    },
    "ltv model": {
        "aliases": ["ltv", "lifetime value", "clv", "predict revenue", "predictive"],
        "steps": [
            "Confirm the connection is Snowflake or BigQuery with Python/Snowpark enabled.",
            "Build revenue features first: total_revenue, order_count, days_since_last_order as entity vars.",
            "Add a python_model of type ltv in models/profiles.yaml; set the prediction horizon (e.g. 90 days) "
            "and the revenue entity var.",
            "Restrict eligible users (e.g. users with at least one order) to keep training balanced.",
            "Run pb run; predictions land as new columns (e.g. predicted_ltv_90d) in the feature table.",
            "Validate against a held-out period before activating the scores.",
        ],
    },
}

STOPWORDS = {
    "a",
    "an",
    "and",
    "the",
    "to",
    "of",
    "in",
    "for",
    "on",
    "how",
    "do",
    "i",
    "is",
    "what",
    "with",
    "my",
}

mcp = MCPServer(
    "profiles",
    instructions=(
        "Tools for RudderStack Profiles: product overview, documentation search, step-by-step "
        "workflow guides, the user's warehouse connections, and read-only access to a sample "
        "event warehouse (tables, schemas, SQL queries, stitched customer profiles)."
    ),
    # basicConfig happens in the constructor; WARNING keeps an importing process quiet.
    log_level="WARNING",
)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
CHANGES_STATE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Register fn as a read-only, plain-text tool.

    The SDK uses __doc__ verbatim (indentation included), so the description is
    cleaned here; structured output is off because every tool returns prose.
    """
    mcp.add_tool(
        fn,
        description=inspect.cleandoc(fn.__doc__ or ""),
        annotations=READ_ONLY,
        structured_output=False,
    )
    return fn


# --- warehouse helpers ------------------------------------------------------


def ensure_warehouse() -> Path:
    """Build warehouse.sqlite from warehouse.sql when missing or stale."""
    if WAREHOUSE_DB.exists() and WAREHOUSE_DB.stat().st_mtime >= WAREHOUSE_SQL.stat().st_mtime:
        return WAREHOUSE_DB
    # Build beside the target and rename: concurrent servers never see a half-written file.
    fd, tmp = tempfile.mkstemp(dir=DATA_DIR, prefix=".warehouse-", suffix=".sqlite.tmp")
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript(WAREHOUSE_SQL.read_text(encoding="utf-8"))
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, WAREHOUSE_DB)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return WAREHOUSE_DB


@contextmanager
def connect_ro() -> Iterator[sqlite3.Connection]:
    uri = ensure_warehouse().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        # Lets queries say rudder_events.orders as they would in the real warehouse.
        conn.execute("ATTACH DATABASE ? AS " + SCHEMA, (uri,))
        conn.execute("PRAGMA query_only = ON")
        yield conn
    finally:
        conn.close()


def table_names(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return [r[0] for r in rows]


def resolve_table(conn: sqlite3.Connection, table: str) -> str:
    name = table.strip().strip('"').lower()
    if name.startswith(SCHEMA + "."):
        name = name[len(SCHEMA) + 1 :]
    tables = table_names(conn)
    if name not in tables:
        raise ToolError(
            f"Table '{table}' not found in schema {SCHEMA}. Available tables: {', '.join(tables)}."
        )
    return name


def format_table(columns: list[str], rows: list[tuple], max_width: int = 40) -> str:
    def cell(v: Any) -> str:
        s = "NULL" if v is None else str(v)
        return s if len(s) <= max_width else s[: max_width - 1] + "…"

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(columns, widths)),
        "-+-".join("-" * w for w in widths),
    ]
    lines += [" | ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def check_read_only(sql: str) -> str:
    """Return the single statement in sql, or raise if it is not a lone SELECT/WITH."""
    # Blank out literals and comments so a ';' or keyword inside them is not counted.
    code = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "''", sql)
    code = re.sub(r"--[^\n]*|/\*.*?\*/", " ", code, flags=re.S).strip().rstrip(";").strip()
    if not code:
        raise ToolError("Empty query.")
    if ";" in code:
        raise ToolError(
            "Only a single statement is allowed; remove everything after the first ';'."
        )
    first = code.split(None, 1)[0].upper()
    if first not in ("SELECT", "WITH"):
        raise ToolError(f"Only read-only SELECT or WITH queries are allowed; got {first}.")
    return sql.strip().rstrip(";")


# --- tools --------------------------------------------------------------------


@tool
def about_profiles() -> str:
    """Give a short overview of RudderStack Profiles: what it does, its core concepts and how it is used.

    Use this for general "what is Profiles" questions. For specific topics use search_profiles_docs;
    for step-by-step help use profiles_workflow_guide.
    """
    return (
        "RudderStack Profiles builds a customer 360 directly in your data warehouse "
        "(Snowflake, BigQuery, Redshift, Databricks).\n\n"
        "Core concepts:\n"
        "- Identity stitching: links anonymous_id, user_id, email... into one rudder_id per person.\n"
        "- Entity vars: per-customer features written as SQL aggregates (e.g. total_revenue).\n"
        "- Feature tables / views: one row per customer, one column per feature, ready for activation.\n"
        "- Predictive models: LTV, churn and propensity scores trained on your features.\n\n"
        "Projects are YAML (pb_project.yaml, models/inputs.yaml, models/profiles.yaml) run with the pb CLI "
        "(pb init, pb compile, pb run). Connections to warehouses are kept in ~/.pb/siteconfig.yaml.\n"
        "Results can be synced to tools such as Braze or HubSpot via Reverse ETL."
    )


def _terms(text: str) -> list[str]:
    words = re.findall(r"[a-z0-9_]+", text.lower())
    # Crude plural folding so "models" matches "model".
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if w not in STOPWORDS]


@tool
def search_profiles_docs(
    query: Annotated[
        str, Field(description="Keywords to search for, e.g. 'identity stitching' or 'LTV model'.")
    ],
    limit: Annotated[
        int, Field(description="Maximum number of pages to return (1-10).", ge=1, le=10)
    ] = 3,
) -> str:
    """Search the RudderStack Profiles documentation and return the best-matching pages with snippets.

    Covers identity stitching, id types, entity vars, input vars, feature tables, LTV and propensity models,
    warehouse connections, siteconfig.yaml, the pb CLI, project setup, permissions, cohorts and troubleshooting.
    """
    terms = set(_terms(query))
    if not terms:
        raise ToolError("The query has no searchable keywords.")
    scored = []
    for doc in DOCS:
        title, body = Counter(_terms(doc["title"])), Counter(_terms(doc["body"]))
        # A title hit says far more about a page than a passing mention in the body.
        score = sum(3 * title[t] + body[t] for t in terms)
        if score:
            scored.append((score, doc))
    if not scored:
        return f"No documentation pages match '{query}'. Try broader keywords."
    scored.sort(key=lambda sd: -sd[0])
    out = []
    for rank, (score, doc) in enumerate(scored[:limit], 1):
        body = doc["body"]
        hits = [m.start() for t in terms for m in [re.search(re.escape(t), body, re.I)] if m]
        start = max(0, min(hits) - 60) if hits else 0
        snippet = (
            ("…" if start else "")
            + body[start : start + 260].strip()
            + ("…" if start + 260 < len(body) else "")
        )
        out.append(f"{rank}. {doc['title']} (docs/{doc['slug']}, score {score})\n   {snippet}")
    return f"Top {len(out)} of {len(scored)} matching pages for '{query}':\n\n" + "\n\n".join(out)


@tool
def get_existing_connections() -> str:
    """List the warehouse connections the user has already configured in ~/.pb/siteconfig.yaml.

    Shows each connection's name, warehouse type, targets and status, and which one is the default.
    """
    lines = [f"{len(CONNECTIONS)} connections configured in ~/.pb/siteconfig.yaml:"]
    for c in CONNECTIONS:
        default = " [default]" if c["default"] else ""
        lines.append(
            f"- {c['name']}{default} ({c['type']}): {c['details']}; "
            f"targets: {', '.join(c['targets'])}; status: {c['status']}"
        )
    return "\n".join(lines)


@tool
def profiles_workflow_guide(
    goal: Annotated[
        str,
        Field(
            description="What the user wants to do, e.g. 'setup project', 'ltv model', "
            "'identity graph' or 'feature table'."
        ),
    ],
) -> str:
    """Return a step-by-step guide for a common Profiles task.

    Known goals: setup project, identity graph, feature table, ltv model. An unrecognised goal returns
    the list of known goals.
    """
    wanted = goal.lower()
    # Longest matching alias wins, so "ltv model" beats the generic "project".
    best, best_len = None, 0
    for name, guide in GUIDES.items():
        for alias in [name, *guide["aliases"]]:
            if alias in wanted and len(alias) > best_len:
                best, best_len = name, len(alias)
    if best is None:
        return f"No guide for '{goal}'. Known goals: {', '.join(GUIDES)}."
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(GUIDES[best]["steps"], 1))
    return f"Guide: {best}\n\n{steps}"


def _check_connection(connection: str) -> None:
    known = {c["name"]: c for c in CONNECTIONS}
    if connection in ("default", "snowflake_prod"):
        return
    if connection in known:
        raise ToolError(
            f"Connection '{connection}' is configured but not reachable from this environment; "
            "only the default connection 'snowflake_prod' can be browsed."
        )
    raise ToolError(
        f"Unknown connection '{connection}'. Configured: {', '.join(known)} (or 'default')."
    )


@tool
def list_warehouse_tables(
    connection: Annotated[
        str, Field(description="Connection name from get_existing_connections, or 'default'.")
    ] = "default",
    schema: Annotated[
        str | None, Field(description="Only list tables in this schema; all schemas if omitted.")
    ] = None,
) -> str:
    """List the tables in the user's warehouse, with row and column counts.

    Use describe_table for a table's columns and run_sql_query to read data.
    """
    _check_connection(connection)
    if schema is not None and schema.lower() != SCHEMA:
        raise ToolError(f"Schema '{schema}' not found. Available schemas: {SCHEMA}.")
    with connect_ro() as conn:
        rows = []
        for name in table_names(conn):
            count = conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
            ncols = len(conn.execute(f'PRAGMA table_info("{name}")').fetchall())
            rows.append((f"{SCHEMA}.{name}", count, ncols))
    return "Connection snowflake_prod\n\n" + format_table(["table", "rows", "columns"], rows)


@tool
def describe_table(
    table: Annotated[
        str,
        Field(
            description="Table name, optionally schema-qualified, e.g. 'orders' or "
            "'rudder_events.orders'."
        ),
    ],
) -> str:
    """Describe a warehouse table: its columns, types, row count and two sample rows."""
    with connect_ro() as conn:
        name = resolve_table(conn, table)
        cols = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
        count = conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
        cur = conn.execute(f'SELECT * FROM "{name}" LIMIT 2')
        sample = cur.fetchall()
    col_rows = [
        (c[1], c[2], "NOT NULL" if c[3] or c[5] else "", "PK" if c[5] else "") for c in cols
    ]
    return (
        f"{SCHEMA}.{name}: {count} rows, {len(cols)} columns\n\n"
        + format_table(["column", "type", "nullable", "key"], col_rows)
        + "\n\nSample rows:\n"
        + format_table([c[1] for c in cols], sample)
    )


@tool
def run_sql_query(
    sql: Annotated[
        str,
        Field(
            description="A single read-only SELECT (or WITH ... SELECT) statement in SQLite "
            "syntax; tables may be written as rudder_events.<table>."
        ),
    ],
    limit: Annotated[
        int, Field(description=f"Maximum rows to return (1-{MAX_ROWS}).", ge=1, le=MAX_ROWS)
    ] = 50,
) -> str:
    """Run a read-only SQL query against the user's warehouse and return the rows as a text table.

    Only one SELECT/WITH statement is accepted; anything that writes is refused.
    Tables: users, identifies, tracks, pages, orders (schema rudder_events).
    """
    statement = check_read_only(sql)
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    with connect_ro() as conn:
        # A runaway query (e.g. an unbounded recursive CTE) is interrupted instead of hanging the server.
        conn.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
        try:
            cur = conn.execute(statement)
            rows = cur.fetchmany(limit + 1)
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise ToolError(f"Query cancelled after {QUERY_TIMEOUT_S:.0f}s.") from exc
            raise ToolError(f"SQL error: {exc}") from exc
        except (sqlite3.Error, sqlite3.Warning) as exc:
            raise ToolError(f"SQL error: {exc}") from exc
        columns = [d[0] for d in cur.description or []]
    if not columns:
        raise ToolError("The statement returned no result set.")
    more = len(rows) > limit
    rows = rows[:limit]
    footer = f"\n\n{len(rows)} row(s)" + (f" (truncated at limit={limit})" if more else "")
    return format_table(columns, rows) + footer


@tool
def get_profile(
    user_id: Annotated[
        str,
        Field(
            description="The customer's user_id (e.g. 'u_1001'); an email or "
            "anonymous_id is resolved to its user_id."
        ),
    ],
) -> str:
    """Get the stitched customer profile for one user: identity, all linked devices/anonymous ids,
    activity (events and pages, including those before sign-up) and order history with revenue.
    """
    with connect_ro() as conn:
        key = user_id.strip()
        row = conn.execute(
            "SELECT user_id FROM users WHERE user_id = ? OR lower(email) = lower(?) "
            "UNION SELECT user_id FROM identifies WHERE anonymous_id = ? OR lower(email) = lower(?)",
            (key, key, key, key),
        ).fetchone()
        if row is None:
            raise ToolError(
                f"No customer found for '{user_id}'. Try a user_id such as u_1001 or an email."
            )
        uid = row[0]
        user = conn.execute(
            "SELECT email, first_name, last_name, country, plan, created_at "
            "FROM users WHERE user_id = ?",
            (uid,),
        ).fetchone()
        ids = conn.execute(
            "SELECT anonymous_id, context_device_type FROM identifies WHERE user_id = ? "
            "ORDER BY timestamp",
            (uid,),
        ).fetchall()
        anon = [a for a, _ in ids]
        marks = ",".join("?" * len(anon)) or "NULL"
        # Stitching: events count if they carry the user_id or any anonymous_id linked to it.
        events = conn.execute(
            f"SELECT event, timestamp FROM tracks WHERE user_id = ? OR anonymous_id IN ({marks}) "
            "ORDER BY timestamp",
            (uid, *anon),
        ).fetchall()
        pages = conn.execute(
            f"SELECT path FROM pages WHERE user_id = ? OR anonymous_id IN ({marks}) ORDER BY timestamp",
            (uid, *anon),
        ).fetchall()
        orders = conn.execute(
            "SELECT order_id, status, currency, total, created_at FROM orders "
            "WHERE user_id = ? ORDER BY created_at",
            (uid,),
        ).fetchall()

    email, first, last, country, plan, created = user
    done = [o for o in orders if o[1] == "completed"]
    revenue = Counter()
    for o in done:
        revenue[o[2]] += o[3]
    lines = [
        f"Profile {uid}: {first} {last} <{email}>, {country}, plan={plan}, customer since {created[:10]}",
        f"Linked identities: {len(ids)} anonymous id(s) - "
        + ", ".join(f"{a} ({d})" for a, d in ids),
        f"Activity: {len(events)} events, {len(pages)} page views"
        + (f", first seen {events[0][1][:10]}, last seen {events[-1][1][:10]}" if events else ""),
        "Top events: "
        + (
            ", ".join(f"{e} x{n}" for e, n in Counter(e for e, _ in events).most_common(3))
            or "none"
        ),
        f"Orders: {len(orders)} total, {len(done)} completed; lifetime revenue: "
        + (", ".join(f"{v:.2f} {c}" for c, v in revenue.items()) or "0"),
    ]
    lines += [f"  - {o[0]} {o[4][:10]} {o[1]} {o[3]:.2f} {o[2]}" for o in orders]
    return "\n".join(lines)


def save_note(
    title: Annotated[
        str,
        Field(
            description="The note's title; a note with this title is replaced.",
            min_length=1,
            max_length=200,
        ),
    ],
    text: Annotated[str, Field(description="The note's text.", max_length=10_000)],
) -> str:
    """Save a note in the user's Profiles workspace (for example a summary of a finding or a plan),
    replacing any earlier note with the same title.

    This changes the workspace: use it only when the user asks to save or record something.
    """
    with sqlite3.connect(NOTES_DB) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS notes (title TEXT PRIMARY KEY, text TEXT NOT NULL, "
            "saved_at TEXT NOT NULL)"
        )
        replaced = (
            conn.execute("SELECT 1 FROM notes WHERE title = ?", (title,)).fetchone() is not None
        )
        conn.execute("INSERT OR REPLACE INTO notes VALUES (?, ?, datetime('now'))", (title, text))
    conn.close()
    return f"{'Replaced' if replaced else 'Saved'} the note {title!r} ({len(text)} characters)."


mcp.add_tool(
    save_note,
    description=inspect.cleandoc(save_note.__doc__ or ""),
    annotations=CHANGES_STATE,
    structured_output=False,
)


def main() -> None:
    parser = argparse.ArgumentParser(description="Example RudderStack Profiles MCP server.")
    parser.add_argument(
        "--http", action="store_true", help="serve streamable HTTP (at /mcp) instead of stdio"
    )
    parser.add_argument(
        "--sse", action="store_true", help="serve the legacy HTTP+SSE transport (at /sse)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    if args.http:
        mcp.run(transport="streamable-http", host=args.host, port=args.port)
    elif args.sse:
        mcp.run(transport="sse", host=args.host, port=args.port)
    else:
        mcp.run()


if __name__ == "__main__":
    main()
