"""API tokens fail closed: a mistyped mode or an empty setting refuses to
start, naming the entry and never the secret."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from swh_like_scheduler.api import Access, parse_tokens
from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.exceptions import InvalidInput

SECRET = "s3cret-s3cret-s3cret"


@pytest.mark.parametrize("entry", [f"{SECRET}:RO", f"{SECRET}:read", f"{SECRET}:", SECRET])
def test_a_mode_other_than_rw_or_ro_is_refused(entry: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_tokens(f"{'w' * 20}:rw,{entry}")
    assert "token 2" in info.value.message
    assert SECRET not in info.value.message


def test_modes_are_read_after_trimming() -> None:
    (token,) = parse_tokens(f" {SECRET} : ro ")
    assert token.access is Access.READ and token.secret == SECRET.encode()
    with pytest.raises(InvalidInput, match="names no token"):
        parse_tokens(" , ")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SWH_SCHEDULER_API_TOKENS": ""}, "SWH_SCHEDULER_API_TOKENS: is set but empty"),
        ({"SWH_SCHEDULER_API_TOKENS": f"{SECRET}:RO"}, "token 1 has the mode 'RO'"),
    ],
)
def test_rpc_serve_refuses_to_start_with_bad_tokens(
    tmp_path: object, env: dict[str, str], expected: str
) -> None:
    result = CliRunner(env=env).invoke(
        swh,
        ["scheduler", "--db-url", f"sqlite:///{tmp_path}/db.sqlite", "rpc-serve", "--port", "0"],
    )
    assert result.exit_code != 0
    assert expected in result.output, result.output
    assert SECRET not in result.output
