"""cgroups around a sandbox: v2 and v1 group creation against fake trees (every host differs), the real
hierarchy where this host lets us write it, and the reasons reported where it does not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from openadapt.sandbox import cgroups
from openadapt.sandbox.cgroups import CgroupLimits

LIMITS = CgroupLimits(memory_mb=512, pids=64, cpus=0.5)
V1_MOUNTS = """cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
V1_SELF = "5:pids:/\n4:memory:/\n3:cpu:/\n0::/\n"


def fake_v1(root: Path) -> None:
    for controller in ("pids", "memory", "cpu"):
        (root / "sys/fs/cgroup" / controller).mkdir(parents=True)
    (root / "sys/fs/cgroup/unified").mkdir(parents=True)
    (root / "sys/fs/cgroup/unified/cgroup.controllers").write_text("hugetlb\n")


def test_v2_group_gets_every_limit(tmp_path):
    base = tmp_path / "sys/fs/cgroup/user.slice/session"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (base / "cgroup.subtree_control").write_text("")
    group, description = cgroups.create(LIMITS, mounts_text="cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
                                        self_cgroup_text="0::/user.slice/session\n", root=tmp_path)
    assert group is not None and group.version == 2, description
    d = group.dirs["unified"]
    assert d.parent == base and d.name.startswith(f"openadapt-sandbox-{os.getpid()}-")
    assert (d / "pids.max").read_text() == "64"
    assert (d / "memory.max").read_text() == str(512 * 1024 * 1024)
    assert (d / "cpu.max").read_text() == "50000 100000"
    assert "+pids" in (base / "cgroup.subtree_control").read_text()
    assert description == "cgroup v2: 0.5 CPU, memory 512 MiB, 64 processes"
    wrapped = group.wrap(["bwrap", "--", "python"])
    assert wrapped[:2] == ["/bin/sh", "-c"] and wrapped[-3:] == ["bwrap", "--", "python"]
    assert str(d / "cgroup.procs") in wrapped


def test_v2_without_the_controllers_falls_back_to_v1(tmp_path):
    fake_v1(tmp_path)
    group, description = cgroups.create(LIMITS, mounts_text=V1_MOUNTS, self_cgroup_text=V1_SELF, root=tmp_path)
    assert group is not None and group.version == 1
    assert (group.dirs["pids"] / "pids.max").read_text() == "64"
    assert (group.dirs["memory"] / "memory.limit_in_bytes").read_text() == str(512 * 1024 * 1024)
    assert (group.dirs["cpu"] / "cpu.cfs_quota_us").read_text() == "50000"
    assert description.startswith("cgroup v1: 0.5 CPU") and "v2 not used" in description and "hugetlb" in description
    assert len(group.procs_files) == 3


def test_no_writable_cgroup_is_reported_with_the_reasons(tmp_path):
    group, description = cgroups.create(LIMITS, mounts_text="cgroup2 /sys/fs/cgroup cgroup2 ro 0 0\n",
                                        self_cgroup_text="0::/\n", root=tmp_path)
    assert group is None
    assert "lacks the pids/memory controllers" in description and "no cgroup v1" in description


def test_v2_with_processes_in_the_base_group_says_what_to_do(tmp_path):
    base = tmp_path / "sys/fs/cgroup/busy"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text("memory pids\n")
    (base / "cgroup.subtree_control").mkdir()  # writing it fails, as EBUSY would on a real host
    group, description = cgroups.create(LIMITS, mounts_text="cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
                                        self_cgroup_text="0::/busy\n", root=tmp_path)
    assert group is None and "delegated, empty cgroup" in description


def test_stale_groups_of_dead_hosts_are_removed(tmp_path):
    fake_v1(tmp_path)
    stale = tmp_path / "sys/fs/cgroup/pids/openadapt-sandbox-999999999-0"
    stale.mkdir()
    cgroups.create(LIMITS, mounts_text=V1_MOUNTS, self_cgroup_text=V1_SELF, root=tmp_path)
    assert not stale.exists()


def _real_v1():
    group, why = cgroups.create(LIMITS)
    if group is None:
        pytest.skip(f"no writable cgroup on this host: {why}")
    return group


def test_real_group_holds_the_wrapped_process_and_is_removed():
    group = _real_v1()
    try:
        proc = subprocess.Popen(group.wrap(["sleep", "30"]))
        try:
            for _ in range(200):
                if group.contains(proc.pid):
                    break
                subprocess.run(["true"])
            assert group.contains(proc.pid)
            assert proc.pid in group.members()
            counters = group.counters()
            assert {"pids_max_hits", "oom_kills"} <= set(counters)
        finally:
            group.kill_all()
            proc.wait(timeout=5)
    finally:
        group.remove()
    assert not any(d.exists() for d in group.dirs.values())


def test_real_group_enforces_the_process_limit():
    group = _real_v1()
    if "pids" not in group.controllers:
        pytest.skip("no pids controller")
    try:
        script = "pids=; for i in $(seq 100); do sleep 5 & pids=\"$pids $!\"; done 2>/dev/null; echo started"
        result = subprocess.run(group.wrap(["/bin/sh", "-c", script]), capture_output=True, text=True, timeout=30)
        assert group.counters()["pids_max_hits"] > 0, result.stderr
    finally:
        group.remove()


def test_bwrap_validator_runs_in_its_cgroup_or_says_why_not():
    from openadapt.validator import Validator

    with Validator("bwrap", episodes=2, timeout_s=20) as validator:
        validator.warm_up()
        info = validator.sandbox_info
        if validator.sandbox.cgroup is None:
            assert info.limits["cgroup"] is None
            assert any("cgroups NOT applied" in note for note in info.notes)
        else:
            assert validator.sandbox.cgroup_placed is True
            assert validator.sandbox.cgroup.contains(validator._worker.proc.pid)
            assert info.limits["cgroup"].startswith("cgroup v")
        dirs = list(validator.sandbox.cgroup.dirs.values()) if validator.sandbox.cgroup else []
    assert not any(d.exists() for d in dirs)
