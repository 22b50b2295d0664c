"""Huge pages for malloc in the processes paradnn starts (paradnn.hostmem), and the window's
page-fault meter that shows what they change."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from paradnn import hostmem

# A child that maps, touches and frees a 64 MiB block five times with glibc's malloc (a block
# over malloc's mmap threshold, as XLA:CPU's temporaries are) inside the meters' window.
CHILD = """
import ctypes, json
from paradnn import meters
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 64 << 20
with meters.window("cpu") as w:
    for _ in range(5):
        block = libc.malloc(size)
        ctypes.memset(block, 1, size)
        libc.free(block)
m = w.metrics(steps=5, examples=5)
print(json.dumps({k: m[k] for k in ("page_faults_per_step", "process_system_cpu_s", "host_huge_pages")}))
"""


def _child(env_extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k != hostmem.ENV}
    done = subprocess.run([sys.executable, "-c", CHILD], env={**env, **env_extra}, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_child_env_adds_the_tunable_and_keeps_the_users(monkeypatch):
    monkeypatch.setattr(hostmem, "glibc_supports_tunable", lambda: True)
    assert hostmem.child_env({}) == {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    assert hostmem.child_env({"GLIBC_TUNABLES": ""}) == {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    other = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}
    assert hostmem.child_env(other) == {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"}
    # The user's own value wins, whatever it is (0 turns it off).
    for value in ("glibc.malloc.hugetlb=0", "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"):
        assert hostmem.child_env({"GLIBC_TUNABLES": value}) == {}
    monkeypatch.setattr(hostmem, "glibc_supports_tunable", lambda: False)
    assert hostmem.child_env({}) == {}


def test_a_command_is_started_again_at_most_once(monkeypatch):
    monkeypatch.setattr(hostmem, "glibc_supports_tunable", lambda: True)
    argv, env = hostmem.reexec_args({"HOME": "/root"})
    assert argv == sys.orig_argv and env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1" and env["HOME"] == "/root"
    # Started again, it does not start a third time, even without the tunable.
    assert hostmem.reexec_args({"HOME": "/root", hostmem.RESTARTED: "1"}) is None
    assert hostmem.reexec_args(env) is None


@pytest.mark.parametrize("mode, tunables, expected", [
    ("always [madvise] never", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "malloc"),
    ("always [madvise] never", "GLIBC_TUNABLES=glibc.malloc.hugetlb=0", "none"),
    ("always [madvise] never", "GLIBC_TUNABLES=glibc.malloc.arena_max=2", "none"),
    ("always [madvise] never", "HOME=/root", "none"),
    ("[always] madvise never", "HOME=/root", "always"),
    ("always madvise [never]", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "none"),
    (None, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "unknown"),
])
def test_huge_pages_reads_the_kernels_mode_and_the_start_environment(tmp_path, monkeypatch, mode, tunables,
                                                                     expected):
    monkeypatch.setattr(hostmem, "glibc_supports_tunable", lambda: True)
    thp, environ = tmp_path / "enabled", tmp_path / "environ"
    if mode is not None:
        thp.write_text(mode + "\n")
    environ.write_bytes(b"PATH=/bin\0" + tunables.encode() + b"\0")
    assert hostmem.huge_pages(thp, environ) == expected
    assert expected in hostmem.STATES


def _needs_madvise_mode():
    if not hostmem.glibc_supports_tunable():
        pytest.skip("needs Linux with glibc >= 2.35 (the glibc.malloc.hugetlb tunable)")
    mode = hostmem.thp_mode()
    if mode != "madvise":
        pytest.skip(f"the kernel's transparent-huge-page mode is {mode!r}: only 'madvise' lets a "
                    "process choose (always gives huge pages to all, never to none)")


def test_the_tunable_ends_the_page_faults_of_a_freed_and_remapped_block():
    _needs_madvise_mode()
    asked = _child(hostmem.child_env({}))
    plain = _child({hostmem.ENV: "glibc.malloc.hugetlb=0"})
    assert asked["host_huge_pages"] == "malloc" and plain["host_huge_pages"] == "none"
    # 64 MiB in 4 KiB pages is 16,384 faults per block; in 2 MiB pages, 32.
    assert plain["page_faults_per_step"] > 12_000, plain
    assert asked["page_faults_per_step"] < 2_000, asked
    # Kernel time is recorded on both sides; in this loop it is mostly the zeroing of 320 MiB,
    # which both page sizes pay, so it is not compared.
    assert plain["process_system_cpu_s"] >= 0 and asked["process_system_cpu_s"] >= 0


# A CNN whose step's temporaries (about 17 MB per feature map) are mapped fresh by malloc on
# every step of the host step loop: about 10,000 faults and a fifth of its CPU time in the
# kernel per step with 4 KiB pages on the project's host.
FAULTING_CNN = ["run", "cnn", "--block", "residual", "--blocks", "1", "--filters", "8", "--image", "128",
                "--output", "10", "--batch", "32", "--time-budget-s", "1", "--json"]


@pytest.mark.slow
def test_paradnn_run_starts_itself_again_with_huge_pages_and_notes_the_faults_without(paradnn_cmd):
    _needs_madvise_mode()
    env = {k: v for k, v in os.environ.items() if k != hostmem.ENV}
    records = {}
    for name, extra in (("asked", {}), ("plain", {hostmem.ENV: "glibc.malloc.hugetlb=0"})):
        done = subprocess.run([*paradnn_cmd, *FAULTING_CNN], env={**env, **extra}, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        records[name] = json.loads(done.stdout.strip().splitlines()[-1])  # a flat record
    asked, plain = records["asked"], records["plain"]
    assert asked["host_huge_pages"] == "malloc" and plain["host_huge_pages"] == "none"
    assert plain["page_faults_per_step"] > 5 * max(asked["page_faults_per_step"], 100.0)
    assert "page_faults" in plain["warnings"].split(",")
    assert "page_faults" not in asked["warnings"].split(",")
