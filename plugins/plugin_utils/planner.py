# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner: from a failure to a small, policy-checked plan.  It never runs anything.

Order of sources: a remembered fix for the same signature -> the best matching runbook
-> the LLM (when configured and the backend allows it) -> the safe fallback
(``service <name> restart`` when the policy allows it) -> nothing, with a reason.
With backend ``llm`` the LLM comes before the runbook; with ``runbook`` it is never
asked.  A runbook that says ``escalate`` stops the search: no command, a human.

Every proposed command goes through the policy engine; commands it rejects and
commands that repeat a failed one are dropped with their reasons (LLM plans are
re-asked with those reasons a bounded number of times).
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text, redact_value
from ansible_collections.sentinel.remediation.plugins.plugin_utils import prompt as prompt_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import (
    LLMClient,
    LLMError,
    LLMSettings,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_parse import (
    PlanParseError,
    parse_plan,
    plan_schema,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.knowledge import load_knowledge, public_passage
from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import (
    PlaceholderError,
    gate_steps,
    match_runbooks,
    resolve_placeholders,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.signature import (
    failure_signature,
    key_facts,
    signature_basis,
)

BACKENDS = ("auto", "llm", "runbook")
# Lab/Debian service names whose init script has another name.
INIT_NAMES = {"redis": "redis-server", "sshd": "ssh", "crond": "cron"}
_VERDICT_KEYS = ("command", "verdict", "reasons", "argv", "display")


class PlannerError(ValueError):
    """Bad input the planner cannot work with (a bad policy, bad runbooks)."""


def _policy():
    # Imported late so that tests can stand in for the engine while it is written.
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy

    return policy


def normalise_command(command: str) -> str:
    """Whitespace collapsed, a leading sudo dropped: how failed commands are compared."""
    text = " ".join(str(command).split())
    return re.sub(r"^sudo\s+(?:-n\s+)?", "", text)


def _fix_commands(fix) -> tuple[list[str], str, str | None]:
    """(commands, diagnosis, signature) from one remembered fix in any of its shapes."""
    if isinstance(fix, str):
        return [fix], "", None
    if isinstance(fix, Mapping):
        commands = fix.get("commands")
        if commands is None and fix.get("command"):
            commands = [fix["command"]]
        texts = []
        for item in commands or []:
            if isinstance(item, Mapping):
                item = item.get("command")
            if isinstance(item, str) and item.strip():
                texts.append(item.strip())
        return texts, str(fix.get("diagnosis") or ""), fix.get("signature")
    return [], "", None


class Planner:
    """One planning run for one failure on one host."""

    def __init__(self, *, service: str, error: str = "", evidence=None, failed_commands: Sequence[str] = (),
                 successful_fixes: Sequence = (), host_tools: Mapping | None = None, policy: Mapping | None = None,
                 max_commands: int = 3, backend: str = "auto", max_attempts: int = 3, passages: int = 3,
                 runbook_dirs: Sequence[str] | None = None, docs_dirs: Sequence[str] | None = None,
                 hostnames: Iterable[str] = (),
                 llm_settings: LLMSettings | None = None, sleep: Callable[[float], None] = time.sleep):
        if backend not in BACKENDS:
            raise PlannerError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if max_commands < 1 or max_attempts < 1:
            raise PlannerError("max_commands and max_attempts must be at least 1")
        self.service = str(service).strip()
        # Redacted once, here: everything after this point (signature, prompt, result) sees
        # only redacted text.
        self.error = redact_text(error or "")
        self.evidence = redact_value(evidence) if evidence is not None else {}
        self.failed = [str(c) for c in failed_commands or [] if str(c).strip()]
        self._failed_keys = {normalise_command(c) for c in self.failed}
        self.fixes = list(successful_fixes or [])
        tools = host_tools or {}
        self.tools_present = sorted({str(t) for t in tools.get("present") or []})
        self.tools_absent = sorted({str(t) for t in tools.get("absent") or []})
        self.max_commands = int(max_commands)
        self.backend = backend
        self.max_attempts = int(max_attempts)
        self.passage_count = int(passages)
        self.hostnames = tuple(h for h in hostnames if h)
        self.settings = llm_settings
        self._sleep = sleep
        self.notes: list[str] = []
        self.dropped: list[dict] = []
        self.signature = failure_signature(self.service, self.error, self.evidence, self.hostnames)
        overrides = dict(policy or {})
        absent = list(overrides.get("absent_tools") or [])
        overrides["absent_tools"] = sorted(set(absent) | set(self.tools_absent))
        try:
            self.policy = _policy().load_policy(overrides)
        except ValueError as exc:  # PolicyError is a ValueError
            raise PlannerError(f"bad policy: {exc}") from exc
        try:
            # Bundled runbooks, then the operator's (adding or overriding), and the index over
            # them and the operator's documents: built once per content, then cached.
            self.knowledge = load_knowledge(runbook_dirs, docs_dirs)
        except ValueError as exc:  # RunbookError, KnowledgeError: they name the file and key
            raise PlannerError(str(exc)) from exc
        self.books = self.knowledge.runbooks
        self.llm = {"configured": bool(llm_settings and llm_settings.configured), "used": False, "calls": 0,
                    "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0,
                    "tokens_estimated": False, "attempts": 0, "error": None, "error_message": None,
                    "notes": []}
        if llm_settings is not None:
            self.llm.update({k: v for k, v in llm_settings.public().items() if k in ("base_url", "model",
                                                                                     "response_format")})

    # ------------------------------------------------------------------ checking
    def check(self, commands: Sequence[str], source: str) -> tuple[list[dict], list[dict]]:
        """Classify ``commands``; (usable, refused), each a verdict dict plus ``source``."""
        if not commands:
            return [], []
        verdicts = _policy().classify_many(list(commands), self.policy)
        usable, refused = [], []
        for command, verdict in zip(commands, verdicts):
            item = {key: verdict.get(key) for key in _VERDICT_KEYS}
            item["command"] = item["command"] or command
            item["reasons"] = list(item["reasons"] or [])
            if normalise_command(command) in self._failed_keys:
                item["verdict"] = "reject"
                item["argv"] = None
                item["reasons"].append("repeats a command that already failed on this host")
            item["source"] = source
            (refused if item["verdict"] == "reject" else usable).append(item)
        return usable, refused

    def _drop(self, items: Iterable[dict]) -> None:
        for item in items:
            if not any(d["command"] == item["command"] and d["source"] == item["source"] for d in self.dropped):
                self.dropped.append(item)

    def _bounded(self, commands: list[str], source: str) -> list[str]:
        if len(commands) > self.max_commands:
            self.notes.append(f"{source} proposed {len(commands)} commands; kept the first {self.max_commands}")
            return commands[: self.max_commands]
        return commands

    # ------------------------------------------------------------------ sources
    def from_memory(self) -> dict | None:
        for fix in self.fixes:
            commands, diagnosis, signature = _fix_commands(fix)
            if signature and signature != self.signature:
                continue
            if not commands:
                continue
            usable, refused = self.check(self._bounded(commands, "memory"), "memory")
            if refused:
                self._drop(refused)
                self.notes.append("a remembered fix was skipped: " + "; ".join(
                    f"{r['command']}: {', '.join(r['reasons'])}" for r in refused))
                continue
            return {"source": "memory", "commands": usable,
                    "diagnosis": diagnosis or "The same failure was healed before with these commands."}
        return None

    def runbook_matches(self) -> list[dict]:
        return match_runbooks(self.books, self.service, self.error, self.evidence,
                              {"absent": self.tools_absent})

    def from_runbook(self, matches: list[dict]) -> dict | None:
        if not matches:
            return None
        best = matches[0]["runbook"]
        if best["escalate"]:
            return {"source": "runbook", "commands": [], "escalate": True, "runbook": best,
                    "diagnosis": f"{best['title']}. {best['notes'].split(chr(10))[0]}".strip()}
        commands = []
        for step in best["steps"]:
            try:
                commands.append(resolve_placeholders(step["command"], self.evidence, self.service, self.error))
            except PlaceholderError as exc:
                self.notes.append(f"runbook {best['id']} not usable: {exc}")
                return None
        usable, refused = self.check(self._bounded(commands, f"runbook {best['id']}"), "runbook")
        if refused:
            self._drop(refused)
            self.notes.append(f"runbook {best['id']} not usable: the policy refused "
                              + ", ".join(r["command"] for r in refused))
            return None
        usable = gate_steps(usable, best["steps"], best["id"])
        return {"source": "runbook", "commands": usable, "runbook": best, "diagnosis": best["title"] + "."}

    def from_llm(self, passages: list[dict]) -> dict | None:
        settings = self.settings
        if settings is None or not settings.configured:
            self.llm["error"] = "not_configured"
            self.llm["error_message"] = "no LLM is configured"
            return None
        try:
            client = LLMClient(settings, sleep=self._sleep, estimate=prompt_mod.estimate_tokens)
        except LLMError as exc:
            self.llm["error"], self.llm["error_message"] = exc.kind, str(exc)
            return None
        self.llm["used"] = True
        remembered = [c for fix in self.fixes for c in _fix_commands(fix)[0]]
        messages = prompt_mod.build_messages(
            service=self.service, error=self.error, evidence=self.evidence, max_commands=self.max_commands,
            tools_present=self.tools_present, tools_absent=self.tools_absent, failed_commands=self.failed,
            remembered_fixes=remembered, passages=passages)
        self.messages = list(messages)
        schema = plan_schema(self.max_commands)
        best = None
        try:
            for attempt in range(1, self.max_attempts + 1):
                self.llm["attempts"] = attempt
                try:
                    reply = client.complete(messages, schema)
                except LLMError as exc:
                    self.llm["error"], self.llm["error_message"] = exc.kind, str(exc)
                    if exc.retry_after is not None:
                        self.llm["retry_after"] = exc.retry_after
                    break
                self.llm["response_format"] = reply.response_format
                problem = None
                try:
                    if reply.finish_reason == "length":
                        raise PlanParseError("truncated", "the answer was cut off (finish_reason length)")
                    parsed = parse_plan(reply.content, self.tools_present, reply.refusal)
                except PlanParseError as exc:
                    problem = exc
                if problem is not None:
                    self.llm["error"], self.llm["error_message"] = problem.kind, str(problem)
                    if problem.kind == "refusal" or attempt == self.max_attempts:
                        break
                    messages = messages + [
                        {"role": "assistant", "content": redact_text((reply.content or "")[:1500])},
                        prompt_mod.feedback_message([], self.failed, self.max_commands, str(problem))]
                    continue
                self.llm["error"] = self.llm["error_message"] = None
                self.llm["answer_format"] = parsed.mode
                if parsed.notes:
                    self.notes.extend(parsed.notes)
                if parsed.escalate:
                    self._drop([dict(item, verdict="reject", argv=None,
                                     reasons=list(item["reasons"]) + ["the model asked for a human"])
                                for item in self.check(parsed.commands, "llm")[0]])
                    best = {"source": "llm", "commands": [], "escalate": True, "diagnosis": parsed.diagnosis}
                    break
                usable, refused = self.check(self._bounded(parsed.commands, "the LLM"), "llm")
                self._drop(refused)
                if usable:
                    best = {"source": "llm", "commands": usable, "diagnosis": parsed.diagnosis,
                            "rationale": parsed.rationale}
                if not refused:
                    break
                if attempt < self.max_attempts:
                    messages = messages + [
                        {"role": "assistant", "content": redact_text((reply.content or "")[:1500])},
                        prompt_mod.feedback_message(refused, self.failed, self.max_commands)]
        finally:
            usage = client.usage.as_dict()
            self.llm.update(usage)
            self.llm["model"] = client.model
            self.llm["notes"] = list(client.notes)
            client.close()
        if best is None and self.llm["error"] is None and self.dropped:
            self.llm["error"] = "all_refused"
            self.llm["error_message"] = f"every command the LLM proposed in {self.llm['attempts']} attempt(s) was refused"
        return best

    def fallback(self) -> dict | None:
        init = INIT_NAMES.get(self.service.lower(), self.service)
        if not re.fullmatch(r"[A-Za-z0-9_.@-]+", init):
            return None
        usable, refused = self.check([f"service {init} restart"], "fallback")
        if refused:
            self._drop(refused)
            self.notes.append("the fallback restart is refused: " + ", ".join(refused[0]["reasons"]))
            return None
        return {"source": "fallback", "commands": usable,
                "diagnosis": "No specific plan was found; restarting the service is the generic safe attempt."}

    # ------------------------------------------------------------------ the run
    def run(self) -> dict:
        started = time.monotonic()
        matches = self.runbook_matches()
        query = " ".join([self.service, self.error] + key_facts(self.service, self.error, self.evidence))
        passages = self.knowledge.query(query, self.service, self.passage_count) if self.passage_count else []
        use_llm = self.backend == "llm" or (self.backend == "auto" and self.settings is not None
                                            and self.settings.configured)
        plan = self.from_memory()
        if plan is None:
            order = ["llm", "runbook"] if self.backend == "llm" else ["runbook", "llm"]
            for source in order:
                if source == "runbook":
                    plan = self.from_runbook(matches)
                elif use_llm:
                    plan = self.from_llm(passages)
                if plan is not None:
                    break
        if plan is None:
            plan = self.fallback()
        result = self._result(plan, matches, passages)
        result["seconds"] = round(time.monotonic() - started, 3)
        return result

    def _result(self, plan: dict | None, matches: list[dict], passages: list[dict]) -> dict:
        escalate = bool(plan and plan.get("escalate"))
        commands = plan["commands"] if plan else []
        source = plan["source"] if plan and (commands or escalate) else "none"
        parts = []
        if plan is None:
            parts.append(f"No plan for {self.service}: no remembered fix, no usable runbook, "
                         + ("no usable LLM answer" if self.llm["used"] else "no LLM")
                         + ", and the fallback restart is not allowed.")
        elif escalate:
            where = f"runbook {plan['runbook']['id']}" if plan.get("runbook") else "the LLM"
            parts.append(f"Escalate {self.service}: {where} says a human is needed; no command planned.")
        else:
            counts = {}
            for item in commands:
                counts[item["verdict"]] = counts.get(item["verdict"], 0) + 1
            summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
            label = {"memory": "a remembered fix", "llm": "the LLM", "fallback": "the fallback restart"}.get(
                plan["source"], f"runbook {plan.get('runbook', {}).get('id', '')}".strip())
            parts.append(f"Plan for {self.service} from {label}: {len(commands)} command(s) ({summary}).")
        if not self.llm["configured"] and self.backend != "runbook":
            parts.append("No LLM configured: planned from runbooks and memory.")
        elif self.llm["error"] and self.llm["used"]:
            parts.append(f"LLM {self.llm['error']}: {self.llm['error_message']}.")
        elif self.backend == "llm" and not self.llm["used"] and source != "memory":
            parts.append("The LLM was not asked.")
        if self.dropped:
            parts.append(f"{len(self.dropped)} command(s) refused.")
        parts.extend(self.notes)
        top = matches[0]["runbook"] if matches else None
        return {
            "changed": False,
            "msg": " ".join(parts),
            "diagnosis": (plan or {}).get("diagnosis") or "",
            "rationale": (plan or {}).get("rationale", ""),
            "commands": commands,
            "dropped": self.dropped,
            "source": source,
            "backend_used": source,
            "backend": self.backend,
            "escalate": escalate,
            "signature": self.signature,
            "signature_basis": signature_basis(self.service, self.error, self.evidence, self.hostnames),
            "runbook": ({"id": top["id"], "title": top["title"], "escalate": top["escalate"],
                         "matched": matches[0]["matched"]} if top else None),
            "passages": [public_passage(p) for p in passages],
            "llm": self.llm,
            "notes": list(self.notes),
        }


def plan(service: str, **kwargs) -> dict:
    """Plan for one failure; see ``Planner`` for the arguments."""
    return Planner(service=service, **kwargs).run()
