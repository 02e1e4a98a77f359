# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner: from a failure to a small, policy-checked plan.  It never runs anything.

Order of sources: a remembered fix for the same signature -> the best matching runbook
-> the LLM (when configured and the backend allows it) -> the fallback restart
(``service <name> restart`` as root, only when ``fallback_restart`` is on and the policy
allows it) -> nothing, with a reason that says which sources were tried and, when the
fallback restart was off, how to turn it on.
With backend ``llm`` the LLM comes before the runbook; with ``runbook`` it is never
asked.  A runbook that says ``escalate`` stops the search: no command, a human.
Within an incident the attempt engine (``incident.py``) says which sources are spent
and which plans may not run again; the model sees the incident's history.

Every proposed command goes through the policy engine; commands it rejects are dropped
with their reasons, and a plan the engine forbids (it already ran without healing, or
repeats a failed command with nothing new before it) is skipped; LLM plans are re-asked
with the full verdicts a bounded number of times.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text, redact_value
from ansible_collections.sentinel.remediation.plugins.plugin_utils import do_no_harm
from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
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
from ansible_collections.sentinel.remediation.plugins.plugin_utils.fleet import PLACEHOLDER
from ansible_collections.sentinel.remediation.plugins.plugin_utils.knowledge import (
    Knowledge,
    KnowledgeIndex,
    load_knowledge,
    public_passage,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import (
    PlaceholderError,
    gate_steps,
    match_runbooks,
    resolve_placeholders,
)
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import (
    failure_signature,
    key_facts,
    signature_basis,
)

BACKENDS = ("auto", "llm", "runbook", "memory")
# Lab/Debian service names whose init script has another name.
INIT_NAMES = {"redis": "redis-server", "sshd": "ssh", "crond": "cron"}
_VERDICT_KEYS = ("command", "verdict", "reasons", "argv", "display", "become", "pids", "effects")


class PlannerError(ValueError):
    """Bad input the planner cannot work with (a bad policy, bad runbooks)."""


def _policy():
    # Imported late so that tests can stand in for the engine while it is written.
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy

    return policy


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


REMEMBERED_DIAGNOSIS = "The same failure was healed before with these commands."


def remembered_fixes(fixes: Sequence, signature: str, failed: Iterable[str]):
    """The remembered fixes of ``signature`` in the order memory source takes them: yields
    ``(commands, diagnosis)``, or ``(None, None)`` for a fix that holds a command that failed on
    this failure since (skipped). Fixes of another signature and empty ones are left out."""
    known_bad = {engine.command_key(c) for c in failed}
    for fix in fixes:
        commands, diagnosis, fix_signature = _fix_commands(fix)
        if fix_signature and fix_signature != signature or not commands:
            continue
        if any(engine.command_key(c) in known_bad for c in commands):
            yield None, None
            continue
        yield commands, diagnosis or REMEMBERED_DIAGNOSIS


class Planner:
    """One planning run for one failure on one host (one attempt of an incident)."""

    def __init__(self, *, service: str, error: str = "", evidence=None, failed_commands: Sequence[str] = (),
                 successful_fixes: Sequence = (), host_tools: Mapping | None = None, policy: Mapping | None = None,
                 max_commands: int = 3, backend: str = "auto", max_attempts: int = 3, passages: int = 3,
                 runbook_dirs: Sequence[str] | None = None, hostnames: Iterable[str] = (),
                 llm_settings: LLMSettings | None = None, sleep: Callable[[float], None] = time.sleep,
                 incident: engine.Incident | None = None, scope: Mapping | None = None,
                 recalled: Sequence[Mapping] = (), books: Sequence[Mapping] | None = None,
                 docs_dirs: Sequence[str] | None = None, knowledge: Knowledge | None = None,
                 service_def: Mapping | None = None, signature: str | None = None,
                 classify: Callable[[Sequence[str]], list[dict]] | None = None,
                 fallback_restart: bool = False):
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
        self.fixes = list(successful_fixes or [])
        tools = host_tools or {}
        self.tools_present = sorted({str(t) for t in tools.get("present") or []})
        self.tools_absent = sorted({str(t) for t in tools.get("absent") or []})
        self.max_commands = int(max_commands)
        self.backend = backend
        # Opt-in: a restart as root of a service that nothing here knows how to heal.
        self.fallback_restart = bool(fallback_restart)
        self.fallback_skipped = False
        self.max_attempts = int(max_attempts)
        self.passage_count = int(passages)
        self.hostnames = tuple(h for h in hostnames if h)
        self.settings = llm_settings
        self._sleep = sleep
        self.incident = incident or engine.Incident(host=self.hostnames[0] if self.hostnames else "host",
                                                    service=self.service, error=self.error)
        self.scope = dict(scope) if scope else None
        # The remediation loop passes its PlanCheck's classifier, so the policy is asked in
        # one place and a command is judged once; alone (the plan action), the planner asks it.
        self._classify = classify
        self.notes: list[str] = []
        self.dropped: list[dict] = []
        self.messages: list[dict] = []
        # ``signature``: the failure's when the caller knows it without its evidence (a remembered one).
        self.signature = signature or failure_signature(self.service, self.error, self.evidence, self.hostnames)
        overrides = dict(policy or {})
        absent = list(overrides.get("absent_tools") or [])
        overrides["absent_tools"] = sorted(set(absent) | set(self.tools_absent))
        try:
            self.policy = _policy().load_policy(overrides)
        except ValueError as exc:  # PolicyError is a ValueError
            raise PlannerError(f"bad policy: {exc}") from exc
        if knowledge is None and books is not None:
            # The caller loaded the runbooks itself: retrieval over them only, no documents.
            knowledge = Knowledge(list(books), KnowledgeIndex.build(books), "", "given", 0.0)
        if knowledge is None:
            try:
                # Bundled runbooks, then the operator's (adding or overriding), and the index over
                # them and the operator's documents: built once per content, then cached.
                knowledge = load_knowledge(runbook_dirs, docs_dirs)
            except ValueError as exc:  # RunbookError, KnowledgeError: they name the file and key
                raise PlannerError(str(exc)) from exc
        self.knowledge = knowledge
        self.books = knowledge.runbooks
        # The service definition (user, processes, ports, paths) sharpens the evidence facts.
        self.service_def = dict(service_def) if service_def else None
        # Similar incidents (memory.similar_incidents): offered to the model, never run as they are.
        self.recalled = [self._recalled_here(item) for item in recalled or [] if isinstance(item, Mapping)]
        self.llm = {"configured": bool(llm_settings and llm_settings.configured), "used": False, "calls": 0,
                    "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0,
                    "tokens_estimated": False, "attempts": 0, "error": None, "error_message": None,
                    "notes": []}
        if llm_settings is not None:
            self.llm.update({k: v for k, v in llm_settings.public().items() if k in ("base_url", "model",
                                                                                     "response_format")})

    def _recalled_here(self, item: Mapping) -> dict:
        """A recalled incident with its commands' placeholders (``{port_owner_pid:80}``,
        kept by memory instead of a PID) filled from this host's evidence when they can be."""
        commands = []
        for entry in item.get("commands") or []:
            entry = dict(entry) if isinstance(entry, Mapping) else {"command": str(entry), "original": str(entry)}
            text = str(entry.get("command") or "")
            if PLACEHOLDER.search(text):
                try:
                    filled = resolve_placeholders(text, self.evidence, self.service, self.error,
                                                  service_def=self.service_def)
                    entry.update(command=filled, changed=True)
                except PlaceholderError as exc:
                    entry["note"] = "; ".join(n for n in (entry.get("note"), f"no value here for it: {exc}") if n)
            commands.append(entry)
        return dict(item, commands=commands)

    def recall_mode(self, source: str) -> str:
        """How memory served this plan: ``exact`` (a remembered fix of this very failure),
        ``offered`` (the model saw similar incidents' fixes), ``hint`` (similar incidents
        exist but no model was asked: shown to people, nothing of them ran) or ``""``."""
        if source == "memory":
            return "exact"
        if not self.recalled:
            return ""
        return "offered" if self.llm["used"] and self.messages else "hint"

    # ------------------------------------------------------------------ checking
    def classify(self, commands: Sequence[str]) -> list[dict]:
        if self._classify is not None:
            return self._classify(list(commands))
        policy = _policy()
        if self.scope is not None:
            return policy.classify_many(list(commands), self.policy, scope=self.scope)
        return policy.classify_many(list(commands), self.policy)

    def check(self, commands: Sequence[str], source: str) -> tuple[list[dict], list[dict]]:
        """Classify ``commands``; (usable, refused), each a verdict dict plus ``source``."""
        if not commands:
            return [], []
        usable, refused = [], []
        for command, verdict in zip(commands, self.classify(commands)):
            item = {key: verdict.get(key) for key in _VERDICT_KEYS if key in verdict}
            item["command"] = item.get("command") or command
            item["reasons"] = list(item.get("reasons") or [])
            item["source"] = source
            (refused if item["verdict"] == "reject" else usable).append(item)
        return usable, refused

    def forbidden(self, usable: Sequence[Mapping]) -> list[str]:
        """Why the attempt engine will not run this plan again in this incident."""
        return engine.plan_problems(self.incident, usable)

    def _drop(self, items: Iterable[dict]) -> None:
        for item in items:
            if not any(d["command"] == item["command"] and d["source"] == item["source"] for d in self.dropped):
                self.dropped.append(item)

    def _bounded(self, commands: list[str], source: str) -> list[str]:
        if len(commands) > self.max_commands:
            self.notes.append(f"{source} proposed {len(commands)} commands; kept the first {self.max_commands}")
            return commands[: self.max_commands]
        return commands

    def _usable_plan(self, commands: list[str], source: str, label: str) -> list[dict] | None:
        """The checked plan of a non-LLM source, or None (with a note) when it cannot run."""
        usable, refused = self.check(self._bounded(commands, label), source)
        if refused:
            self._drop(refused)
            self.notes.append(f"{label} not usable: the policy refused "
                              + "; ".join(f"{r['command']} ({', '.join(r['reasons'][:1])})" for r in refused))
            return None
        problems = self.forbidden(usable)
        if problems:
            self.notes.append(f"{label} skipped: " + "; ".join(problems))
            return None
        return usable

    # ------------------------------------------------------------------ sources
    def from_memory(self) -> dict | None:
        for commands, diagnosis in remembered_fixes(self.fixes, self.signature, self.failed):
            if commands is None:
                self.notes.append("a remembered fix was skipped: it holds a command that failed on this failure since")
                continue
            usable = self._usable_plan(commands, "memory", "a remembered fix")
            if usable is None:
                continue
            return {"source": "memory", "commands": usable, "diagnosis": diagnosis}
        return None

    def runbook_matches(self) -> list[dict]:
        return match_runbooks(self.books, self.service, self.error, self.evidence,
                              {"absent": self.tools_absent, "present": self.tools_present}, self.service_def)

    def from_runbook(self, matches: list[dict]) -> dict | None:
        for match in matches:
            book = match["runbook"]
            if book["escalate"]:
                return {"source": "runbook", "commands": [], "escalate": True, "runbook": book,
                        "diagnosis": f"{book['title']}. {book['notes'].split(chr(10))[0]}".strip()}
            commands = []
            try:
                for step in book["steps"]:
                    commands.append(resolve_placeholders(step["command"], self.evidence, self.service, self.error,
                                                         service_def=self.service_def))
            except PlaceholderError as exc:
                self.notes.append(f"runbook {book['id']} not usable: {exc}")
                continue
            usable = self._usable_plan(commands, "runbook", f"runbook {book['id']}")
            if usable is None:
                continue
            # Steps the runbook's author marked `approval: true` wait for a human whatever the policy says.
            usable = gate_steps(usable, book["steps"], book["id"])
            return {"source": "runbook", "commands": usable, "runbook": book, "diagnosis": book["title"] + "."}
        return None

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
        scope_lines = []
        if self.scope is not None:
            scope_lines = _policy().describe_scope(self.scope, self.policy.compiled["access_paths"])
        messages = prompt_mod.build_messages(
            service=self.service, error=self.error, evidence=self.evidence, max_commands=self.max_commands,
            tools_present=self.tools_present, tools_absent=self.tools_absent, failed_commands=self.failed,
            remembered_fixes=remembered, passages=passages, history=engine.history(self.incident),
            scope=scope_lines, recalled=self.recalled,
            facts_here=key_facts(self.service, self.error, self.evidence, self.hostnames),
            constraints=do_no_harm.prompt_lines((self.scope or {}).get("do_no_harm")))
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
                answer = {"role": "assistant", "content": redact_text((reply.content or "")[:1500])}
                if problem is not None:
                    self.llm["error"], self.llm["error_message"] = problem.kind, str(problem)
                    if problem.kind == "refusal" or attempt == self.max_attempts:
                        break
                    messages = messages + [answer, prompt_mod.feedback_message([], [], self.max_commands,
                                                                               str(problem))]
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
                problems = self.forbidden(usable) if usable else []
                if usable and not problems:
                    best = {"source": "llm", "commands": usable, "diagnosis": parsed.diagnosis,
                            "rationale": parsed.rationale}
                if not refused and not problems:
                    break
                if problems:
                    self.notes.append("the model's plan was sent back: " + "; ".join(problems))
                if attempt < self.max_attempts:
                    messages = messages + [answer, prompt_mod.feedback_message(
                        refused, [], self.max_commands, accepted=usable, plan_problems=problems)]
        finally:
            usage = client.usage.as_dict()
            self.llm.update(usage)
            self.llm["model"] = client.model
            self.llm["notes"] = list(client.notes)
            client.close()
        if best is None and self.llm["error"] is None:
            if any("sent back" in note for note in self.notes):
                self.llm["error"] = "no_usable_plan"
                self.llm["error_message"] = (f"no plan the policy and the attempt engine accept in "
                                             f"{self.llm['attempts']} answer(s)")
            else:
                self.llm["error"] = "all_refused"
                self.llm["error_message"] = (f"every command the LLM proposed in {self.llm['attempts']} "
                                             "attempt(s) was refused")
        return best

    def restart_command(self) -> str | None:
        """The fallback restart of this service on this host, or None for a name no init system takes."""
        init = INIT_NAMES.get(self.service.lower(), self.service)
        if not re.fullmatch(r"[A-Za-z0-9_.@-]+", init):
            return None
        return f"systemctl restart {init}" if "systemctl" in self.tools_present else f"service {init} restart"

    def fallback(self) -> dict | None:
        command = self.restart_command()
        if command is None:
            return None
        usable = self._usable_plan([command], "fallback", "the fallback restart")
        if usable is None:
            return None
        return {"source": "fallback", "commands": usable,
                "diagnosis": "No specific plan was found; restarting the service is the generic safe attempt."}

    # ------------------------------------------------------------------ the run
    def run(self) -> dict:
        started = time.monotonic()
        matches = self.runbook_matches()
        query = " ".join([self.service, self.error] + key_facts(self.service, self.error, self.evidence))
        init = str(self.evidence.get("init") or "").lower() if isinstance(self.evidence, Mapping) else ""
        passages = self.knowledge.query(query, self.service, self.passage_count, init=init or None) \
            if self.passage_count else []
        configured = bool(self.settings is not None and self.settings.configured)
        order = engine.source_order(self.backend, configured or self.backend == "llm", self.incident)
        if not self.fallback_restart and "fallback" in order:
            order = [s for s in order if s != "fallback"]
            self.fallback_skipped = True
        plan = None
        for source in order:
            if source == "memory":
                plan = self.from_memory()
            elif source == "runbook":
                plan = self.from_runbook(matches)
            elif source == "llm":
                plan = self.from_llm(passages)
            elif source == "fallback":
                plan = self.fallback()
            if plan is not None:
                break
        result = self._result(plan, matches, passages, order)
        mode = self.recall_mode(result["source"])
        result["recall"] = mode
        result["recalled"] = [public_recall(r) for r in self.recalled] if mode in ("offered", "hint") else []
        if mode == "hint":
            # Without the model a similar fix is never run: people see it, in the outcome and the reason.
            hint = "Hint: " + engine.recall_note(result["recalled"]) + "."
            result["notes"].append(hint)
            result["msg"] = f"{result['msg']} {hint}".strip()
        result["seconds"] = round(time.monotonic() - started, 3)
        return result

    def _result(self, plan: dict | None, matches: list[dict], passages: list[dict],
                order: Sequence[str] = ()) -> dict:
        escalate = bool(plan and plan.get("escalate"))
        commands = plan["commands"] if plan else []
        source = plan["source"] if plan and (commands or escalate) else "none"
        parts = []
        if plan is None:
            tried = ", ".join(order) or "none"
            parts.append(f"No plan for {self.service}: no source gave a plan that may run (tried: {tried}).")
            if self.fallback_skipped:
                parts.append(fallback_off_note(self.restart_command()))
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
        if not self.llm["configured"] and self.backend not in ("runbook", "memory"):
            parts.append("No LLM configured: planned from runbooks and memory.")
        elif self.llm["error"] and self.llm["used"]:
            parts.append(f"LLM {self.llm['error']}: {self.llm['error_message']}.")
        elif self.backend == "llm" and not self.llm["used"] and source != "memory":
            parts.append("The LLM was not asked.")
        if self.dropped:
            parts.append(f"{len(self.dropped)} command(s) refused.")
        parts.extend(self.notes)
        chosen = (plan or {}).get("runbook")
        top = chosen or (matches[0]["runbook"] if matches else None)
        matched = next((m["matched"] for m in matches if m["runbook"] is top), [])
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
                         "matched": matched} if top else None),
            "passages": [public_passage(p) for p in passages],
            "llm": self.llm,
            "notes": list(self.notes),
            "order": list(order),
        }


def fallback_off_note(command: str | None) -> str:
    """Why no restart was tried, and how to allow it."""
    what = f"`{command}` as root" if command else "a restart as root"
    return (f"The fallback restart ({what}) is off: set remediate_fallback_restart: true (the option "
            "fallback_restart of sentinel.remediation.heal and sentinel.remediation.plan) to try it when no "
            "other source plans.")


def public_recall(item: Mapping) -> dict:
    """What the report keeps of a recalled incident: ``{signature, host, similarity,
    commands}`` (the commands as adapted to this host; ``original``/``note`` when they differ)."""
    commands = []
    for entry in item.get("commands") or []:
        if isinstance(entry, Mapping):
            out = {"command": str(entry.get("command") or "")}
            if entry.get("original") and entry.get("original") != out["command"]:
                out["original"] = str(entry["original"])
            if entry.get("note"):
                out["note"] = str(entry["note"])
            commands.append(out)
    return {"signature": str(item.get("signature") or ""), "host": str(item.get("host") or ""),
            "similarity": float(item.get("similarity") or 0.0), "commands": commands}


def plan(service: str, **kwargs) -> dict:
    """Plan for one failure; see ``Planner`` for the arguments."""
    return Planner(service=service, **kwargs).run()
