# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils.llm_client with the real openai client against tests/llm_server.py over HTTP.

What the server received (path, query, headers) is read from the server's own records,
so every assertion about the wire is made from outside the client.
"""
from __future__ import annotations

import sys
import time
import types

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import (
    LLMClient,
    LLMError,
    resolve_settings,
)
from llm_server import LLMServer, plan_content

MESSAGES = [{"role": "system", "content": "plan"}, {"role": "user", "content": "Service: nginx\nFailure: down"}]
SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}
ANSWER = {"content": plan_content("nginx stopped", ["service nginx start"])}
KEY = "sk-test-NOT-A-REAL-KEY-4242"
AZURE_KEY = "azure-test-key-NOT-REAL-77"
# A server-side answer long enough that dripping it takes minutes.
SLOW_ANSWER = {"content": plan_content("x" * 400, ["service nginx start"])}


def settings(**task):
    return resolve_settings(task, env={}, ini={})


def auth_headers(server: LLMServer, index: int = -1) -> dict:
    headers = server.requests[index]["headers"]
    return {k: v for k, v in headers.items() if k in ("authorization", "api-key")}


# ---------------------------------------------------------------- deadlines


def test_a_drip_feeding_server_is_cut_off_at_the_request_deadline(llm_server):
    # One byte every 0.4 s: no read ever waits long enough for the client's own (per read) timeout.
    llm_server.queue(dict(SLOW_ANSWER, drip=0.4))
    client = LLMClient(settings(base_url=llm_server.url, model="m", timeout=2, max_retries=0))
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, SCHEMA)
    elapsed = time.monotonic() - started
    assert caught.value.kind == "deadline"
    assert "2 s request timeout" in str(caught.value) and "still sending" in str(caught.value)
    assert 1.9 <= elapsed < 3.5, elapsed
    assert client.usage.requests == 1


def test_dripped_headers_are_cut_off_too(llm_server):
    llm_server.queue(dict(SLOW_ANSWER, drip=0.3, drip_headers=True))
    client = LLMClient(settings(base_url=llm_server.url, model="m", timeout=1.5, max_retries=0))
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, SCHEMA)
    assert caught.value.kind == "deadline"
    assert time.monotonic() - started < 3.0


def test_the_planning_deadline_bounds_retries_and_backoff(llm_server):
    llm_server.default = dict(SLOW_ANSWER, drip=0.3)
    client = LLMClient(settings(base_url=llm_server.url, model="m", timeout=1, deadline=2.5, max_retries=10))
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, SCHEMA)
    elapsed = time.monotonic() - started
    assert caught.value.kind == "deadline"
    assert "2.5 s LLM deadline" in str(caught.value)
    assert elapsed < 2.5 + 1.0, elapsed
    assert 2 <= client.usage.requests <= 3   # retried within the budget, never the ten retries asked for
    assert client.remaining() <= 0


def test_the_deadline_covers_several_completions_of_one_client(llm_server):
    llm_server.default = dict(ANSWER, delay=0.6)
    client = LLMClient(settings(base_url=llm_server.url, model="m", timeout=5, deadline=1.5, max_retries=0))
    client.complete(MESSAGES, SCHEMA)
    client.complete(MESSAGES, SCHEMA)
    with pytest.raises(LLMError) as caught:   # the third would end past the budget
        client.complete(MESSAGES, SCHEMA)
    assert caught.value.kind == "deadline"


def test_a_silent_server_is_a_timeout_not_a_deadline(llm_server):
    llm_server.queue(dict(ANSWER, delay=3))
    client = LLMClient(settings(base_url=llm_server.url, model="m", timeout=0.5, max_retries=0))
    with pytest.raises(LLMError) as caught:
        client.complete(MESSAGES, SCHEMA)
    assert caught.value.kind == "timeout"


def test_a_retry_after_the_cut_off_gets_the_answer(llm_server):
    llm_server.queue(dict(SLOW_ANSWER, drip=0.3), ANSWER)
    client = LLMClient(settings(base_url=llm_server.url, model="m", timeout=1, max_retries=1), sleep=lambda s: None)
    reply = client.complete(MESSAGES, SCHEMA)
    assert "service nginx start" in reply.content
    assert client.usage.requests == 2


def test_the_planner_reports_the_deadline_and_goes_on(run_plan, llm_server):
    llm_server.default = dict(SLOW_ANSWER, drip=0.5)
    args = {"service": "nginx", "error": "GET / answers 502 Bad Gateway", "evidence": {"status": "running"},
            "llm": {"base_url": llm_server.url, "model": "m", "timeout": 1, "deadline": 2, "max_retries": 3},
            "fallback_restart": True}
    started = time.monotonic()
    result = run_plan(args)
    assert time.monotonic() - started < 6
    assert result["llm"]["error"] == "deadline"
    assert "deadline" in result["llm"]["error_message"]
    assert result["source"] == "fallback"
    assert "LLM deadline" in result["msg"]


# ---------------------------------------------------------------- keyless and keys


def test_keyless_endpoint_sends_no_credential(llm_server):
    llm_server.queue(ANSWER)
    conf = settings(base_url=llm_server.url)          # no key, no model: discovered
    assert conf.auth == "none" and conf.configured
    client = LLMClient(conf)
    reply = client.complete(MESSAGES, SCHEMA)
    assert "service nginx start" in reply.content
    assert [r["path"] for r in llm_server.requests] == ["/v1/models", "/v1/chat/completions"]
    assert auth_headers(llm_server, 0) == {} and auth_headers(llm_server, 1) == {}


def test_auth_none_ignores_a_key_from_the_environment(llm_server):
    llm_server.queue(ANSWER)
    conf = resolve_settings({"base_url": llm_server.url, "model": "m", "auth": "none"},
                            env={"OPENAI_API_KEY": KEY}, ini={})
    LLMClient(conf).complete(MESSAGES, SCHEMA)
    assert auth_headers(llm_server) == {}
    assert KEY not in repr(conf) and KEY not in str(conf.public())


def test_api_key_is_sent_as_a_bearer_token(llm_server):
    llm_server.queue(ANSWER)
    LLMClient(settings(base_url=llm_server.url, model="m", api_key=KEY)).complete(MESSAGES, SCHEMA)
    assert auth_headers(llm_server) == {"authorization": f"Bearer {KEY}"}


# ---------------------------------------------------------------- Azure OpenAI


def test_azure_by_environment_only(llm_server):
    llm_server.queue(ANSWER)
    env = {"AZURE_OPENAI_ENDPOINT": llm_server.root_url, "AZURE_OPENAI_API_KEY": AZURE_KEY,
           "OPENAI_API_VERSION": "2024-10-21", "AZURE_OPENAI_DEPLOYMENT": "planner-prod",
           "OPENAI_API_KEY": KEY}   # a key for another endpoint must not be sent to Azure
    conf = resolve_settings({}, env=env, ini={})
    assert (conf.provider, conf.auth, conf.deployment) == ("azure", "api_key", "planner-prod")
    reply = LLMClient(conf).complete(MESSAGES, SCHEMA)
    assert "service nginx start" in reply.content
    request = llm_server.requests[-1]
    assert request["path"] == "/openai/deployments/planner-prod/chat/completions"
    assert request["query"] == {"api-version": "2024-10-21"}
    assert auth_headers(llm_server) == {"api-key": AZURE_KEY}
    assert request["body"]["model"] == "planner-prod"
    assert AZURE_KEY not in str(conf.public())


def test_azure_by_task_options(llm_server):
    llm_server.queue(ANSWER)
    conf = settings(provider="azure", base_url=llm_server.root_url + "/openai", api_key=AZURE_KEY,
                    api_version="2025-01-01-preview", deployment="gpt4o", model="gpt-4o")
    LLMClient(conf).complete(MESSAGES, SCHEMA)
    request = llm_server.requests[-1]
    assert request["path"] == "/openai/deployments/gpt4o/chat/completions"
    assert request["query"] == {"api-version": "2025-01-01-preview"}


def test_azure_full_deployment_url_is_used_as_given(llm_server):
    llm_server.queue(ANSWER)
    conf = settings(base_url=llm_server.root_url + "/gateway/openai/deployments/dep1", api_key=AZURE_KEY,
                    api_version="2024-10-21", model="dep1")
    LLMClient(conf).complete(MESSAGES, SCHEMA)
    assert llm_server.requests[-1]["path"] == "/gateway/openai/deployments/dep1/chat/completions"
    assert auth_headers(llm_server) == {"api-key": AZURE_KEY}


def test_azure_keyless_sends_no_credential(llm_server):
    llm_server.queue(ANSWER)
    conf = settings(base_url=llm_server.root_url, api_version="2024-10-21", deployment="d", auth="none")
    LLMClient(conf).complete(MESSAGES, SCHEMA)
    assert auth_headers(llm_server) == {}


def test_azure_host_name_selects_azure_and_needs_an_api_version():
    with pytest.raises(LLMError) as caught:
        settings(base_url="https://contoso-eu.openai.azure.com", api_key=AZURE_KEY)
    assert caught.value.kind == "not_configured"
    assert "OPENAI_API_VERSION" in str(caught.value)
    conf = settings(base_url="https://contoso-eu.openai.azure.com", api_key=AZURE_KEY, api_version="2024-10-21")
    assert conf.provider == "azure"


def test_azure_without_a_deployment_says_so(llm_server):
    conf = settings(base_url=llm_server.root_url, api_key=AZURE_KEY, api_version="2024-10-21")
    with pytest.raises(LLMError) as caught:
        LLMClient(conf).complete(MESSAGES, SCHEMA)
    assert caught.value.kind == "no_model" and "llm.deployment" in str(caught.value)
    assert llm_server.request_count == 0


def test_entra_id_without_azure_identity_is_a_clear_error(monkeypatch, llm_server):
    monkeypatch.setitem(sys.modules, "azure.identity", None)   # import fails as when it is not installed
    conf = settings(base_url=llm_server.root_url, api_version="2024-10-21", deployment="d")
    assert conf.auth == "entra_id"
    with pytest.raises(LLMError) as caught:
        LLMClient(conf)
    assert caught.value.kind == "not_configured"
    assert "azure-identity" in str(caught.value) and "AZURE_OPENAI_AD_TOKEN" in str(caught.value)


def test_entra_id_static_token_without_azure_identity(monkeypatch, llm_server):
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "entra-static-token")
    llm_server.queue(ANSWER)
    conf = settings(base_url=llm_server.root_url, api_version="2024-10-21", deployment="d", auth="entra_id")
    LLMClient(conf).complete(MESSAGES, SCHEMA)
    assert auth_headers(llm_server) == {"authorization": "Bearer entra-static-token"}


def test_entra_id_token_provider_from_azure_identity(monkeypatch, llm_server):
    """azure-identity is not installed here: a stand-in with its two names checks the wiring."""
    issued = []

    class DefaultAzureCredential:
        pass

    def get_bearer_token_provider(credential, scope):
        assert isinstance(credential, DefaultAzureCredential)
        assert scope == "https://cognitiveservices.azure.com/.default"

        def provider():
            issued.append(f"entra-token-{len(issued) + 1}")
            return issued[-1]
        return provider

    identity = types.ModuleType("azure.identity")
    identity.DefaultAzureCredential = DefaultAzureCredential
    identity.get_bearer_token_provider = get_bearer_token_provider
    monkeypatch.setitem(sys.modules, "azure", types.ModuleType("azure"))
    monkeypatch.setitem(sys.modules, "azure.identity", identity)
    llm_server.queue(ANSWER, ANSWER)
    client = LLMClient(settings(base_url=llm_server.root_url, api_version="2024-10-21", deployment="d"))
    client.complete(MESSAGES, SCHEMA)
    client.complete(MESSAGES, SCHEMA)
    # A token per request, from the provider (tokens expire; the provider refreshes them).
    assert [auth_headers(llm_server, i) for i in (0, 1)] == [
        {"authorization": "Bearer entra-token-1"}, {"authorization": "Bearer entra-token-2"}]


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize("task, problem", [
    ({"base_url": "not a url"}, "not an http:// or https:// URL"),
    ({"base_url": "ftp://llm.internal/v1"}, "not an http:// or https:// URL"),
    ({"base_url": "http://llm.internal:99999/v1"}, "not a usable URL"),
    ({"base_url": "http://x/v1", "deadline": 0}, "llm.deadline"),
    ({"base_url": "http://x/v1", "timeout": -1}, "llm.timeout"),
    ({"base_url": "http://x/v1", "provider": "bedrock"}, "llm.provider"),
    ({"base_url": "http://x/v1", "auth": "kerberos"}, "llm.auth"),
    ({"base_url": "http://x/v1", "auth": "entra_id"}, "for Azure OpenAI"),
    ({"base_url": "http://x/v1", "auth": "api_key"}, "no key is set"),
    ({"base_url": "http://x/v1", "max_tokens": 0}, "llm.max_tokens"),
])
def test_bad_settings_are_named(task, problem):
    with pytest.raises(LLMError) as caught:
        settings(**task)
    assert problem in str(caught.value)


def test_settings_from_ansible_cfg_section(tmp_path, monkeypatch):
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import read_ini_settings

    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[sentinel_remediation]\nllm_base_url = https://res.openai.azure.com\nllm_api_version = 2024-10-21\n"
                   "llm_deployment = plan\nllm_deadline = 45\nllm_api_key_env = MY_AZURE_KEY\n")
    monkeypatch.setenv("MY_AZURE_KEY", AZURE_KEY)
    conf = resolve_settings({}, env={}, ini=read_ini_settings(str(cfg)))
    assert (conf.provider, conf.deployment, conf.deadline, conf.auth) == ("azure", "plan", 45.0, "api_key")
    assert conf.origin["deadline"] == "ini"


def test_error_kind_and_message_are_available_to_callers(llm_server):
    llm_server.queue({"status": 401})
    with pytest.raises(LLMError) as caught:
        LLMClient(settings(base_url=llm_server.url, model="m", api_key=KEY)).complete(MESSAGES, SCHEMA)
    assert caught.value.as_dict() == {"error": "auth",
                                      "error_message": "the LLM endpoint refused the credentials (HTTP 401)"}
