# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Service CLI subcommands classed by what they do (data only; read by ``service_cli``).

Each entry: the subcommand's words (lower case, space separated) -> ``[class, what it does]``.
Classes: ``read`` (reads state), ``scope`` (a repair of the service itself: allowed when the
service is part of the incident, approval otherwise), ``approve`` (a human confirms), ``refuse``,
and the unit actions ``start``, ``reload``, ``restart``, ``stop``: judged as that action on the
service's own unit (as ``systemctl VERB UNIT`` is), so a stop needs a human, a stop of remote
access is refused and a stateful service's restart or stop carries its cost.
A user extends or overrides this table with the policy key ``service_subcommands`` (same shape).

The words are what the tool's rule reads as the subcommand: ``redis-cli``'s command words,
``nginx``'s and ``sshd``'s action flag (``-s reload``, ``-t``), ``pg_ctl``'s and
``pg_ctlcluster``'s action, the SQL function a ``psql`` query calls on one backend PID
(a query that picks the PIDs itself is never more than ``approve``), ``journalctl``'s
maintenance option and ``systemctl``'s verbs its own rules do not know.
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
    "nginx": {
        "-t": ["read", "tests the nginx configuration"],
        "-T": ["read", "tests the nginx configuration and prints it"],
        "-s reload": ["reload", "reloads nginx's configuration (workers finish their requests)"],
        "-s reopen": ["reload", "reopens nginx's log files"],
        "-s quit": ["stop", "stops nginx after its requests finish (like a service stop)"],
        "-s stop": ["stop", "stops nginx at once (like a service stop)"],
    },
    "sshd": {
        "-t": ["read", "tests the sshd configuration"],
        "-T": ["read", "tests the sshd configuration and prints the effective settings"],
        "-G": ["read", "prints the effective sshd settings"],
        "-V": ["read", "prints the sshd version"],
    },
    "pg_ctlcluster": {
        "status": ["read", "reads the cluster's state"],
        "start": ["start", "starts the PostgreSQL cluster"],
        "reload": ["reload", "reloads the cluster's configuration (sessions keep running)"],
        "restart": ["restart", "restarts the cluster (every session and transaction in flight ends)"],
        "stop": ["stop", "stops the cluster (every session ends)"],
        "promote": ["approve", "promotes a standby to primary (the replication topology changes)"],
    },
    "pg_ctl": {
        "status": ["read", "reads the PostgreSQL server's state"],
        "reload": ["reload", "reloads the server's configuration (SIGHUP to the postmaster)"],
        "logrotate": ["scope", "makes the server switch to a new log file"],
        # outside the init system: systemd's view of the unit goes stale
        "start": ["approve", "starts PostgreSQL outside the init system"],
        "restart": ["approve", "restarts PostgreSQL outside the init system (every session ends)"],
        "stop": ["approve", "stops PostgreSQL outside the init system (every session ends)"],
        "promote": ["approve", "promotes a standby to primary (the replication topology changes)"],
        "kill": ["refuse", "signals the server outside the init system and its checks"],
        "init": ["refuse", "creates a new database cluster"],
        "initdb": ["refuse", "creates a new database cluster"],
    },
    "psql": {
        # SQL functions called on one backend PID: PostgreSQL acts only on its own backends
        "pg_cancel_backend": ["scope", "cancels the query one database session is running (the session stays)"],
        "pg_terminate_backend": ["approve", "ends one database session (its open transaction rolls back)"],
        "pg_reload_conf": ["reload", "reloads the server's configuration (sessions keep running)"],
        "pg_rotate_logfile": ["scope", "makes the server switch to a new log file"],
    },
    "journalctl": {
        "--vacuum-size": ["approve", "deletes archived journal files beyond a size"],
        "--vacuum-time": ["approve", "deletes archived journal files older than a time"],
        "--vacuum-files": ["approve", "deletes archived journal files beyond a count"],
        "--rotate": ["approve", "closes the active journal files and starts new ones"],
        "--flush": ["approve", "moves the runtime journal (/run/log/journal) to disk"],
        "--relinquish-var": ["approve", "moves the journal off /var to /run"],
        "--smart-relinquish-var": ["approve", "moves the journal off /var to /run"],
        "--update-catalog": ["approve", "rewrites the journal's message catalog"],
        "--sync": ["read", "writes unwritten journal entries to disk"],
    },
    "systemctl": {
        # verbs systemctl's own rules do not know; its unit verbs are judged by their class
        "whoami": ["read", "names the unit of the calling process"],
        "service-log-level": ["approve", "changes a service's log level at runtime"],
        "service-log-target": ["approve", "changes where a service logs at runtime"],
    },
}
