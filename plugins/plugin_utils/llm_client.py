# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Talking to any OpenAI-compatible chat endpoint, or Azure OpenAI, with the ``openai`` client.

Settings come from, first found wins: the task's ``llm`` option, the environment, the
``[sentinel_remediation]`` section of the active ansible.cfg (``llm_base_url``,
``llm_model``, ``llm_api_key_env``, ``llm_timeout``, ...), then defaults. The environment
variables are ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``OPENAI_MODEL``, ``OPENAI_API_VERSION``
and, for Azure OpenAI, ``AZURE_OPENAI_ENDPOINT``, ``AZURE_OPENAI_API_KEY`` and
``AZURE_OPENAI_DEPLOYMENT`` (the Azure names are read first for an Azure endpoint).

Endpoints (``provider``): ``openai`` is any OpenAI-compatible server (the OpenAI API, vLLM,
Ollama, llama.cpp, a gateway); ``azure`` is Azure OpenAI through ``openai.AzureOpenAI``
(``api-version`` query parameter, ``/openai/deployments/<deployment>`` routes, the key in
the ``api-key`` header, or a Microsoft Entra ID token). ``auto`` picks Azure when an API
version or a deployment is set, when the endpoint is an Azure OpenAI host, or when only
``AZURE_OPENAI_ENDPOINT`` names an endpoint.

Authentication (``auth``): ``api_key`` sends the key; ``none`` sends no credential at all
(keyless local servers: no Authorization or api-key header on any request); ``entra_id``
(Azure) asks ``azure-identity``'s default credential chain for a token on every request
when that package is importable, else uses a static ``AZURE_OPENAI_AD_TOKEN``; ``auto`` is
``api_key`` when a key is known, else ``entra_id`` for Azure and ``none`` for a server
given by URL.

Deadlines: ``timeout`` bounds one HTTP request from start to last byte, whatever the
server's pacing (a server that drip-feeds its answer is cut off there), and ``deadline``
bounds everything one client does: one planning step's requests, retries, back-offs,
re-asks and format fallbacks. The ``openai`` client's own timeout is per read, so each
request runs in a worker thread that the caller stops waiting for at the limit; the
connection is then closed and the client rebuilt. A request cut off this way is an
``LLMError`` of kind ``deadline``; a server silent for ``timeout`` seconds is ``timeout``.

Retries are ours, not the client's (the client is built with ``max_retries=0``): the
client honours any Retry-After up to two minutes, while a planner in the middle of a
play must give up sooner and say so.  We retry connection errors, timeouts, cut-off
answers, 429 and 5xx up to ``max_retries`` times, wait what Retry-After asks when it is at
most ``retry_after_max`` seconds and fits in the deadline (else stop at once with
``rate_limited``), and back off 0.5 s, 1 s, 2 s... (at most 4 s) otherwise.  Every failure
becomes an ``LLMError`` with a ``kind``; nothing here raises anything else.
"""
from __future__ import annotations

import configparser
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ansible_collections.sentinel.remediation.plugins.plugin_utils.requirements import missing_package

DEFAULTS = {
    "provider": "auto",
    "base_url": "",
    "api_key": "",
    "auth": "auto",
    "model": "",
    "deployment": "",
    "api_version": "",
    "temperature": 0.0,
    "timeout": 30.0,
    "deadline": 120.0,
    "max_retries": 2,
    "retry_after_max": 20.0,
    "max_tokens": None,
    "response_format": "auto",
}
# Environment variables per setting, first set wins; for an Azure endpoint the AZURE_ ones
# are read first (AZURE_OPENAI_DEPLOYMENT is ours; the rest are the openai package's names).
ENV_VARS = {
    "base_url": ("OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT"),
    "api_key": ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"),
    "model": ("OPENAI_MODEL",),
    "api_version": ("OPENAI_API_VERSION",),
    "deployment": ("AZURE_OPENAI_DEPLOYMENT",),
}
INI_SECTION = "sentinel_remediation"
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
PROVIDERS = ("auto", "openai", "azure")
AUTH_MODES = ("auto", "api_key", "none", "entra_id")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
AZURE_HOST_SUFFIXES = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
# How long past a request's limit the worker thread is given before the request counts as
# cut off: a silent server's own read timeout fires first and is reported as `timeout`.
DEADLINE_GRACE = 0.25
# The client's constructor insists on a credential; with auth `none` this value stays in
# memory only: every request explicitly omits the Authorization and api-key headers.
_KEYLESS_PLACEHOLDER = "sentinel-keyless-no-credential-sent"


class LLMError(Exception):
    """A failed exchange with the LLM.

    ``kind``: not_configured | connection | timeout | deadline | rate_limited | server_error |
    bad_response | auth | not_found | bad_request | no_model | client_error.
    """

    def __init__(self, kind: str, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after

    def as_dict(self) -> dict:
        """``{"error": kind, "error_message": message}`` as the planner's result carries them."""
        return {"error": self.kind, "error_message": str(self)}


