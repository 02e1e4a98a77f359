# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ``llm`` option (the LLM endpoint) of the plan and heal actions: documented once here,
and read as their argument spec by plugin_utils/_argspec.llm_option_spec."""
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  llm:
    description:
      - The LLM endpoint, OpenAI-compatible or Azure OpenAI. Unset keys come from the environment and ansible.cfg.
    type: dict
    default: {}
    suboptions:
      provider:
        description:
          - V(openai) is any OpenAI-compatible server (the OpenAI API, vLLM, Ollama, llama.cpp, a gateway).
          - V(azure) is Azure OpenAI (C(openai.AzureOpenAI)) with O(llm.api_version), O(llm.deployment) and the key
            in the C(api-key) header.
          - V(auto) (the default) picks V(azure) when an API version or a deployment is set, when the endpoint is an
            Azure OpenAI host (C(*.openai.azure.com), C(*.cognitiveservices.azure.com)), or when only
            E(AZURE_OPENAI_ENDPOINT) names an endpoint; else V(openai). Also C(llm_provider) in ansible.cfg.
        type: str
        choices: [auto, openai, azure]
      base_url:
        description:
          - The API base, with C(/v1) (U(http://localhost:11434/v1) for Ollama,
            U(http://localhost:8000/v1) for vLLM). Empty means the OpenAI API.
          - For Azure OpenAI the resource endpoint (U(https://RESOURCE.openai.azure.com)); a URL with a path
            (a full deployment URL, a gateway) is used as given.
          - Defaults to E(OPENAI_BASE_URL), then E(AZURE_OPENAI_ENDPOINT) (the other way round for Azure), then
            C(llm_base_url) in ansible.cfg. It must be an C(http://) or C(https://) URL.
        type: str
      api_key:
        description:
          - The API key. Defaults to E(OPENAI_API_KEY), then E(AZURE_OPENAI_API_KEY) (the other way round for Azure),
            then the variable named by C(llm_api_key_env) in ansible.cfg.
          - Sent as a bearer token (C(Authorization) header) to OpenAI-compatible servers and as the C(api-key)
            header to Azure.
          - Never returned nor logged.
        type: str
      auth:
        description:
          - V(api_key) sends O(llm.api_key). V(none) sends no credential at all (keyless vLLM, Ollama, llama.cpp; a key
            in the environment is ignored). V(entra_id) (Azure) sends a Microsoft Entra ID token, from the
            C(azure-identity) package's default credential chain when it is installed, else from
            E(AZURE_OPENAI_AD_TOKEN); without either the task fails with a message saying so.
          - V(auto) (the default) is V(api_key) when a key is set, else V(entra_id) for Azure and V(none) otherwise.
        type: str
        choices: [auto, api_key, none, entra_id]
      api_version:
        description:
          - The Azure OpenAI API version (the C(api-version) query parameter), e.g. V(2024-10-21).
          - Defaults to E(OPENAI_API_VERSION), then C(llm_api_version). Required for Azure.
        type: str
      deployment:
        description:
          - The Azure OpenAI deployment name (requests go to C(/openai/deployments/DEPLOYMENT/chat/completions)).
          - Defaults to E(AZURE_OPENAI_DEPLOYMENT), then C(llm_deployment), then O(llm.model).
        type: str
      model:
        description:
          - The model name. Defaults to E(OPENAI_MODEL), then C(llm_model); when still unset the first
            model the endpoint lists is used (C(gpt-4o-mini) for the OpenAI API, the deployment for Azure).
        type: str
      temperature:
        description: Sampling temperature (default V(0)).
        type: float
      timeout:
        description:
          - Seconds one request may take from start to last byte (default V(30)), whatever the server's pacing;
            a server that sends nothing for that long ends the request with error V(timeout), one still sending
            with error V(deadline). A request cut off is retried like a timeout.
        type: float
      deadline:
        description:
          - Seconds one planning step may spend on the LLM in total (default V(120)), that is every request,
            retry, back-off, re-ask and format fallback of this task. When it passes, planning goes on without
            the LLM and the C(llm.error) it returns is V(deadline).
        type: float
      max_retries:
        description:
          - Retries of one request after a connection error, timeout, cut-off answer, 429 or 5xx (default V(2)),
            with backoff; a 429 waits what its Retry-After asks, up to O(llm.retry_after_max).
        type: int
      retry_after_max:
        description: The longest Retry-After in seconds that is honoured (default V(20)); longer ends the LLM attempt.
        type: float
      max_tokens:
        description: Upper bound on the answer's tokens (sent as C(max_tokens)); unset sends none.
        type: int
      response_format:
        description:
          - C(auto) starts with C(json_schema) and falls back to C(json_object) then C(none) when the
            server rejects it with HTTP 400/422; the other values start at that step.
        type: str
        choices: [auto, json_schema, json_object, none]
"""
