"""The package's pytest fixtures as the README shows them to agent-lightning users, in a suite of their own."""

from __future__ import annotations

import pytest

from tests.test_pytest_plugin import readme_examples, run_suite


def test_the_readme_agent_lightning_example_passes_in_a_users_suite(pytester: pytest.Pytester) -> None:
    agent_lightning = readme_examples()[2]
    assert "from lightning_store.agentlightning import LightningStore" in agent_lightning
    run_suite(pytester, agent_lightning).assert_outcomes(passed=1)
