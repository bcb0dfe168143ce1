"""Models, defaults, limits and prices for the evaluator: the numbers in one place."""

# ----------------------------------------------------------------------------- models
DEFAULT_MODEL = "claude-sonnet-5-5"  # the tool-use evaluation model
FAST_MODEL = "claude-haiku-5-5"  # simulated user, test generation
DEFAULT_USER_MODEL = FAST_MODEL
DEFAULT_GENERATION_MODEL = FAST_MODEL
DEFAULT_TRIGGER_MODEL = "haiku"  # an alias the Claude Code CLI resolves itself
DEFAULT_JUDGE_MODEL = FAST_MODEL  # the LLM judge of rubrics and `judge` answers
STRONGEST_MODEL = "claude-opus-5-5"  # the most capable model named here
# The model ids a dry run names when a given one is unknown (a typo, most often).
KNOWN_MODELS = (
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
    "claude-opus-4-5",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "claude-opus-4-1",
)
DEFAULT_OPTIMIZER_MODEL = STRONGEST_MODEL  # --optimize: proposes new descriptions

# ----------------------------------------------------------------------------- conversation defaults
DEFAULT_MAX_TOKENS = 4096
DEFAULT_TEMPERATURE = None  # None: leave it to the API's default
DEFAULT_MAX_TURNS = 10  # model calls per conversation
DEFAULT_QA_MAX_TURNS = 40  # --qa: a question may take dozens of tool calls
QA_NOTE_CHARS = 4_000  # --qa: Claude's <summary> / <feedback> kept per run
DEFAULT_ITERATIONS = 1
DEFAULT_CASE_THRESHOLD = 1.0  # a case passes when this share of its runs pass
DEFAULT_CONCURRENCY = 4
# threads that score and journal finished runs: a finisher per worker up to this many (a --batch
# round finishes a thousand conversations at once; a thread each would cost ~20 KB of stack apiece)
MAX_FINISHER_THREADS = 16
DEFAULT_MAX_USER_TURNS = 5
# import tau2: a τ² task may take dozens of tool calls and user messages (τ²'s own cap is 200
# steps of either)
TAU2_MAX_TURNS = 100
TAU2_MAX_USER_TURNS = 30
TAU2_DOMAINS = ("airline", "retail")  # import tau2 --domain: the τ² domains with a package
DEFAULT_TAU2_DOMAIN = "airline"
TAU2_SPLITS = ("base", "train", "test")  # import tau2 --split: τ²'s task splits (base: every task)
DEFAULT_TAU2_SPLIT = "base"
IMPORT_SOURCES = ("bfcl", "tau2", "plugin-evals", "sessions")  # import: what it reads
EXPORT_FORMATS = ("claude-plugin-eval",)  # export: what it writes
# plugin: `claude -p` runs of a plugin's suite at once (claude plugin eval -j's 1 to 8), and the
# arms it runs (with-without: as claude plugin eval does; none: the arm with the plugin alone)
DEFAULT_PLUGIN_CONCURRENCY = 2
ABLATIONS = ("with-without", "none")
DEFAULT_ABLATION = "with-without"
MOCK_MODES = ("record", "off")  # plugin --mocks, as claude plugin eval's
DEFAULT_MOCKS = "record"  # a plugin's server with a mock is stood in for; one without, not started

