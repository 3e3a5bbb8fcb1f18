"""A seccomp filter for the sandbox, compiled with libseccomp (through ctypes) to the BPF
program bubblewrap loads with ``--seccomp FD``.

Namespaces already take most of the kernel's surface out of reach; the filter
is the second wall, for the system calls that attack the kernel or the other
processes directly. Denied with ``EPERM`` (``ENOSYS`` for ``clone3``, so the C
library falls back to ``clone``, whose flags the filter can read):

* tracing and reading other processes' memory: ``ptrace``, ``process_vm_readv/writev``;
* namespaces and mounts: ``clone``/``unshare`` with ``CLONE_NEWUSER``, ``setns``,
  ``mount``, ``umount2``, ``pivot_root``, ``chroot``, ``open_by_handle_at``;
* kernel attack surface: ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``keyctl``, ``add_key``, ``request_key``, ``io_uring_*``, module and ``kexec``
  loading, ``reboot``, ``syslog``, ``acct``, ``swapon/off``, clock setting;
* the new mount API (``fsopen``, ``fsmount``, ``move_mount``, ``open_tree``, ...),
  ``pidfd_getfd``, ``process_madvise``, ``kcmp``;
* any socket that is not ``AF_UNIX`` (the network namespace has no route out
  anyway); ``connect``, ``bind``, ``listen``, ``accept`` and ``accept4`` on any socket
  (`NETWORK_SYSCALLS`); datagram sockets and socketpairs (``sendto`` with an address
  needs no ``connect``); injecting terminal input with ``ioctl(TIOCSTI)``;
* memory outside the sandbox's bounds and per-user kernel objects: SysV IPC, POSIX
  message queues, memfds, inotify (`MEMORY_SYSCALLS`); socket buffers raised past their
  default (``setsockopt`` of ``SO_SNDBUF``/``SO_RCVBUF``) and pipes resized
  (``fcntl(F_SETPIPE_SZ)``), kernel memory that no limit counts.

System calls of another ABI (32-bit ``int 0x80``, x32) do not match the filter's
architecture: libseccomp's default for a foreign architecture kills the process, and
x32 numbers on x86-64 are refused the same way.

Everything else is allowed: it is an allow-by-default filter over a process
that already has no privileges, no network and no view of the host. Where
libseccomp is missing, `filter_program` returns None and the sandbox runs
without the filter (`seccomp_missing` says why; docs/sandbox.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os

__all__ = [
    "DENIED_SYSCALLS",
    "MEMORY_SYSCALLS",
    "NETWORK_SYSCALLS",
    "filter_program",
    "seccomp_missing",
]

DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "setns",
    "unshare",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_by_handle_at",
    "name_to_handle_at",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "syslog",
    "acct",
    "swapon",
    "swapoff",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "fanotify_init",
    "lookup_dcookie",
    "quotactl",
    # the new mount API (a mount namespace's surface, like mount)
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    # other processes' descriptors and memory
    "pidfd_getfd",
    "process_madvise",
    "kcmp",
)

NETWORK_SYSCALLS = ("connect", "bind", "listen", "accept", "accept4")
"""Refused outright: the sandbox's only sockets are ``AF_UNIX`` (``socket`` and
``socketpair`` are refused any other family, and an admitted connection arrives as one end
of a socketpair, which needs none of these). seccomp cannot read the address behind
``connect``'s pointer nor the family of a descriptor, so it cannot refuse these calls for
some families only; refusing them all is the second wall behind the relay."""

MEMORY_SYSCALLS = (
    "shmget",
    "msgget",
    "semget",
    "mq_open",
    "memfd_create",
    "memfd_secret",
    "inotify_init",
    "inotify_init1",
)
"""Refused: memory no tmpfs size or address-space limit counts (SysV shared memory, message
queues and semaphores, POSIX message queues, memfds) and inotify instances, which the kernel
counts per host user across every sandbox of that user."""

_ALLOW = 0x7FFF0000
_CMP_NE = 1
_CMP_MASKED_EQ = 7
_AF_UNIX = 1
_CLONE_NEWUSER = 0x10000000
_TIOCSTI = 0x5412
_SOL_SOCKET = 1
_SOCK_TYPE_MASK = 0xF
_DATAGRAM_TYPES = (2, 3)
"""SOCK_DGRAM, and SOCK_RAW, which AF_UNIX makes a datagram socket."""
_BUFFER_OPTIONS = (7, 8, 32, 33)
"""SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE: refused, so every socket keeps the
kernel's default buffers (raised to 4 MiB each, one sandbox's socketpairs held 1.1-1.4 GiB
of the host's memory; tests/sandbox/test_limits.py)."""
_F_SETPIPE_SZ = 1031


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


