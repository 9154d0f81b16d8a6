"""Writing a file atomically, and cleaning up after writers that were killed.

The bytes go to a temporary file ``.<name>.<pid>.<random>.tmp`` next to the target, are flushed and
fsynced, and the temporary replaces the target in one ``os.replace``; a failure at any point removes
the temporary and leaves the previous file untouched.  Writing through a symlink writes the link's
target and keeps the link; writing over a file keeps its permission bits.  A process killed mid-write
(``kill -9``, a power cut) cannot remove its temporary, so each write first removes the stale
temporaries of its target: a writer holds an ``flock`` on its temporary from before its first byte
until the rename, so an unlocked temporary with data is debris, and so is an empty one whose process
is gone (where there is no ``flock``, on Windows, nothing is removed).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from typing import Optional

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``'s target, fsync it, then rename it over the
    target."""
    target = os.path.realpath(path)  # a symlink stays, and the rename stays within one directory
    directory, base = os.path.split(target)
    _remove_stale_temporaries(directory, base)
    tmp = os.path.join(directory, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    held = None
    try:
        with os.fdopen(fd, "wb") as f:
            held = _hold(fd)
            _keep_mode(tmp, target)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        if held is not None:
            os.close(held)
    _fsync_directory(directory)


def _hold(fd: int) -> Optional[int]:
    """Lock the temporary until it has replaced the target, so that other saves know it is live.

    The lock is taken through a duplicate descriptor, which outlives the file object (closed before
    the rename, since Windows cannot rename an open file); the caller closes it.  None where there is
    no ``flock`` or the filesystem refuses it: there no save removes temporaries it cannot tell apart.
    """
    if fcntl is None:
        return None
    held = os.dup(fd)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # blocks only while another save looks at this new file
    except OSError:
        os.close(held)
        return None
    return held


def _keep_mode(tmp: str, target: str) -> None:
    """Give the temporary the permission bits of the file it replaces (a 0600 checkpoint stays 0600);
    a new file keeps what ``os.open`` gave it, 0666 less the umask."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return
    os.chmod(tmp, mode)


def _remove_stale_temporaries(directory: str, base: str) -> None:
    """Remove the temporaries of ``base`` that killed saves left behind (live saves' are locked)."""
    if fcntl is None:
        return
    pattern = re.compile(re.escape(f".{base}.") + r"(\d+)\.[0-9a-f]{8}\.tmp")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match and int(match[1]) != os.getpid():  # this process's own are live saves of other threads
            _remove_if_stale(os.path.join(directory, name), int(match[1]))


def _remove_if_stale(tmp: str, pid: int) -> None:
    """Remove ``tmp`` unless a live save holds it.  A save locks its temporary before writing a byte,
    so an unlocked one with data is debris; an empty one may be a new save's, not locked yet, and is
    debris only when its process is gone."""
    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO planted there must not block the save
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and (st.st_size > 0 or not _alive(pid)):
            os.unlink(tmp)
    except OSError:
        pass  # locked by a live save, or removed by another save meanwhile
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0 only asks whether the process exists (POSIX; callers have flock)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # someone else's process, or a pid no process can have: leave its file alone
    return True


def _fsync_directory(directory: str) -> None:
    """Make the rename durable; not every platform can open a directory (Windows cannot)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
