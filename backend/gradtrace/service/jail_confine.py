"""The confinement of one run, made from inside the template (``service/jail_template.py``).

The template already lives in bubblewrap's namespaces (user, PID, network, mount, IPC, UTS,
cgroup; a read-only view of Python, torch and gradtrace; no environment): see
``service/jail_pool.py``. Each run is forked from it and, before the program's first line,
``enter_run_namespaces`` gives it namespaces of its own (a nested user namespace, so the run
holds capabilities only over what it creates; a PID namespace, so the run cannot see or signal
the template; a mount namespace with an empty ``/proc`` and a small private ``/tmp`` and
``/dev/shm``; IPC, UTS and cgroup namespaces), then the rlimits are set, every capability
dropped and the seccomp filter loaded.

Only the system calls Python's standard library lacks are made here through ``ctypes``
(``unshare``, ``mount``, ``capset``); the seccomp filter is built by libseccomp (``pyseccomp``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import socket
from dataclasses import dataclass

_CLONE_THREAD = 0x00010000
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_NAMESPACE_FLAG_BITS = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
)
# What each run makes: all but a network namespace. Its network is already the template's
# (bubblewrap's, loopback only), and the seccomp filter refuses every socket but AF_UNIX; a
# namespace per run would cost ~50 ms of its start (kernel set-up and teardown).
RUN_NAMESPACE_FLAGS = sum(_NAMESPACE_FLAG_BITS) - CLONE_NEWNET

_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_CAP_LAST = 63

# What no model needs and a jailed program could use against the host or the template:
# refused with EPERM (the program sees an OSError), never silently allowed.
REFUSED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "unshare",
    "setns",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "quotactl",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "iopl",
    "ioperm",
    "vhangup",
    "pidfd_getfd",
)


class ConfineError(Exception):
    """A confinement step failed: the run must not start."""


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise ConfineError(f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_run_namespaces() -> None:
    """In the freshly forked (single-threaded) run process: new user, PID, mount, IPC, UTS and
    cgroup namespaces. The PID namespace applies to this process's next child, which
    is the run itself (PID 1 there: when it ends, the kernel kills all it started)."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(ctypes.c_int(RUN_NAMESPACE_FLAGS)), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    # Mounts made from here on stay in this namespace.
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount private")


def _mount(source: bytes, target: bytes, kind: bytes | None, flags: int, data: bytes | None) -> None:
    _check(_libc.mount(source, target, kind, flags, data), f"mount {target.decode()}")


def mount_run_filesystems(tmp_mb: int) -> None:
    """In the run (PID 1 of its namespace): a private size-bounded ``/tmp`` and ``/dev/shm``
    and an empty read-only ``/proc`` (no process, the run's own included, is there to read);
    everything else stays bubblewrap's read-only view. Parts of that view that live under
    ``/tmp`` (Python or gradtrace installed there, as in a checkout made by ``mktemp -d``) are
    bound again, read-only as they were, on top of the new ``/tmp``."""
    kept = [(point, os.open(point, os.O_PATH | os.O_CLOEXEC)) for point in _mounts_under("/tmp")]
    options = f"size={tmp_mb}m,nr_inodes=4096,mode=1777".encode()
    _mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, options)
    for point, fd in kept:  # (through /proc/self/fd: the old paths are hidden now)
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(point, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(point), exist_ok=True)
            os.close(os.open(point, os.O_CREAT | os.O_WRONLY, 0o444))
        _mount(f"/proc/self/fd/{fd}".encode(), point.encode(), None, _MS_BIND | _MS_REC, None)
        os.close(fd)
    _mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options)
    _mount(
        b"tmpfs", b"/proc", b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY, b"size=4k,mode=555"
    )


def _mounts_under(directory: str) -> list[str]:
    """The outermost mount points strictly below ``directory`` (a bind mount made with
    ``MS_REC`` carries those below it)."""
    inside = directory.rstrip("/") + "/"
    with open("/proc/self/mountinfo", "rb") as mountinfo:
        # (the fifth field, with space, tab, newline and backslash written in octal)
        points = {_unescape(line.split()[4]) for line in mountinfo}
    outermost: list[str] = []
    for point in sorted((p for p in points if p.startswith(inside)), key=len):
        if not any(point.startswith(outer + "/") for outer in outermost):
            outermost.append(point)
    return outermost


def _unescape(field: bytes) -> str:
    return field.decode("unicode_escape").encode("latin-1").decode("utf-8", "surrogateescape")


def die_with_parent() -> None:
    """SIGKILL when the supervising process ends (the template kills it at the deadline)."""
    _check(_libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl PDEATHSIG")


@dataclass(frozen=True)
class RunLimits:
    cpu_s: int
    memory_mb: int  # address space beyond what the template already maps
    processes: int  # processes and threads of the run, beyond those it has at the start
    open_files: int
    file_mb: int


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise ConfineError("no VmSize in /proc/self/status")


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def set_rlimits(limits: RunLimits) -> None:
    address_space = _vm_size() + limits.memory_mb * 1024 * 1024
    # CPU: SIGXCPU at the soft limit (told apart as "cpu"), SIGKILL a second later.
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    for which, value in (
        (resource.RLIMIT_AS, address_space),
        (resource.RLIMIT_NPROC, _threads() + limits.processes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_FSIZE, limits.file_mb * 1024 * 1024),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MEMLOCK, 0),
    ):
        resource.setrlimit(which, (value, value))


def drop_capabilities() -> None:
    """No capability left, none to gain back (bounding set emptied, no_new_privs)."""
    for cap in range(_CAP_LAST + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            _check(-1, f"drop capability {cap}")

    class _Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class _Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header = _Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def load_seccomp() -> None:
    """The filter: REFUSED_SYSCALLS, new processes (fork, vfork, clone without CLONE_THREAD),
    namespace-making clones, sockets other than AF_UNIX and
    changing the death signal are refused with EPERM; clone3 (whose flags a filter cannot
    read) answers ENOSYS, so the C library falls back to clone; other architectures' system
    calls (the 32-bit ABI) kill the process (libseccomp's default for a foreign ABI)."""
    import pyseccomp as seccomp

    refuse = seccomp.ERRNO(errno.EPERM)
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in REFUSED_SYSCALLS:
        f.add_rule(refuse, name)
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # No new process (threads only): a fork bomb ends at its first fork, and no process
    # outlives its run. (RLIMIT_NPROC alone does not bind a jail whose outer user is root.)
    f.add_rule(refuse, "fork")
    f.add_rule(refuse, "vfork")
    f.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, 0))
    for flag in _NAMESPACE_FLAG_BITS:
        f.add_rule(refuse, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    f.add_rule(refuse, "socket", seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
    f.add_rule(refuse, "prctl", seccomp.Arg(0, seccomp.EQ, _PR_SET_PDEATHSIG))
    f.load()
