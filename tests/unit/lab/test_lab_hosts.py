"""The lab's two host kinds without Docker: how containers are started, the inventory the
kinds make, and the service definitions of inventories/lab/group_vars.

A stand-in `docker` CLI (a script in tmp_path) answers `ps` and `inspect` from a JSON
file and records every call, so what the lab would run is asserted from outside.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "lab"))

import sentinel_lab  # noqa: E402
from sentinel_lab import (  # noqa: E402
    KINDS,
    Lab,
    LabError,
    LabUsageError,
    default_image,
    kinds_for,
    load_catalogue,
    summarise_goroutines,
)

FAKE_DOCKER = r'''#!/usr/bin/env python3
import json, os, sys
state = json.load(open(os.environ["FAKE_DOCKER_STATE"]))
with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
args = sys.argv[1:]
if args[0] == "ps":
    for host, c in state.items():
        print("\t".join([host, c["name"], c["state"], c["image"], c["kind"]]))
elif args[0] == "inspect":
    c = next(c for c in state.values() if c["name"] == args[-1])
    labels = {"sentinel.lab.kind": c["kind"], "sentinel.lab.tools_present": "ps,ss",
              "sentinel.lab.tools_absent": c["absent"]}
    print(json.dumps(labels) if "json" in args[2] else c["kind"])
'''


@pytest.fixture()
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    script = tmp_path / "docker"
    script.write_text(FAKE_DOCKER, encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    state = {
        "lab01": {"name": "t-lab01", "state": "running", "image": "sentinel-lab:latest", "kind": "sysv",
                  "absent": "systemctl,lsof"},
        "lab02": {"name": "t-lab02", "state": "running", "image": "sentinel-lab-systemd:latest", "kind": "systemd",
                  "absent": "curl"},
        "lab03": {"name": "t-lab03", "state": "exited", "image": "sentinel-lab:latest", "kind": "sysv", "absent": ""},
    }
    (tmp_path / "state.json").write_text(json.dumps(state), encoding="utf-8")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "state.json"))
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(tmp_path / "calls.log"))

    def calls() -> list[list[str]]:
        log = tmp_path / "calls.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return Lab(prefix="t", docker=str(script)), calls


def test_mixed_alternates_the_kinds() -> None:
    assert kinds_for(4, "mixed") == ["sysv", "systemd", "sysv", "systemd"]
    assert kinds_for(2, "systemd") == ["systemd", "systemd"]
    with pytest.raises(LabUsageError, match="unknown host kind 'upstart'"):
        kinds_for(1, "upstart")


def test_images_follow_the_build_script(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SENTINEL_LAB_IMAGE", "SENTINEL_LAB_SYSTEMD_IMAGE", "LAB_IMAGE_REPO"):
        monkeypatch.delenv(name, raising=False)
    assert default_image("sysv") == "sentinel-lab:latest"
    assert default_image("systemd") == "sentinel-lab-systemd:latest"
    monkeypatch.setenv("LAB_IMAGE_REPO", "mine")
    assert default_image("systemd") == "mine-systemd:latest"
    monkeypatch.setenv("SENTINEL_LAB_SYSTEMD_IMAGE", "x:1")
    assert default_image("systemd") == "x:1"


def test_a_systemd_host_boots_init_without_privileges() -> None:
    argv = Lab(prefix="t", systemd_image="sd:1").run_argv("lab02", "systemd")
    joined = " ".join(argv)
    assert "--privileged" not in argv and "--init" not in argv
    for part in ("--cgroupns=host", "-v /sys/fs/cgroup:/sys/fs/cgroup:ro", "--tmpfs /run ", "--tmpfs /run/lock",
                 "-e container=docker", "--network none", "--label sentinel.lab.kind=systemd"):
        assert part in joined + " ", part
    assert argv[-1] == "sd:1"


def test_a_sysv_host_runs_lab_boot_under_docker_init() -> None:
    argv = Lab(prefix="t", image="sv:1").run_argv("lab01", "sysv")
    assert "--init" in argv and "--cgroupns=host" not in argv and argv[-1] == "sv:1"
    assert "/var/lib/redis:size=16m" in argv and "/var/lib/sentinel-app:size=16m" in argv


def test_inventory_groups_hosts_by_kind(fake_docker) -> None:
    lab, _calls = fake_docker
    data = lab.inventory()
    assert data["lab"]["hosts"] == ["lab01", "lab02"]  # lab03 is not running
    assert data["lab"]["children"] == ["lab_sysv", "lab_systemd"]
    assert data["lab_sysv"] == {"hosts": ["lab01"], "vars": {"sentinel_init": "sysv"}}
    assert data["lab_systemd"] == {"hosts": ["lab02"], "vars": {"sentinel_init": "systemd"}}
    assert data["_meta"]["hostvars"]["lab02"]["sentinel_init"] == "systemd"
    assert data["_meta"]["hostvars"]["lab01"]["sentinel_lab_tools_absent"] == ["systemctl", "lsof"]


def test_a_static_inventory_always_names_the_services_to_watch(fake_docker, tmp_path: Path) -> None:
    lab, _calls = fake_docker
    core = json.loads(lab.write_inventory(tmp_path / "core.json").read_text())
    lab_group = core["all"]["children"]["lab"]
    # The role watches nothing by default: the file names the four core services for every host.
    assert [s["name"] for s in lab_group["vars"]["remediate_services"]] == ["nginx", "redis-server", "cron", "ssh"]
    assert "remediate_services" not in lab_group["children"]["lab_systemd"]["vars"]
    assert lab_group["children"]["lab_sysv"]["hosts"] == {"lab01": {}}
    # The lab's own group variables come along (the policy's absent tools, the fallback restart on).
    assert lab_group["vars"]["remediation_policy"] == {"absent_tools": "{{ sentinel_lab_tools_absent }}"}
    assert lab_group["vars"]["remediate_fallback_restart"] is True
    full = json.loads(lab.write_inventory(tmp_path / "full.json", services="kind").read_text())
    full_group = full["all"]["children"]["lab"]
    systemd_vars = full_group["children"]["lab_systemd"]["vars"]
    assert systemd_vars["sentinel_init"] == "systemd"
    assert "systemd-journald" in [s["name"] for s in systemd_vars["remediate_services"]]
    assert "remediate_services" not in full_group["vars"]
    assert json.loads(lab.write_inventory(tmp_path / "same.json", services=True).read_text()) == full


def test_a_static_inventory_with_an_unknown_service_set_is_refused(fake_docker, tmp_path: Path) -> None:
    lab, _calls = fake_docker
    with pytest.raises(LabUsageError, match="services must be one of core, kind, got 'all'"):
        lab.write_inventory(tmp_path / "x.json", services="all")
    assert not (tmp_path / "x.json").exists()


def test_health_of_a_service_the_kind_does_not_run_is_refused(fake_docker) -> None:
    lab, calls = fake_docker
    with pytest.raises(LabUsageError, match="lab01 is a sysv host and runs no journald"):
        lab.health("lab01", ["journald"])
    assert not any(c[0] == "exec" for c in calls())


def test_injecting_a_fault_of_the_other_kind_runs_nothing(fake_docker) -> None:
    lab, calls = fake_docker
    with pytest.raises(LabUsageError, match="nginx_unit_masked happens on systemd hosts, not on a sysv host"):
        lab.inject("lab01", "nginx_unit_masked")
    assert not any(c[0] == "exec" for c in calls())


# ------------------------------------------------------------ service definitions (C1)

C1_LISTS = ("processes", "config_paths", "data_paths", "runtime_paths", "logs", "ports", "pid_files",
            "config_test", "paths", "depends_on")


def _definitions(kind: str) -> list[dict]:
    path = REPO / "inventories" / "lab" / "group_vars" / f"lab_{kind}.yml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))["remediate_services"]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_defines_every_service_it_runs(kind: str) -> None:
    catalogue = load_catalogue()
    names = [d["name"] for d in _definitions(kind)]
    expected = [catalogue.services[s]["init"] for s in catalogue.services if kind in catalogue.services[s]["kinds"]]
    assert sorted(names) == sorted(expected)


@pytest.mark.parametrize("kind", KINDS)
def test_service_definitions_follow_the_contract(kind: str) -> None:
    definitions = _definitions(kind)
    names = {d["name"] for d in definitions}
    for d in definitions:
        assert d["checks"] and all(c["type"] in {"service", "process", "port", "http", "command"} for c in d["checks"])
        assert isinstance(d["user"], str) and d["user"]
        for key in C1_LISTS:
            assert isinstance(d[key], list), (d["name"], key)
        assert all(isinstance(p, int) for p in d["ports"])
        assert set(d["depends_on"]) <= names - {d["name"]}
        for key in ("config_paths", "data_paths", "runtime_paths", "logs", "pid_files", "paths"):
            assert all(os.path.isabs(p) for p in d[key]), (d["name"], key)
        if kind == "systemd":
            assert d["units"] and all(u.endswith(".service") for u in d["units"]), d["name"]
        else:
            assert "units" not in d, "SysV services are their init scripts (`name`)"


def test_postgres_on_systemd_is_judged_by_its_cluster_not_the_umbrella_unit() -> None:
    postgres = next(d for d in _definitions("systemd") if d["name"] == "postgresql")
    assert postgres["units"] == ["postgresql@15-main.service"]
    assert {"type": "service"} not in postgres["checks"]


def test_the_inotify_limit_is_raised_for_systemd_hosts_never_lowered(tmp_path) -> None:
    from sentinel_lab import ensure_inotify_instances  # pylint: disable=import-outside-toplevel

    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    assert ensure_inotify_instances(8192, limit) == 8192
    assert limit.read_text() == "8192\n"
    limit.write_text("65536\n")
    assert ensure_inotify_instances(8192, limit) == 65536
    assert limit.read_text() == "65536\n"
    assert ensure_inotify_instances(8192, tmp_path / "absent") == 0


def test_a_large_lab_is_removed_a_few_containers_at_a_time(fake_docker) -> None:
    lab, calls = fake_docker
    assert lab.down(batch=2) == ["t-lab01", "t-lab02", "t-lab03"]
    removals = [c for c in calls() if c[0] == "rm"]
    assert removals == [["rm", "-f", "-v", "t-lab01", "t-lab02"], ["rm", "-f", "-v", "t-lab03"]]


def test_a_docker_call_that_does_not_finish_names_itself_and_the_daemon(
        fake_docker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab, _calls = fake_docker
    slow = tmp_path / "slow-docker"
    slow.write_text("#!/bin/sh\nsleep 5\n", encoding="utf-8")
    slow.chmod(0o755)
    lab.docker = str(slow)
    monkeypatch.setattr(sentinel_lab, "DOCKER_PIDFILE", tmp_path / "no-such.pid")
    with pytest.raises(LabError, match=r"`\S+ rm -f -v t-lab01` did not finish within 0.5 s "
                                       r"\(dockerd: no running process found through its pid file\)"):
        lab._docker("rm", "-f", "-v", "t-lab01", timeout=0.5)  # pylint: disable=protected-access


# The shape of what dockerd writes on SIGUSR1 (Go's goroutine dump), trimmed: a request stuck
# removing a container's layer, one waiting for a container to exit, a log copier and the
# listener, which wait for as long as the daemon runs.
GOROUTINES = """goroutine 1 [chan receive, 9 minutes]:
main.main()
\t/src/cmd/dockerd/docker.go:97 +0x1a