# ----------------------------------------------------------------------------- limits and timeouts (seconds)
DEFAULT_TOOL_TIMEOUT = 60.0  # one MCP tool call
DEFAULT_CONNECT_TIMEOUT = 30.0  # starting an MCP server and its handshake
TOOL_CALLS_IN_FLIGHT = 32  # tool calls under way at once (all servers), however many runs are
DEFAULT_STOP_GRACE = 0.2  # a stdio server's time to exit after its stdin closes (then: SIGTERM)
SERVER_TERM_WAIT = 0.5  # after SIGTERM, before SIGKILL, for a stdio server's process group
DEFAULT_REQUEST_TIMEOUT = 600.0  # one model call, including the SDK's retries of it
DEFAULT_MAX_RETRIES = 5  # SDK retries; higher than its 2 because suites run long
DEFAULT_MAX_RESULT_CHARS = 20_000  # a tool result is cut to this many characters
STDERR_TAIL_CHARS = 2_000  # how much of a server's stderr an error quotes
TOOL_RESULT_PREVIEW_CHARS = 160  # a tool result's one-line view in the live terminal
HTML_TEXT_CHARS = 4_000  # --html: each message, argument list and tool result is cut to this
CLAUDE_TOOL_RESULT_CHARS = 2_000  # a `claude` run's tool result, as its results entry keeps it
PATTERN_TIME_LIMIT_MS = 1_000  # one text, for a pattern RE2 cannot take (Python's re, in a worker)
PATTERN_WORKER_START_SECONDS = 10.0  # that worker process must start within this
STOP_GRACE_SECONDS = 10.0  # the first stop signal: the run ends within this, else the process does

# ----------------------------------------------------------------------------- input limits (loaders refuse beyond these)
MAX_INPUT_FILE_BYTES = (
    10 * 1024 * 1024
)  # any input file: CSV, markdown test, conversation, config, SKILL.md, JSON
MAX_FRONTMATTER_BYTES = 64 * 1024  # one YAML frontmatter block
MAX_YAML_DEPTH = 32  # nesting of YAML collections in frontmatter
MAX_JSON_DEPTH = 64  # nesting of any JSON given (expected_args, eval sets, mcp config,
# results files): far below what hashing and scoring can walk
MAX_SKILL_COPY_BYTES = 50 * 1024 * 1024  # a skill folder, copied into every run's project

# ----------------------------------------------------------------------------- skill trigger runs
DEFAULT_TRIGGER_TIMEOUT = 30.0
DEFAULT_TEST_TIMEOUT = 600.0
DEFAULT_TRIGGER_MAX_TURNS = 3
DEFAULT_TRIGGER_RUNS = 3
DEFAULT_TRIGGER_THRESHOLD = 0.5
DEFAULT_CONCEPT_PASS_RATE = 0.7
DEFAULT_FUZZY_MATCH = 0.8
DEFAULT_GENERATED_QUERIES = 5
CLAUDE_CODE_ALIASES = {
    "haiku": "claude-haiku-5-5",
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-5-5",
}
CLAUDE_CODE_PREFIX_TOKENS = (
    18_000  # --dry-run: Claude Code's system prompt and tool definitions per call
)
TYPICAL_CLAUDE_QUERY_TOKENS = 600  # --dry-run: the query and the skill listing
TYPICAL_CLAUDE_RUN_CALLS = 2  # --dry-run: model calls of a typical trigger or test run

# ----------------------------------------------------------------------------- results
SCHEMA_VERSION = "2.0"  # 2.0: one document shape for every mode (cases, summary, passed)
PROJECT_FILE = "evaluator.yaml"  # the project file `python evaluator.py` runs when no mode is given
# Output that is not a terminal (CI logs, pipes) is laid out this wide, so a reason stays on its line.
LOG_WIDTH = 160

# ----------------------------------------------------------------------------- prices, USD per million tokens
# Keyed by model-id prefix; the longest matching prefix wins. Update when Anthropic's price list moves.
PRICES = {
    "claude-opus": {"input": 5.00, "output": 25.00, "cache_write": 6.25, "cache_read": 0.50},
    "claude-sonnet": {"input": 3.00, "output": 15.00, "cache_write": 3.75, "cache_read": 0.30},
    "claude-haiku": {"input": 1.00, "output": 5.00, "cache_write": 1.25, "cache_read": 0.10},
    "claude-3-5-haiku": {"input": 0.80, "output": 4.00, "cache_write": 1.00, "cache_read": 0.08},
    "claude-3-haiku": {"input": 0.25, "output": 1.25, "cache_write": 0.30, "cache_read": 0.03},
    "claude-opus-4-1": {"input": 15.00, "output": 75.00, "cache_write": 18.75, "cache_read": 1.50},
    "claude-opus-4-0": {"input": 15.00, "output": 75.00, "cache_write": 18.75, "cache_read": 1.50},
    "claude-opus-4-2025": {
        "input": 15.00,
        "output": 75.00,
        "cache_write": 18.75,
        "cache_read": 1.50,
    },
}
FALLBACK_PRICE = PRICES["claude-sonnet"]  # an unknown model is priced as Sonnet, and says so

