"""The cgroup CPU meter's parsers (benchmarks/cgroup_cpu.py), on fixed text: no cgroup needed."""

from __future__ import annotations

from types import ModuleType

import pytest
from benchmark_module import load_benchmark


def load() -> ModuleType:
    return load_benchmark("cgroup_cpu")


def test_usage_usec_is_read_from_cpu_stat_and_a_missing_one_raises() -> None:
    cgroup_cpu = load()
    assert (
        cgroup_cpu.usage_usec("usage_usec 584898178\nuser_usec 479652749\nsystem_usec 105245428\n")
        == 584898178
    )
    with pytest.raises(ValueError):
        cgroup_cpu.usage_usec("user_usec 1\n")


def test_own_cgroup_joins_the_cgroup2_mount_and_the_v2_line() -> None:
    cgroup_cpu = load()
    mountinfo = (
        "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "40 25 0:35 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    )
    assert (
        cgroup_cpu.own_cgroup(mountinfo, "4:memory:/x\n0::/a/b\n") == "/sys/fs/cgroup/unified/a/b"
    )
    assert cgroup_cpu.own_cgroup(mountinfo, "4:memory:/x\n") is None
    assert cgroup_cpu.own_cgroup(mountinfo.splitlines()[0], "0::/\n") is None