@dataclass
class LLMSettings:
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    model: str = ""
    temperature: float = 0.0
    timeout: float = 30.0
    max_retries: int = 2
    retry_after_max: float = 20.0
    max_tokens: int | None = None
    response_format: str = "auto"
    origin: dict = field(default_factory=dict)  # setting -> task | env | ini | default
    provider: str = "openai"      # resolved: openai | azure
    auth: str = "none"            # resolved: api_key | none | entra_id
    api_version: str = ""
    deployment: str = ""
    deadline: float = 120.0

    @property
    def configured(self) -> bool:
        """An endpoint is configured when a base URL or an API key is known."""
        return bool(self.base_url or self.api_key)

    def public(self) -> dict:
        """The settings safe to show in a result (never the key)."""
        return {
            "provider": self.provider,
            "base_url": self.base_url or ("(OpenAI default)" if self.api_key else ""),
            "model": self.model,
            "deployment": self.deployment,
            "api_version": self.api_version,
            "auth": self.auth,
            "api_key_set": bool(self.api_key),
            "temperature": self.temperature,
            "timeout": self.timeout,
            "deadline": self.deadline,
            "max_retries": self.max_retries,
            "response_format": self.response_format,
            "origin": dict(self.origin),
        }


def read_ini_settings(path: str | None) -> dict:
    """``[sentinel_remediation]`` of an ansible.cfg as ``{setting: value}`` (``llm_`` prefix dropped).

    ``llm_api_key_env`` names an environment variable that holds the key (the key itself
    does not belong in a config file).
    """
    if not path or not os.path.isfile(path):
        return {}
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return {}
    if not parser.has_section(INI_SECTION):
        return {}
    result = {}
    for key, value in parser.items(INI_SECTION):
        if not key.startswith("llm_"):
            continue
        name = key[4:]
        if name == "api_key_env":
            if value and os.environ.get(value):
                result["api_key"] = os.environ[value]
        elif name in DEFAULTS and name != "api_key":
            result[name] = value
    return result


def active_ansible_cfg() -> str | None:
    """The ansible.cfg ansible-core uses in this process, if any."""
    try:
        from ansible import constants as C

        return getattr(C, "CONFIG_FILE", None)
    except Exception:  # pragma: no cover - ansible always importable in a controller
        return None