# ----------------------------------------------------------------------------- simulated user
DEFAULT_USER_MAX_TOKENS = 1024  # one simulated user message

# ----------------------------------------------------------------------------- Claude Code CLI runs (skills)
CLAUDE_DISALLOWED_TOOLS = (
    "Bash",
    "Edit",
    "Write",
    "NotebookEdit",
    "WebFetch",
)  # nothing may change the machine
CLAUDE_MAX_OUTPUT_BYTES = 20_000_000  # stream-json kept per run
CLAUDE_STDERR_TAIL_CHARS = 1_000
WRITE_GUARD_MAX_ENTRIES = 20_000  # files fingerprinted per watched folder
CLAUDE_TMPDIR_MAX_CHARS = 60  # a run's TMPDIR longer than this moves to /tmp (sandbox socket paths)
END_DESCENDANTS_ROUNDS = 10  # looks for what a finished run left running (each round: kill, reap)
TASK_ALLOWABLE_TOOLS = (
    "Bash",
    "Edit",
    "Write",
    "NotebookEdit",
)  # --allow-tools: what a task run may be given
TASK_CONFIGURATIONS = (
    "with_skill",
    "without_skill",
    "old_skill",
)  # skill-creator's names, in report order
ARTIFACT_MAX_COPY_BYTES = (
    50_000_000  # --artifacts: a larger file is listed in the manifest, not copied
)
ARTIFACT_MAX_FILES = 2_000  # files of one run's project listed as artifacts
# Reading what a run leaves (and the input files it starts with), per phase: a file past a budget
# is listed by its size and why, never read (a 40 GB sparse file would be minutes of zeros)
ARTIFACT_MAX_HASH_BYTES = 256_000_000  # a larger file is not read (hashed or copied)
ARTIFACT_MAX_READ_BYTES = 1_000_000_000  # every file of one run's phase, in all
ARTIFACT_READ_SECONDS = 30.0  # one phase's reading time
ARTIFACT_SPARSE_MIN_BYTES = 1_000_000  # this large, with less than half of it on disk: sparse
ARTIFACT_TEXT_BYTES = 20_000  # a text artifact this small is shown to the judge inline
ARTIFACT_TEXT_TOTAL_CHARS = 40_000  # all inline artifact text of one judge call
TRANSCRIPT_SUMMARY_CHARS = 12_000  # a task run's transcript summary, kept and shown to the judge
DEFAULT_GENERATION_MAX_TOKENS = 4096
DEFAULT_GENERATED_TEST_TIMEOUT = 300.0
GENERATION_MAX_BODY_CHARS = 12_000  # SKILL.md body sent to the generation prompt

# ----------------------------------------------------------------------------- throughput
MAX_MODEL_CONCURRENCY = 64  # ceiling of model calls in flight; 429s lower it adaptively
ESTIMATED_OUTPUT_TOKENS = 300  # --dry-run: tokens Claude writes per call
ESTIMATED_TOKENS_PER_TURN = 400  # --dry-run: history growth per turn (tool call + result)
SUMMARY_TABLE_ROWS = 50  # terminal suite table: failures always, passes up to this
EXACT_QUANTILE_RUNS = 10_000  # latency p50/p95 exact up to this many runs, then from buckets
QUANTILE_BUCKET_RATIO = 1.02  # then: log-spaced buckets 2 % wide (a quantile within 1 %)