def _library() -> ctypes.CDLL | str:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        return f"libseccomp is not installed ({exc}); install the Debian package libseccomp2"
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.seccomp_release.restype = None
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    return lib


@functools.cache
def _compiled() -> bytes | str:
    """The BPF program, or the reason it cannot be built (computed once per process)."""
    lib = _library()
    if isinstance(lib, str):
        return lib
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        return "libseccomp could not start a filter (seccomp_init failed)"
    try:

        def rule(name: str, action: int, *cmps: tuple[int, int, int, int]) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:  # not a system call on this architecture
                return
            array = (_ArgCmp * max(len(cmps), 1))(*(_ArgCmp(*c) for c in cmps))
            status = lib.seccomp_rule_add_array(ctx, action, number, len(cmps), array)
            if status < 0:
                raise OSError(-status, f"seccomp rule for {name} refused")

        eperm = _errno(errno.EPERM)
        for name in (*DENIED_SYSCALLS, *NETWORK_SYSCALLS, *MEMORY_SYSCALLS):
            rule(name, eperm)
        rule("clone3", _errno(errno.ENOSYS))
        rule("clone", eperm, (0, _CMP_MASKED_EQ, _CLONE_NEWUSER, _CLONE_NEWUSER))
        rule("socket", _errno(errno.EAFNOSUPPORT), (0, _CMP_NE, _AF_UNIX, 0))
        rule("socketpair", _errno(errno.EAFNOSUPPORT), (0, _CMP_NE, _AF_UNIX, 0))
        rule("ioctl", eperm, (1, _CMP_MASKED_EQ, 0xFFFFFFFF, _TIOCSTI))
        # no datagram sockets: sendto/sendmsg with an address needs no connect, and a
        # read-only bind does not stop it reaching a host service's socket
        for name in ("socket", "socketpair"):
            for kind in _DATAGRAM_TYPES:
                rule(name, eperm, (1, _CMP_MASKED_EQ, _SOCK_TYPE_MASK, kind))
        # kernel memory no bound counts: socket buffers raised past their default (up to
        # net.core.wmem_max/rmem_max each) and pipes resized past 64 KiB
        for option in _BUFFER_OPTIONS:
            rule(
                "setsockopt",
                eperm,
                (1, _CMP_MASKED_EQ, 0xFFFFFFFF, _SOL_SOCKET),
                (2, _CMP_MASKED_EQ, 0xFFFFFFFF, option),
            )
        rule("fcntl", eperm, (1, _CMP_MASKED_EQ, 0xFFFFFFFF, _F_SETPIPE_SZ))
        read, write = os.pipe()
        try:
            if lib.seccomp_export_bpf(ctx, write) < 0:
                return "libseccomp could not export the filter"
            os.close(write)
            write = -1
            chunks = []
            while chunk := os.read(read, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(read)
            if write >= 0:
                os.close(write)
    except OSError as exc:
        return f"libseccomp refused the filter: {exc}"
    finally:
        lib.seccomp_release(ctx)


def filter_program() -> bytes | None:
    """The BPF program for ``bwrap --seccomp``, or None where libseccomp is missing."""
    program = _compiled()
    return program if isinstance(program, bytes) else None


def seccomp_missing() -> str | None:
    """Why the sandbox runs without a seccomp filter here (None: it has one)."""
    program = _compiled()
    return program if isinstance(program, str) else None
