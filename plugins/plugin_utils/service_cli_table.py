# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Service CLI subcommands classed by what they do (data only; read by ``service_cli``).

Each entry: the subcommand's words (lower case, space separated) -> ``[class, what it does]``.
Classes: ``read`` (reads state), ``scope`` (a repair of the service itself: allowed when the
service is part of the incident, approval otherwise), ``approve`` (a human confirms), ``refuse``.
A user extends or overrides this table with the policy key ``service_subcommands`` (same shape).
"""
from __future__ import annotations

TABLE: dict[str, dict[str, list[str]]] = {
    "redis-cli": {
        # stopping work the server is stuck on: the least disruptive repair of a busy Redis
        "script kill": ["scope", "stops the Lua script that is blocking Redis (no data written by it is lost)"],
        "function kill": ["scope", "stops the Redis function that is blocking the server"],
        "client kill": ["scope", "disconnects a runaway Redis client (it may reconnect)"],
        "client no-evict": ["approve", "changes how Redis evicts a client's memory"],
        "client no-touch": ["approve", "changes how a client's reads age keys"],
        "client pause": ["approve", "pauses every Redis client"],
        "client unpause": ["scope", "resumes paused Redis clients"],
        # loading or running code, or wiping the script cache, is never sent
        "script load": ["refuse", "loads code into Redis"],
        "script flush": ["refuse", "drops every cached script the applications rely on"],
        "script debug": ["refuse", "starts the interactive Lua debugger"],
        "function load": ["refuse", "loads code into Redis"],
        "function delete": ["refuse", "deletes a Redis function library"],
        "function flush": ["refuse", "deletes every Redis function library"],
        "function restore": ["refuse", "replaces Redis function libraries"],
        "function dump": ["refuse", "copies every function library out"],
        "flushall": ["refuse", "deletes every key"],
        "flushdb": ["refuse", "deletes every key of a database"],
        "debug": ["refuse", "can crash, freeze or rewrite the server"],
        "shutdown": ["approve", "stops Redis (like a service stop)"],
        "shutdown nosave": ["refuse", "stops Redis and loses the data written since the last snapshot"],
        "shutdown now": ["refuse", "stops Redis at once, skipping the snapshot"],
        "shutdown force": ["refuse", "stops Redis even when the snapshot fails (data loss)"],
    },
}