# ----------------------------------------------------------------------------- grading: the judge and state checks
DEFAULT_VERIFY_TIMEOUT = (
    60.0  # seconds one `verify` command may take (then its process group is killed)
)
VERIFY_OUTPUT_BYTES = 1_000_000  # stdout / stderr kept from one `verify` command
JUDGE_MAX_TOKENS = 1024  # the judge's one forced `grade` tool call
JUDGE_TOOL_CALLS = 40  # tool calls listed in the judge's compact trajectory
JUDGE_RESULT_CHARS = 300  # each tool result and argument list, cut to this for the judge
JUDGE_ANSWER_CHARS = 8_000  # the final answer, cut to this for the judge
ESTIMATED_JUDGE_TRAJECTORY_TOKENS = 600  # --dry-run: the answer and trajectory a judge call reads
ESTIMATED_JUDGE_OUTPUT_TOKENS = 150  # --dry-run: the judge's verdict

# ----------------------------------------------------------------------------- tools that change things
TOOL_POLICIES = (
    "live",
    "safe",
    "strict",
    "read-only",
)  # --tool-policy: which calls reach the real server
DEFAULT_TOOL_POLICY = "safe"  # tools annotated destructiveHint: true are not executed
HARNESSES = ("api", "claude-code")  # --harness: our Messages API loop, or the real `claude -p`
TOOL_SEARCH_VALUES = ("on", "off", "auto")  # --tool-search: Claude Code's ENABLE_TOOL_SEARCH
DEFAULT_HARNESS_TIMEOUT = 300.0  # seconds a `claude -p` run of a case may take
# --mcp-startup: whether `claude -p` waits for the suite's servers before its first request
# (wait: Claude Code's own one-shot behaviour) or sends it at once, as a session whose user types
# before a slow server has connected (no-wait: CLAUDE_CODE_MCP_STARTUP_WAIT_MS=0)
MCP_STARTUP_CHOICES = ("wait", "no-wait")
REPLAY_MISS_CHOICES = (
    "error",
    "live",
)  # --replay-miss: a call not in the cassette fails the case, or goes live
DEFAULT_REPLAY_MISS = "error"
CASSETTE_FORMAT = "claude-tool-eval cassette 1"  # the "format" of every --record file

# ----------------------------------------------------------------------------- the description optimizer (--optimize)
DEFAULT_HOLDOUT = 0.4  # share of the queries / cases held out as the test split
DEFAULT_SPLIT_SEED = 42  # --seed of the stratified split
DEFAULT_OPTIMIZE_ROUNDS = 5  # proposals asked of the optimizer model at most
DEFAULT_OPTIMIZE_RUNS = 3  # runs per query or case of every candidate
MAX_SKILL_DESCRIPTION_CHARS = 1024  # the Agent Skills limit of a SKILL.md description
MAX_TOOL_DESCRIPTION_CHARS = 10_000  # a proposed tool description longer than this is refused
OPTIMIZER_MAX_TOKENS = 4096  # the optimizer's one forced `propose` call
OPTIMIZER_BODY_CHARS = 6_000  # SKILL.md body shown to the optimizer
OPTIMIZER_FAILURES_SHOWN = 40  # train failures listed in one proposal request
ESTIMATED_OPTIMIZER_OUTPUT_TOKENS = 600  # --dry-run: tokens of one proposal

# ----------------------------------------------------------------------------- --batch: the Message Batches API
BATCH_PRICE_FACTOR = 0.5  # a batch request costs half the list price (input, output and cache)
BATCH_MAX_REQUESTS = 100_000  # requests one Message Batch may hold (the API's limit)
BATCH_MAX_BYTES = (
    200 * 1024 * 1024
)  # a batch's body, kept well under the API's 256 MB (more: another batch)
BATCH_CONVERSATIONS = 10_000  # conversations under way at once with --batch (without --concurrency)
BATCH_SETTLE_SECONDS = 2.0  # a round is sent once every live conversation waits for Claude, or
# once no new request came for this long (slow tools, verify commands)
BATCH_POLL_FIRST_SECONDS = 0.5  # the first look at a batch after creating it
BATCH_POLL_MAX_SECONDS = 60.0  # polls back off (x BATCH_POLL_GROWTH) up to this interval
BATCH_POLL_GROWTH = 1.5

