# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Talking to any OpenAI-compatible chat endpoint with the ``openai`` client.

Settings come from, first found wins: the task's ``llm`` option, the environment
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``OPENAI_MODEL``), the ``[sentinel_remediation]``
section of the active ansible.cfg (``llm_base_url``, ``llm_model``, ``llm_api_key_env``,
``llm_timeout``, ...), then defaults.

Retries are ours, not the client's (the client is built with ``max_retries=0``): the
client honours any Retry-After up to two minutes, while a planner in the middle of a
play must give up sooner and say so.  We retry connection errors, timeouts, 429 and
5xx up to ``max_retries`` times, wait what Retry-After asks when it is at most
``retry_after_max`` seconds (else stop at once with ``rate_limited``), and back off
0.5 s, 1 s, 2 s... (at most 4 s) otherwise.  Every failure becomes an ``LLMError``
with a ``kind``; nothing here raises anything else.
"""
from __future__ import annotations

import configparser
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

DEFAULTS = {
    "base_url": "",
    "api_key": "",
    "model": "",
    "temperature": 0.0,
    "timeout": 30.0,
    "max_retries": 2,
    "retry_after_max": 20.0,
    "max_tokens": None,
    "response_format": "auto",
}
ENV_VARS = {"base_url": "OPENAI_BASE_URL", "api_key": "OPENAI_API_KEY", "model": "OPENAI_MODEL"}
INI_SECTION = "sentinel_remediation"
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


class LLMError(Exception):
    """A failed exchange with the LLM.

    ``kind``: not_configured | connection | timeout | rate_limited | server_error |
    bad_response | auth | not_found | bad_request | no_model | client_error.
    """

    def __init__(self, kind: str, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after


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

    @property
    def configured(self) -> bool:
        """An endpoint is configured when a base URL or an API key is known."""
        return bool(self.base_url or self.api_key)

    def public(self) -> dict:
        """The settings safe to show in a result (never the key)."""
        return {
            "base_url": self.base_url or ("(OpenAI default)" if self.api_key else ""),
            "model": self.model,
            "api_key_set": bool(self.api_key),
            "temperature": self.temperature,
            "timeout": self.timeout,
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


def resolve_settings(task: Mapping | None = None, env: Mapping | None = None, ini: Mapping | None = None) -> LLMSettings:
    """Merge task options, environment and ansible.cfg into ``LLMSettings``."""
    task = {k: v for k, v in (task or {}).items() if v is not None and v != ""}
    env = os.environ if env is None else env
    ini = read_ini_settings(active_ansible_cfg()) if ini is None else ini
    values, origin = {}, {}
    for name, default in DEFAULTS.items():
        if name in task:
            values[name], origin[name] = task[name], "task"
        elif name in ENV_VARS and env.get(ENV_VARS[name]):
            values[name], origin[name] = env[ENV_VARS[name]], "env"
        elif ini.get(name) not in (None, ""):
            values[name], origin[name] = ini[name], "ini"
        else:
            values[name], origin[name] = default, "default"
    try:
        settings = LLMSettings(
            base_url=str(values["base_url"] or "").strip(),
            api_key=str(values["api_key"] or ""),
            model=str(values["model"] or "").strip(),
            temperature=float(values["temperature"]),
            timeout=float(values["timeout"]),
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
    if settings.max_retries < 0 or settings.timeout <= 0:
        raise LLMError("client_error", "llm.max_retries must be >= 0 and llm.timeout > 0")
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


class LLMClient:
    """One planner's connection to one endpoint; counts usage over all its calls."""

    def __init__(self, settings: LLMSettings, sleep: Callable[[float], None] = time.sleep,
                 estimate: Callable[[Sequence[Mapping]], int] | None = None):
        if not settings.configured:
            raise LLMError("not_configured", "no LLM is configured (llm.base_url / OPENAI_BASE_URL, "
                                             "llm.api_key / OPENAI_API_KEY)")
        try:
            import openai
        except ImportError as exc:
            raise LLMError("client_error", "the openai Python package is not installed on the controller") from exc
        self._openai = openai
        self.settings = settings
        self.usage = Usage()
        self.notes: list[str] = []
        self._sleep = sleep
        self._estimate = estimate or (lambda messages: sum(len(str(m.get("content", ""))) for m in messages) // 4)
        fmt = settings.response_format
        self.response_format = "json_schema" if fmt == "auto" else fmt
        self._client = openai.OpenAI(
            base_url=settings.base_url or None,
            # Local servers (vLLM, Ollama, llama.cpp) accept any key; the client wants one.
            api_key=settings.api_key or "not-needed",
            timeout=settings.timeout,
            max_retries=0,
        )
        self.model = settings.model

    # -- transport with bounded retries ---------------------------------------------
    def _with_retries(self, call: Callable[[], object]) -> object:
        openai = self._openai
        attempt = 0
        while True:
            attempt += 1
            self.usage.requests += 1
            delay = min(0.5 * 2 ** (attempt - 1), 4.0)
            try:
                return call()
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
                    raise LLMError("not_found", f"HTTP 404 from the LLM endpoint (wrong base_url or model "
                                                f"{self.model!r}?): {detail}", status=status) from exc
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
            if attempt > self.settings.max_retries:
                raise error from cause
            self._sleep(delay)

    def _pick_model(self) -> str:
        if self.model:
            return self.model
        if not self.settings.base_url:
            self.model = DEFAULT_OPENAI_MODEL
            return self.model
        models = self._with_retries(self._client.models.list)
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
                response = self._with_retries(lambda: self._client.chat.completions.create(**kwargs))
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
        try:
            self._client.close()
        except Exception:  # closing is best effort
            pass


def _error_detail(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return str(inner.get("message") or inner)[:300]
        return str(inner)[:300]
    return str(getattr(exc, "message", exc))[:300]
