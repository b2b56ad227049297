"""Is a sqlite store on a network file system? Read from the kernel's mount table, not guessed.

A sqlite store is safe only where the operating system's file locks hold: sqlite's own
locking and the driver's store lock (:mod:`sweeper.store.lock`) both rely on them, and over NFS
(and the other network file systems below) they are unreliable (the sqlite FAQ, "Can
multiple applications access the same database file at once?"; sqlite.org/lockingv3.html,
"How To Corrupt Your Database Files"). On a cluster the home and project directories are
usually such mounts, so a sweep started there against ``sqlite:///...`` is warned
(:func:`warn_network_sqlite`), with what to use instead: the tracking server on PostgreSQL.

The mount holding a path is the entry of ``/proc/self/mountinfo`` (proc(5)) whose mount point
is the longest prefix of the path's real location (symbolic links resolved); its file system
type is the field after the ``-`` separator.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import NamedTuple, TextIO

MOUNTINFO = Path("/proc/self/mountinfo")

NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph", "glusterfs",
        "fuse.glusterfs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.cephfs", "lustre",
        "gpfs", "beegfs", "fuse.beegfs", "pvfs2", "orangefs", "ocfs2", "gfs2",
    }
)  # fmt: skip
"""File system types whose file locks a sqlite store must not rely on: network and cluster
file systems (lock support depends on the server and mount options; sqlite's FAQ advises
against any of them)."""


class Mount(NamedTuple):
    """One line of ``/proc/self/mountinfo``: where it is mounted, its type and source."""

    mount_point: str
    fstype: str
    source: str


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash in paths as ``\\ooo`` (octal)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a ``/proc/<pid>/mountinfo`` text, in its order (later mounts on the
    same point hide earlier ones). Lines it cannot read are left out."""
    mounts = []
    for line in text.splitlines():
        before, separator, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not separator or len(fields) < 6 or len(tail) < 2:
            continue
        mounts.append(Mount(_unescape(fields[4]), tail[0], _unescape(tail[1])))
    return mounts


def mount_of(path: Path, mounts: list[Mount]) -> Mount | None:
    """The mount holding ``path``: the last-mounted entry whose mount point is the longest
    prefix of its real location (its nearest existing parent for a file not yet created)."""
    real = Path(os.path.realpath(path))
    best: Mount | None = None
    for mount in mounts:
        point = Path(mount.mount_point)
        if real == point or point in real.parents:
            if best is None or len(point.parts) >= len(Path(best.mount_point).parts):
                best = mount
    return best


def network_mount(path: Path, mountinfo: Path | None = None) -> Mount | None:
    """The network file system holding ``path``, or None (local, or no mount table).
    ``mountinfo``: the mount table to read (default :data:`MOUNTINFO`)."""
    try:
        mounts = parse_mountinfo((mountinfo or MOUNTINFO).read_text())
    except OSError:  # not Linux: nothing is known, nothing is said
        return None
    mount = mount_of(path, mounts)
    return mount if mount is not None and mount.fstype in NETWORK_FILESYSTEMS else None


def sqlite_file(uri: str | None) -> Path | None:
    """The file of a ``sqlite:///`` (or SQLAlchemy ``sqlite+driver:///``) URI, else None."""
    if not uri or not uri.startswith("sqlite") or ":///" not in uri:
        return None
    return Path(uri.split(":///", 1)[1]).expanduser().absolute()


def network_sqlite_warning(uri: str | None, mountinfo: Path | None = None) -> str | None:
    """The paragraph for a sqlite store on a network file system, or None."""
    path = sqlite_file(uri)
    mount = network_mount(path, mountinfo) if path is not None else None
    if mount is None:
        return None
    return (
        f"warning: the MLflow store {path} is a sqlite file on a network file system "
        f"({mount.fstype} {mount.source} at {mount.mount_point}). sqlite and the sweep's "
        "store lock rely on the operating system's file locks, which NFS and other network "
        "file systems do not keep reliably: two drivers may then both write the same cells, "
        "and a lock lost mid-write can corrupt the file. Use a tracking server on "
        "PostgreSQL instead (`make tracking-server`, or `python -m sweeper.servers "
        "--postgres --dir DIR`, on a login or service node) and sweep with "
        "tracking.uri=http://HOST:PORT tracking.database=postgresql+psycopg://...; or put "
        "the sqlite file on a local disk (e.g. under /tmp of the node running the driver) "
        "when one driver on one node is all you run."
    )


def warn_network_sqlite(
    *uris: str | None, out: TextIO | None = None, mountinfo: Path | None = None
) -> list[str]:
    """Print :func:`network_sqlite_warning` for each store URI (``tracking.uri``,
    ``tracking.database``) on a network file system; the paragraphs printed."""
    said = []
    for uri in dict.fromkeys(uris):  # the same store named twice is said once
        warning = network_sqlite_warning(uri, mountinfo)
        if warning is not None:
            print(warning, file=out or sys.stderr, flush=True)
            said.append(warning)
    return said