def is_azure_host(url: str) -> bool:
    """Whether ``url`` points at an Azure OpenAI resource (by its host name)."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    return host.endswith(AZURE_HOST_SUFFIXES)


def _pick(name: str, task: Mapping, env: Mapping, ini: Mapping, env_names: Sequence[str]) -> tuple[object, str]:
    if name in task:
        return task[name], "task"
    for env_name in env_names:
        if env.get(env_name):
            return env[env_name], "env"
    if ini.get(name) not in (None, ""):
        return ini[name], "ini"
    return DEFAULTS[name], "default"


def _choose_provider(requested: str, task: Mapping, env: Mapping, ini: Mapping) -> str:
    if requested != "auto":
        return requested
    if any(_pick(name, task, env, ini, ENV_VARS[name])[0] for name in ("api_version", "deployment")):
        return "azure"
    url, origin = _pick("base_url", task, env, ini, ("OPENAI_BASE_URL",))
    if url and is_azure_host(str(url)):
        return "azure"
    if origin == "default" and env.get("AZURE_OPENAI_ENDPOINT"):
        return "azure"
    return "openai"


def _check_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  - raises ValueError on a bad port
    except ValueError as exc:
        raise LLMError("client_error", f"llm.base_url {url!r} is not a usable URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LLMError("client_error", f"llm.base_url {url!r} is not an http:// or https:// URL with a host name")


def resolve_settings(task: Mapping | None = None, env: Mapping | None = None, ini: Mapping | None = None) -> LLMSettings:
    """Merge task options, environment and ansible.cfg into ``LLMSettings``; ``LLMError`` on a bad value."""
    task = {k: v for k, v in (task or {}).items() if v is not None and v != ""}
    env = os.environ if env is None else env
    ini = read_ini_settings(active_ansible_cfg()) if ini is None else ini
    requested, provider_origin = _pick("provider", task, env, ini, ())
    requested = str(requested).strip().lower()
    if requested not in PROVIDERS:
        raise LLMError("client_error", f"llm.provider must be one of {', '.join(PROVIDERS)}, got {requested!r}")
    provider = _choose_provider(requested, task, env, ini)
    values, origin = {}, {}
    for name in DEFAULTS:
        env_names = ENV_VARS.get(name, ())
        if provider == "azure":  # the Azure names first for an Azure endpoint
            env_names = tuple(sorted(env_names, key=lambda n: not n.startswith("AZURE_")))
        values[name], origin[name] = _pick(name, task, env, ini, env_names)
    origin["provider"] = provider_origin
    try:
        settings = LLMSettings(
            provider=provider,
            base_url=str(values["base_url"] or "").strip(),
            api_key=str(values["api_key"] or ""),
            auth=str(values["auth"] or "auto").strip().lower(),
            model=str(values["model"] or "").strip(),
            deployment=str(values["deployment"] or "").strip(),
            api_version=str(values["api_version"] or "").strip(),
            temperature=float(values["temperature"]),
            timeout=float(values["timeout"]),
            deadline=float(values["deadline"]),
            max_retries=int(values["max_retries"]),
            retry_after_max=float(values["retry_after_max"]),
            max_tokens=int(values["max_tokens"]) if values["max_tokens"] not in (None, "") else None,
            response_format=str(values["response_format"]),
            origin={k: v for k, v in origin.items() if v != "default"},
        )
    except (TypeError, ValueError) as exc:
        raise LLMError("client_error", f"bad LLM setting: {exc}") from exc
    if settings.response_format not in ("auto",) + RESPONSE_FORMATS:
        raise LLMError("client_error", f"llm.response_format must be auto, {', '.join(RESPONSE_FORMATS)}")
    if settings.max_retries < 0 or not settings.timeout > 0 or not settings.deadline > 0:
        raise LLMError("client_error", "llm.max_retries must be >= 0, llm.timeout and llm.deadline > 0")
    if not all(math.isfinite(v) for v in (settings.timeout, settings.deadline, settings.retry_after_max)):
        raise LLMError("client_error", "llm.timeout, llm.deadline and llm.retry_after_max must be finite numbers")
    if settings.max_tokens is not None and settings.max_tokens < 1:
        raise LLMError("client_error", "llm.max_tokens must be at least 1")
    if settings.auth not in AUTH_MODES:
        raise LLMError("client_error", f"llm.auth must be one of {', '.join(AUTH_MODES)}, got {settings.auth!r}")
    if settings.base_url:
        _check_url(settings.base_url)
    if settings.auth == "auto":
        if settings.api_key:
            settings.auth = "api_key"
        else:
            settings.auth = "entra_id" if provider == "azure" else "none"
    if settings.auth == "api_key" and not settings.api_key and (settings.base_url or provider == "azure"):
        raise LLMError("not_configured", "llm.auth is api_key but no key is set (llm.api_key, "
                                         + ("AZURE_OPENAI_API_KEY, " if provider == "azure" else "")
                                         + "OPENAI_API_KEY or llm_api_key_env in ansible.cfg)")
    if settings.auth == "entra_id" and provider != "azure":
        raise LLMError("client_error", "llm.auth entra_id is for Azure OpenAI (llm.provider azure)")
    if settings.auth == "none":
        settings.api_key = ""   # keyless: a key from the environment is not sent either
    if provider == "azure":
        if not settings.base_url:
            raise LLMError("not_configured", "Azure OpenAI needs an endpoint: llm.base_url or AZURE_OPENAI_ENDPOINT "
                                             "(https://<resource>.openai.azure.com)")
        if not settings.api_version:
            raise LLMError("not_configured", f"Azure OpenAI endpoint {settings.base_url} needs an API version: "
                                             "llm.api_version or OPENAI_API_VERSION (e.g. 2024-10-21)")
    return settings


@dataclass
class Reply:
    content: str | None
    refusal: str | None
    finish_reason: str | None
    response_format: str
    prompt_tokens: int
    completion_tokens: int
    estimated: bool


@dataclass
class Usage:
    calls: int = 0            # completions asked for (one per planning attempt, plus format fallbacks)
    requests: int = 0         # HTTP requests, retries included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    estimated: bool = False   # True when a server gave no usage and tokens were estimated

    def as_dict(self) -> dict:
        return {"calls": self.calls, "requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 3),
                "tokens_estimated": self.estimated}


def _retry_after(exc) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            delay = float(value) / divisor
        except ValueError:
            continue
        if math.isfinite(delay) and delay >= 0:
            return delay
    return None


def _entra_token_provider() -> tuple[Callable[[], str] | None, str | None]:
    """``(token provider, static token)`` for Microsoft Entra ID; ``LLMError`` when neither is available.

    The provider comes from ``azure-identity`` (``DefaultAzureCredential``: environment,
    workload or managed identity, Azure CLI...) when that package is importable; without
    it, a token in ``AZURE_OPENAI_AD_TOKEN`` is used as it is.
    """
    try:
        from azure.identity import DefaultAzureCredential, get_bearer_token_provider
    except ImportError:
        token = os.environ.get("AZURE_OPENAI_AD_TOKEN", "")
        if token:
            return None, token
        raise LLMError("not_configured", "llm.auth entra_id needs the azure-identity Python package on the "
                                         "controller (pip install azure-identity) or a token in "
                                         "AZURE_OPENAI_AD_TOKEN; or set an API key (llm.api_key, "
                                         "AZURE_OPENAI_API_KEY)") from None
    try:
        return get_bearer_token_provider(DefaultAzureCredential(), ENTRA_SCOPE), None
    except Exception as exc:  # the credential chain raises its own types
        raise LLMError("auth", f"no Microsoft Entra ID credential: {type(exc).__name__}: {exc}") from exc


class LLMClient:
    """One planner's connection to one endpoint; counts usage over all its calls.

    The ``deadline`` clock starts when the client is built: everything this client does
    (model discovery, requests, retries, back-offs) ends within ``settings.deadline``
    seconds, and each request within ``settings.timeout`` seconds.
    """

    def __init__(self, settings: LLMSettings, sleep: Callable[[float], None] = time.sleep,
                 estimate: Callable[[Sequence[Mapping]], int] | None = None):
        if not settings.configured:
            raise LLMError("not_configured", "no LLM is configured (llm.base_url / OPENAI_BASE_URL, "
                                             "llm.api_key / OPENAI_API_KEY, or AZURE_OPENAI_ENDPOINT)")
        try:
            import openai
        except ImportError as exc:
            raise LLMError("client_error", missing_package("openai")) from exc
        self._openai = openai
        self.settings = settings
        self.usage = Usage()
        self.notes: list[str] = []
        self._sleep = sleep
        self._estimate = estimate or (lambda messages: sum(len(str(m.get("content", ""))) for m in messages) // 4)
        fmt = settings.response_format
        self.response_format = "json_schema" if fmt == "auto" else fmt
        self._started = time.monotonic()
        self._extra_headers: dict = {}
        if settings.auth == "none":
            omit = openai.Omit()
            self._extra_headers = {"Authorization": omit, "api-key": omit}
        self._client_kwargs = self._client_options()
        self._client = self._new_client()
        self.model = settings.model or (settings.deployment if settings.provider == "azure" else "")

    def _client_options(self) -> dict:
        settings = self.settings
        options: dict = {"timeout": settings.timeout, "max_retries": 0}
        if settings.provider != "azure":
            options["base_url"] = settings.base_url or None
            options["api_key"] = settings.api_key if settings.auth == "api_key" else _KEYLESS_PLACEHOLDER
            return options
        options["api_version"] = settings.api_version
        path = urlsplit(settings.base_url).path.strip("/")
        if path in ("", "openai"):
            # A resource endpoint: the client adds /openai/deployments/<deployment or model>.
            options["azure_endpoint"] = settings.base_url.rstrip("/").removesuffix("/openai")
            if settings.deployment:
                options["azure_deployment"] = settings.deployment
        else:
            options["base_url"] = settings.base_url  # a full deployment URL or a gateway path, used as given
        if settings.auth == "api_key":
            options["api_key"] = settings.api_key
        elif settings.auth == "entra_id":
            provider, token = _entra_token_provider()
            if provider is not None:
                options["azure_ad_token_provider"] = provider
            else:
                options["azure_ad_token"] = token
        else:
            options["api_key"] = _KEYLESS_PLACEHOLDER
        return options

    def _new_client(self):
        openai = self._openai
        factory = openai.AzureOpenAI if self.settings.provider == "azure" else openai.OpenAI
        try:
            return factory(**self._client_kwargs)
        except (openai.OpenAIError, ValueError, TypeError) as exc:
            raise LLMError("client_error", f"cannot set up the {self.settings.provider} client: {exc}") from exc

    # -- deadlines --------------------------------------------------------------------
    def remaining(self) -> float:
        """Seconds left of this client's ``deadline``."""
        return self.settings.deadline - (time.monotonic() - self._started)

    def _bounded(self, call: Callable[[float], object]) -> object:
        """``call(limit)`` in a worker thread; the caller waits at most ``limit`` (plus a grace).

        ``limit`` is the request timeout or what is left of the deadline, whichever is
        shorter; ``call`` passes it on as the client's (per read) timeout, so a silent
        server ends with the client's own timeout error, and a server that keeps sending
        slowly ends here, with kind ``deadline``.
        """
        remaining = self.remaining()
        if remaining <= 0:
            raise LLMError("deadline", f"the {self.settings.deadline:g} s LLM deadline has passed")
        limit = min(self.settings.timeout, remaining)
        box: dict = {}

        def work() -> None:
            try:
                box["value"] = call(limit)
            except BaseException as exc:  # handed to the caller's thread  # pylint: disable=broad-exception-caught
                box["error"] = exc

        worker = threading.Thread(target=work, name="sentinel-llm-request", daemon=True)
        worker.start()
        worker.join(limit + DEADLINE_GRACE)
        if worker.is_alive():
            self._abandon()
            what = (f"the {self.settings.timeout:g} s request timeout" if limit >= self.settings.timeout
                    else f"the {self.settings.deadline:g} s LLM deadline")
            raise LLMError("deadline", f"no complete answer within {what}: the endpoint was still sending")
        if "error" in box:
            if limit < self.settings.timeout and isinstance(box["error"], self._openai.APITimeoutError):
                raise LLMError("deadline", f"no answer before the {self.settings.deadline:g} s LLM deadline")
            raise box["error"]
        return box["value"]

    def _abandon(self) -> None:
        """Stop using a client whose request overran: close its connections, start a new one."""
        stale = self._client
        self._client = self._new_client()
        threading.Thread(target=_close_quietly, args=(stale,), name="sentinel-llm-close", daemon=True).start()

    # -- transport with bounded retries ---------------------------------------------
    def _with_retries(self, call: Callable[[float], object]) -> object:
        openai = self._openai
        attempt = 0
        while True:
            attempt += 1
            self.usage.requests += 1
            delay = min(0.5 * 2 ** (attempt - 1), 4.0)
            try:
                return self._bounded(call)
            except LLMError as exc:
                if exc.kind != "deadline" or self.remaining() <= 0:
                    raise
                error, cause = exc, None   # one request overran its timeout: retried like a timeout
            except openai.APITimeoutError as exc:
                error = LLMError("timeout", f"no answer within {self.settings.timeout:g} s")
                cause = exc
            except openai.APIConnectionError as exc:
                error = LLMError("connection", f"cannot connect to {self.settings.base_url or 'the OpenAI API'}: "
                                               f"{exc.__cause__ or exc}")
                cause = exc
            except openai.RateLimitError as exc:
                retry_after = _retry_after(exc)
                error = LLMError("rate_limited", "the LLM endpoint is rate limiting (429)"
                                 + (f", Retry-After {retry_after:g} s" if retry_after is not None else ""),
                                 status=429, retry_after=retry_after)
                if retry_after is not None and retry_after > self.settings.retry_after_max:
                    error.args = (f"{error} exceeds the {self.settings.retry_after_max:g} s we wait",)
                    raise error from exc
                if retry_after is not None:
                    delay = retry_after
                cause = exc
            except openai.APIStatusError as exc:
                status = exc.status_code
                detail = _error_detail(exc)
                if status >= 500:
                    error = LLMError("server_error", f"the LLM endpoint failed with HTTP {status}: {detail}",
                                     status=status)
                    cause = exc
                elif status in (401, 403):
                    raise LLMError("auth", f"the LLM endpoint refused the credentials (HTTP {status})",
                                   status=status) from exc
                elif status == 404:
                    raise LLMError("not_found", f"HTTP 404 from the LLM endpoint (wrong base_url, model or "
                                                f"deployment {self.model!r}?): {detail}", status=status) from exc
                elif status in (408, 409):
                    error = LLMError("server_error", f"HTTP {status}: {detail}", status=status)
                    cause = exc
                else:
                    raise LLMError("bad_request", f"HTTP {status}: {detail}", status=status) from exc
            except openai.OpenAIError as exc:
                raise LLMError("client_error", f"{type(exc).__name__}: {exc}") from exc
            except ValueError as exc:
                # The client parses the HTTP body itself: a cut-off or non-JSON body (a proxy's
                # error page, a dropped connection) surfaces as a JSONDecodeError. Retryable.
                error = LLMError("bad_response", f"the LLM endpoint sent a body that is not a JSON chat "
                                                 f"completion: {exc}")
                cause = exc
            except Exception as exc:  # anything else the transport raised is still an LLM outcome
                raise LLMError("client_error", f"{type(exc).__name__}: {exc}") from exc
            if attempt > self.settings.max_retries:
                raise error from cause
            if delay >= self.remaining():
                error.args = (f"{error}; no time left to retry within the {self.settings.deadline:g} s LLM deadline",)
                raise error from cause
            self._sleep(delay)

    def _pick_model(self) -> str:
        if self.model:
            return self.model
        if self.settings.provider == "azure":
            raise LLMError("no_model", "Azure OpenAI needs the deployment name: llm.deployment (or llm.model, "
                                       "AZURE_OPENAI_DEPLOYMENT)")
        if not self.settings.base_url:
            self.model = DEFAULT_OPENAI_MODEL
            return self.model
        models = self._with_retries(lambda limit: self._client.models.list(
            timeout=limit, extra_headers=self._extra_headers or None))
        data = list(getattr(models, "data", None) or [])
        if not data:
            raise LLMError("no_model", "no llm.model set and the endpoint lists no model")
        self.model = str(data[0].id)
        self.notes.append(f"no model configured; using {self.model!r}, the first the endpoint lists")
        return self.model

    # -- one completion ---------------------------------------------------------------
    def complete(self, messages: Sequence[Mapping], schema: Mapping) -> Reply:
        """Ask once; degrade the response format on a 400/422 about it (json_schema ->
        json_object -> none) and remember the degraded format for later calls."""
        model = self._pick_model()
        while True:
            kwargs = {"model": model, "messages": list(messages), "temperature": self.settings.temperature}
            if self.settings.max_tokens:
                kwargs["max_tokens"] = self.settings.max_tokens
            if self.response_format == "json_schema":
                kwargs["response_format"] = {"type": "json_schema",
                                             "json_schema": {"name": "remediation_plan", "strict": True,
                                                             "schema": dict(schema)}}
            elif self.response_format == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
            self.usage.calls += 1
            started = time.monotonic()
            try:
                response = self._with_retries(lambda limit: self._client.chat.completions.create(
                    **kwargs, timeout=limit, extra_headers=self._extra_headers or None))
            except LLMError as exc:
                if exc.kind == "bad_request" and exc.status in (400, 422) and self.response_format != "none":
                    following = RESPONSE_FORMATS[RESPONSE_FORMATS.index(self.response_format) + 1]
                    self.notes.append(f"the endpoint rejected response_format {self.response_format} "
                                      f"({exc}); retrying with {following}")
                    self.response_format = following
                    continue
                raise
            finally:
                self.usage.seconds += time.monotonic() - started
            return self._reply(response, messages)

    def _reply(self, response, messages) -> Reply:
        choices = getattr(response, "choices", None) or []
        choice = choices[0] if choices else None
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        refusal = getattr(message, "refusal", None)
        usage = getattr(response, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        estimated = not isinstance(prompt_tokens, int) or not isinstance(completion_tokens, int)
        if estimated:
            prompt_tokens = self._estimate(messages)
            completion_tokens = (len(content or "") + 3) // 4
            self.usage.estimated = True
        self.usage.prompt_tokens += prompt_tokens
        self.usage.completion_tokens += completion_tokens
        return Reply(content=content if isinstance(content, str) or content is None else str(content),
                     refusal=refusal if isinstance(refusal, str) and refusal else None,
                     finish_reason=getattr(choice, "finish_reason", None),
                     response_format=self.response_format,
                     prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, estimated=estimated)

    def close(self) -> None:
        _close_quietly(self._client)


def _close_quietly(client) -> None:
    try:
        client.close()
    except Exception:  # closing is best effort  # pylint: disable=broad-exception-caught
        pass


def _error_detail(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return str(inner.get("message") or inner)[:300]
        return str(inner)[:300]
    return str(getattr(exc, "message", exc))[:300]
