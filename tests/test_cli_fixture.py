"""The `cli` fixture (tests/conftest.py), the one way the tests run the evaluator: what a run gives
back, and its one policy (an exception the CLI did not turn into an exit code, or a traceback
printed on either stream, fails the test that ran it)."""

from __future__ import annotations

import json
import sys

import click
import pytest
from conftest import EXAMPLE_SERVER, Ran, first_prompt, invoke, spawn
from fake_anthropic import ScriptedAnthropic, reply, text


def test_a_run_gives_its_exit_code_and_both_streams(cli):
    ran = cli("--schema")
    code, stdout, stderr = ran
    assert (code, stderr) == (0, "") and ran.exit_code == 0
    assert json.loads(stdout)["title"] == "Claude tool-use evaluator results"
    assert ran.output == stdout and ran[0] == 0 and ran[1:] == (stdout, stderr)


def test_a_refusal_is_an_exit_code_not_an_exception(cli):
    code, stdout, stderr = cli("-q", "hi", "--runs", "3")
    assert code == 2 and stdout == "" and stderr.startswith("error: ")


def test_in_process_and_as_a_process_the_evaluator_says_the_same(cli):
    here, there = cli("--schema"), cli.process("--schema", timeout=120)
    assert isinstance(there, Ran) and there.exit_code == here.exit_code == 0
    assert json.loads(there.stdout) == json.loads(here.stdout)
    refused = cli.process("-q", "hi", "--runs", "3", timeout=120)
    assert refused.exit_code == 2 and refused.stderr == cli("-q", "hi", "--runs", "3").stderr


def test_an_exception_the_cli_lets_out_is_raised_as_itself():
    @click.command()
    def broken() -> None:
        raise LookupError("the command's own bug")

    with pytest.raises(LookupError, match="the command's own bug"):
        invoke(command=broken)


def test_a_printed_traceback_fails_the_run_unless_the_test_means_to_see_it():
    @click.command()
    def quotes() -> None:
        click.echo("Traceback (most recent call last):\n  a server's crash", err=True)

    with pytest.raises(AssertionError, match="printed a traceback"):
        invoke(command=quotes)
    assert "a server's crash" in invoke(command=quotes, traceback_ok=True).stderr
    crash = ["-c", "raise SystemExit('Traceback (most recent call last): quoted')"]
    with pytest.raises(AssertionError, match="printed a traceback"):
        spawn(program=[sys.executable, *crash])
    assert spawn(program=[sys.executable, *crash], traceback_ok=True).exit_code == 1


def test_api_points_the_run_at_a_scripted_server_the_test_made(cli, no_api_key):
    with ScriptedAnthropic(responder=lambda body: reply(text("Hello."))) as api:
        ran = cli("-q", "hi", "--server-module", EXAMPLE_SERVER, "--json", api=api)
    assert ran.exit_code == 0, ran.output
    assert [first_prompt(body) for body in api.message_requests] == ["hi"]
    assert json.loads(ran.stdout)["results"][0]["agent_reasoning"] == "Hello."
