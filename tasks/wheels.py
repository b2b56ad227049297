"""Files shipped inside a wheel on PyPI, read without installing the package.

``pip download --no-deps --only-binary=:all: PACKAGE==VERSION`` into a scratch directory,
then the wanted members are read from the wheel (a zip archive). MovieLens 100K (RecBole's
wheel) and the Open Bandit Dataset's sample (obp's wheel) come this way.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from sweeper_tasks.storage import DatasetMissingError


def read_wheel_members(
    package: str, version: str, members: Iterable[str], how_to_get: str
) -> dict[str, bytes]:
    """The bytes of ``members`` of PACKAGE==VERSION's wheel; ``how_to_get`` ends errors."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                   "--only-binary=:all:", f"{package}=={version}", "-d", scratch]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        wheels = sorted(Path(scratch).glob(f"{package.replace('-', '_')}-*.whl"))
        if done.returncode != 0 or not wheels:
            raise DatasetMissingError(
                f"`{' '.join(command)}` failed (exit {done.returncode}): "
                f"{done.stderr.strip()[-2000:]}\n{how_to_get}"
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            try:
                return {name: wheel.read(name) for name in members}
            except KeyError as err:
                raise DatasetMissingError(
                    f"{wheels[0].name} lacks {err}: not the expected release.\n{how_to_get}"
                ) from err
