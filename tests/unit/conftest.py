"""Unit-test fixtures: the test LLM server, the action runner, the policy engine."""
from llm_fixtures import llm_server, no_llm_environment, policy_engine, run_plan  # noqa: F401  pylint: disable=unused-import
