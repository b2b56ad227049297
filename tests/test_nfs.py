"""The warning for a sqlite store on a network file system (sweeper/nfs.py).

This machine has no NFS server (no nfsd, no network), so an NFS mount is simulated the way
the kernel reports one: a mount table in ``/proc/self/mountinfo``'s format with an ``nfs4``
line, read through the same parser and lookup as the real table. The real table is read
too: for a directory of this machine its answer must equal ``findmnt``'s (util-linux), and,
as root, a tmpfs mounted in a private mount namespace (``unshare --mount``) must be found as
the mount holding the files under it (a real mount, looked up by the longest mount point).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import nfs

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
41 27 0:45 / /srv/home rw,relatime shared:20 - nfs4 fileserver:/export/home rw,vers=4.2
42 41 254:1 / /srv/home/alice/scratch rw,relatime - ext4 /dev/vdb rw
43 27 0:46 / /mnt/lab\\040share rw,relatime - cifs //nas/lab rw,vers=3.0
44 27 0:47 / /lustre rw - lustre 10.0.0.1@tcp:/fs rw
"""
"""A cluster's mount table: home on NFSv4 (a local scratch disk mounted inside it), a CIFS
share whose mount point has a space (escaped as the kernel does), and Lustre."""


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "mountinfo"
    path.write_text(MOUNTINFO)
    return path


def test_the_mount_table_is_parsed_as_the_kernel_writes_it():
    mounts = nfs.parse_mountinfo(MOUNTINFO + "garbage line without separator\n")
    assert [m.mount_point for m in mounts] == [
        "/proc", "/", "/srv/home", "/srv/home/alice/scratch", "/mnt/lab share", "/lustre",
    ]  # fmt: skip
    assert mounts[2] == nfs.Mount("/srv/home", "nfs4", "fileserver:/export/home")


@pytest.mark.parametrize(
    ("path", "fstype"),
    [
        ("/srv/home/alice/sweeps/mlflow.db", "nfs4"),
        ("/srv/home", "nfs4"),
        ("/srv/home/alice/scratch/mlflow.db", None),  # a local disk mounted inside the NFS home
        ("/srv/homework/mlflow.db", None),  # a prefix of the name is not a parent directory
        ("/mnt/lab share/mlflow.db", "cifs"),
        ("/lustre/project/mlflow.db", "lustre"),
        ("/tmp/mlflow.db", None),
    ],
)
def test_the_mount_holding_a_path_is_the_longest_mount_point(table, path, fstype):
    mount = nfs.network_mount(Path(path), table)
    assert (mount.fstype if mount else None) == fstype


def test_a_symbolic_link_is_followed_to_where_the_file_really_is(table, tmp_path):
    (tmp_path / "project").symlink_to("/srv/home/alice/project")
    mount = nfs.network_mount(tmp_path / "project" / "mlflow.db", table)
    assert mount is not None and mount.mount_point == "/srv/home"


def test_a_sqlite_store_on_nfs_is_warned_with_why_and_what_to_use(table):
    out = io.StringIO()
    said = nfs.warn_network_sqlite(
        "sqlite:////srv/home/alice/mlflow.db",
        "sqlite:////srv/home/alice/mlflow.db",  # tracking.database naming the same file
        out=out,
        mountinfo=table,
    )
    assert len(said) == 1 and out.getvalue() == said[0] + "\n"
    text = said[0]
    assert "/srv/home/alice/mlflow.db" in text and "nfs4 fileserver:/export/home" in text
    assert "file locks" in text and "PostgreSQL" in text and "make tracking-server" in text
    assert "\n" not in text  # one paragraph


@pytest.mark.parametrize(
    "uri",
    [
        "sqlite:////tmp/mlflow.db",  # local disk
        "sqlite:////srv/home/alice/scratch/mlflow.db",  # local disk inside the NFS home
        "http://login1:5000",  # a tracking server: its own store is its business
        "postgresql+psycopg://postgres@db:5432/mlflow",
        None,
    ],
)
def test_stores_off_network_file_systems_are_not_warned(table, uri):
    out = io.StringIO()
    assert nfs.warn_network_sqlite(uri, out=out, mountinfo=table) == []
    assert out.getvalue() == ""


def test_sqlalchemy_driver_uris_and_relative_paths_name_their_file(tmp_path):
    assert nfs.sqlite_file(f"sqlite+pysqlite:///{tmp_path}/a.db") == tmp_path / "a.db"
    assert nfs.sqlite_file("sqlite:///mlflow.db") == Path.cwd() / "mlflow.db"
    assert nfs.sqlite_file("file:///tmp/mlruns") is None


def test_no_mount_table_means_nothing_is_said(tmp_path):
    assert nfs.network_sqlite_warning("sqlite:////srv/x.db", tmp_path / "missing") is None


def test_this_machines_table_agrees_with_findmnt(tmp_path):
    mount = nfs.mount_of(tmp_path, nfs.parse_mountinfo(nfs.MOUNTINFO.read_text()))
    found = subprocess.run(
        ["findmnt", "--noheadings", "--output", "TARGET,FSTYPE", "--target", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert mount is not None and [mount.mount_point, mount.fstype] == found


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a file system needs root (docs/faults.md)")
def test_a_real_mount_is_found_in_the_real_table(tmp_path):
    """A tmpfs mounted on ``tmp_path/mnt`` in a private mount namespace: the lookup on
    /proc/self/mountinfo of a process inside it names that tmpfs, not the disk around it."""
    (tmp_path / "mnt").mkdir()
    probe = (
        "import sys; from pathlib import Path; from sweeper import nfs; "
        "m = nfs.mount_of(Path(sys.argv[1]), nfs.parse_mountinfo(nfs.MOUNTINFO.read_text())); "
        "print(m.mount_point, m.fstype, m.source)"
    )
    script = (
        f"mount -t tmpfs sweeper-test {tmp_path}/mnt && "
        f"{sys.executable} -c '{probe}' {tmp_path}/mnt/mlflow.db"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"{tmp_path}/mnt", "tmpfs", "sweeper-test"]


def test_a_sweep_into_a_sqlite_store_on_nfs_says_so_first(tmp_path, composer, monkeypatch, capsys):
    """The driver calls the warning before anything runs (the sweep itself goes on)."""
    from sweeper.sweep import run_sweep

    table = tmp_path / "mountinfo"
    table.write_text(MOUNTINFO + f"45 27 0:48 / {tmp_path} rw - nfs4 filer:/scratch rw\n")
    monkeypatch.setattr(nfs, "MOUNTINFO", table)
    overrides = ["task=toy", "launcher.name=local", "seeds=1", "horizon=5",
                 f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", "experiment.name=nfs"]  # fmt: skip
    result = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert result.exit_code == 0
    warned = capsys.readouterr().err
    assert f"{tmp_path}/mlflow.db" in warned and "nfs4 filer:/scratch" in warned