# ----------------------------------------------------------------------------- secrets
PARTIAL_SECRET_CHARS = 12  # a run this long of a secret, where a text was cut, is masked too
RANDOM_SECRET_MIN_CHARS = 16  # letters and digits of a value that counts as a secret unnamed
RANDOM_SECRET_MIN_ENTROPY = 3.0  # bits per character of such a value

# ----------------------------------------------------------------------------- the crowded room: distractors and overlap
DEFAULT_DECOY_MODEL = FAST_MODEL  # writes lookalike:N decoys (one forced tool call per set)
DECOY_MAX_TOKENS = 8192  # the decoy writer's one forced `write_decoys` call
MAX_DECOYS = 200  # lookalike:N asks for at most this many decoys in one set
DECOYS_FORMAT = "claude-tool-eval decoys 1"  # the "format" of every --distractors-file
DISTRACTOR_SEARCH_DEPTH = 4  # folders deep a --distractors folder is searched for SKILL.md files
ESTIMATED_DECOY_TOKENS = 60  # --dry-run: a decoy's listing line (skills) or definition (tools)
DECOY_TOOL_TIMEOUT = 10.0  # seconds the in-process decoy server may take to answer a call
CONSOLIDATION_HINT_RATE = 0.2  # a pair is a consolidation hint when one takes this share of the
# other's runs (its positive queries' runs, or its expected calls)
OVERLAP_MIN_SIMILARITY = 0.08  # the lexical pre-filter: pairs below this word overlap are LOW
OVERLAP_JUDGED_PAIRS = 20  # the closest pairs above the filter that the judge reads
OVERLAP_MAX_TOKENS = 1024  # the judge's one forced `assess_overlap` call per pair
OVERLAP_QUERIES = 3  # confusing queries the judge is asked for per pair
ESTIMATED_OVERLAP_OUTPUT_TOKENS = 250  # --dry-run: the judge's verdict on one pair

