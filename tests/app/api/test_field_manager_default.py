"""The field manager a write without ?fieldManager= gets: the User-Agent up to its first '/'."""

from __future__ import annotations

import random

import pytest

from app.api.options import default_field_manager


def _reference(user_agent: str) -> str:
    """The rule spelled out: the agent's name, its unprintable characters dropped, 128 at most."""
    name = (user_agent or "unknown").split("/", 1)[0]
    return "".join(ch for ch in name if ch.isprintable())[:128] or "unknown"


@pytest.mark.parametrize(
    ("user_agent", "manager"),
    [
        ("kubectl/v1.37.0 (linux/amd64) kubernetes/abcdef", "kubectl"),
        ("", "unknown"),
        ("/v1", "unknown"),
        ("\x00\x01/v1", "unknown"),
        ("tab\there/1", "tabhere"),
        ("ünïcode-agent", "ünïcode-agent"),
        ("x" * 300, "x" * 128),
        ("\n" + "y" * 130, "y" * 128),
    ],
)
def test_default_field_manager(user_agent: str, manager: str) -> None:
    assert default_field_manager(user_agent) == manager


def test_default_field_manager_matches_the_rule_over_random_agents() -> None:
    rng = random.Random(44)
    alphabet = "ab/ \t\n\x00\x7f\u00a0\u200bé漢"
    for _ in range(3000):
        agent = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 140)))
        assert default_field_manager(agent) == _reference(agent)