goroutine 330 [chan receive, 10 minutes]:
github.com/docker/docker/api/server.(*Server).serveAPI(0xc00020d6d0)
\t/src/github.com/docker/docker/api/server/server.go:96 +0x189

goroutine 41 [IO wait, 9 minutes]:
internal/poll.runtime_pollWait(0x7f2172845628, 0x72)
\t/usr/lib/go/src/runtime/netpoll.go:305 +0x89
github.com/docker/docker/pkg/pools.Copy({0x5, 0xc0}, {0x5, 0xc1})
\t/src/github.com/docker/docker/pkg/pools/pools.go:78 +0x1a

goroutine 27001 [semacquire, 3 minutes]:
sync.runtime_SemacquireMutex(0xc0009a1404, 0x0, 0x1)
\t/usr/lib/go/src/runtime/sema.go:71 +0x25
github.com/docker/docker/layer.(*layerStore).ReleaseRWLayer(0xc000a1, {0x5, 0xc2})
\t/src/github.com/docker/docker/layer/layer_store.go:600 +0x4b
github.com/docker/docker/daemon.(*Daemon).cleanupContainer(0xc0002, 0xc0003)
\t/src/github.com/docker/docker/daemon/delete.go:120 +0x3d
github.com/docker/docker/api/server/router/container.(*containerRouter).deleteContainers(0xc000e6)
\t/src/github.com/docker/docker/api/server/router/container/container_routes.go:600 +0x2