# ----------------------------------------------------------------------------- the hostile room: red team, scan, pins
# redteam: attack classes are ATTACKS' rows (evaluator.py); --attacks picks classes or
# class:variant, each class's default variants run when only its name is given.
CANARY_TOOL = "send_report"  # the canary tool the proxy adds and answers itself (never forwarded)
CANARY_ADDRESS = "reports@attacker.example"  # where the injected instruction says to send it
CANARY_TOKEN_PREFIX = "CANARY-"  # the token planted in each attacked run's injection
SHADOW_SERVER = "shadow"  # the second server a shadowing attack adds beside the real ones
DEFAULT_VECTORS = ("ours",)  # --vectors: our own (prompts.REDTEAM_VECTORS); agentdojo: its package
AGENTDOJO_PACKAGE = "agentdojo"  # read, never imported: its attacks' templates, with `ast`
RUG_PULL_RELIST_SECONDS = 5.0  # a rug pull waits this long for the client to list the tools again
ESTIMATED_INJECTION_CALLS = 1  # --dry-run: the extra model call an attacked run may take
# scan: severities in order; --fail-on (exit 1) at or above this
SCAN_SEVERITIES = ("low", "medium", "high")
DEFAULT_SCAN_FAIL_ON = "medium"
SCAN_LONG_DESCRIPTION_CHARS = 2_000  # a description longer than this is reported (low)
SCAN_BLOB_MIN_CHARS = 40  # a base64 or hex run this long in a description is an encoded blob
SCAN_RESOURCES_READ = 50  # scan reads the contents of this many resources of a server at most
SCAN_RESOURCE_CHARS = 20_000  # and this much of each one's text
SCAN_JUDGE_DEFINITION_CHARS = 12_000  # scan --judge: the judge reads this much of a definition
SCAN_JUDGE_MAX_TOKENS = 512  # the judge's one forced `judge_definition` call per definition
ESTIMATED_SCAN_JUDGE_OUTPUT_TOKENS = 120  # --dry-run: the judge's verdict on one definition
SCAN_JUDGE_HIGH = 0.8  # a judged instruction this sure is high; SCAN_JUDGE_MEDIUM medium; else low
SCAN_JUDGE_MEDIUM = 0.5
PINS_FORMAT = "claude-tool-eval pins 1"  # the "format" of every --pin lock file
# ----------------------------------------------------------------------------- is the change real? statistics, run counts, the cache
DEFAULT_ALPHA = 0.05  # compare: a case is a regression or a fix only when significant at this
PLAN_POWER = 0.8  # plan, --dry-run: the chance of detecting a change of the size asked for
DEFAULT_DETECT_POINTS = 10.0  # plan: the smallest change worth detecting, in percentage points
PLAN_ASSUMED_RATE = 0.9  # plan / --dry-run without a results file: the pass rate assumed
BOOTSTRAP_RESAMPLES = 2_000  # compare: resamples of the cost and latency intervals
BOOTSTRAP_SEED = 1  # compare: the same files give the same intervals
AUTO_MIN_RUNS = 5  # -i auto / --runs auto: rounds every case runs before it may stop
AUTO_MAX_RUNS = 20  # -i auto / --runs auto: the cap; a case still undecided stops here
# -i / --runs (auto's MAX too) above this are refused without --allow-many-runs: -i 100000000000
# is a typo, and building its runs would spin for minutes before the first request.
MAX_RUNS_PER_CASE = 1000
AUTO_CONFIDENCE_Z = 1.959964  # -i auto: a case stops once its 95 % interval clears the threshold
CACHE_FORMAT = "claude-tool-eval cache 2"  # every entry of a --cache folder says this
# calibrate: a judge grader whose Cohen's kappa against people's labels is below this is flagged
# in every report that shows it until it is calibrated again (0.6: "substantial" agreement begins
# there on Landis & Koch's scale)
DEFAULT_MIN_KAPPA = 0.6
KAPPA_CONFIDENCE_Z = 1.959964  # calibrate: kappa's 95 % interval (large-sample standard error)
# calibrate keeps each grader's latest calibration here (in the folder it runs in); later runs in
# that folder flag the judge graders it holds below their floor
CALIBRATION_FILE = "evaluator-calibration.json"
CALIBRATION_FORMAT = "claude-tool-eval calibration 1"  # the "format" of the calibration file
LABEL_SHEET_PER_STRATUM = 3  # render --label-sheet: runs drawn per (case, grader, judge verdict)
LABEL_SHEET_SEED = 42  # render --label-sheet: the same results file gives the same sample
LABEL_SHEET_TRANSCRIPT_CHARS = 20_000  # a run's transcript on the label sheet, cut here
# The size bound of a --cache entry read back (a legitimate one, a Claude Code stream included,
# is far smaller): past it a miss with a warning, never read. Its nesting: MAX_JSON_DEPTH.
CACHE_ENTRY_MAX_BYTES = 32 * 1024 * 1024

# ----------------------------------------------------------------------------- GitHub Actions
GITHUB_ANNOTATIONS = 10  # `::error` lines a step prints (GitHub shows 10); a warning says more
ANNOTATION_REASONS = 5  # failure reasons an annotation lists (the step summary has them all)
STEP_SUMMARY_BYTES = 1_000_000  # GitHub refuses a step summary over 1 MiB: a bigger one is cut
PR_COMMENT_CASES = 30  # cases a pull-request comment lists per section (the report has them all)
PR_COMMENT_REASON_CHARS = 300  # a failure reason in the comment, cut here