goroutine 27002 [semacquire, 2 minutes]:
sync.runtime_SemacquireMutex(0xc0009a1404, 0x0, 0x1)
\t/usr/lib/go/src/runtime/sema.go:71 +0x25
github.com/docker/docker/layer.(*layerStore).ReleaseRWLayer(0xc000a1, {0x5, 0xc4})
\t/src/github.com/docker/docker/layer/layer_store.go:600 +0x4b
github.com/docker/docker/api/server/router/container.(*containerRouter).deleteContainers(0xc000e6)
\t/src/github.com/docker/docker/api/server/router/container/container_routes.go:600 +0x2

goroutine 27379 [chan receive]:
github.com/docker/docker/api/server/router/container.(*containerRouter).postContainersWait(0xc000e65e00)
\t/src/github.com/docker/docker/api/server/router/container/container_routes.go:365 +0x325
"""


def test_the_goroutine_summary_names_where_requests_wait_and_nothing_else() -> None:
    summary = summarise_goroutines(GOROUTINES)
    assert summary == ("requests in progress: 2 in layer.(*layerStore).ReleaseRWLayer [semacquire] up to 3 min; "
                       "1 in api/server/router/container.(*containerRouter).postContainersWait [chan receive]")
    assert summarise_goroutines(GOROUTINES.split("goroutine 27001", maxsplit=1)[0]) == "no API request in progress"
