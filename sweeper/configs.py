"""The config directories Hydra searches, read as Hydra reads them.

A grid (``sweep.grid``), ``-m`` and the report name config groups and options
(``tuner: [cdt, mine]``). They must see exactly what Hydra can compose: the shipped
``conf/`` (:data:`sweeper.paths.CONF_DIR`) and every directory the command line adds with
``--config-dir DIR`` (searched first) or ``hydra.searchpath=[file://DIR]`` (searched after
the shipped configs). :meth:`ConfigSearch.current` takes that search path from the running
Hydra app; a program that is not one (``sweeper-report``) gives its directories with
:meth:`ConfigSearch.with_dirs`.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from sweeper.paths import CONF_DIR


@dataclass(frozen=True)
class ConfigSearch:
    """Config directories in Hydra's search order: a group's options are the union of its
    YAML files in every directory; a file is the first directory's that has it."""

    directories: tuple[Path, ...]

    @classmethod
    def current(cls) -> ConfigSearch:
        """The running Hydra app's search path (``--config-dir`` and ``hydra.searchpath``
        included), else the shipped configs alone."""
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.hydra_config import HydraConfig

        hydra = GlobalHydra.instance()
        if not hydra.is_initialized():
            return cls((CONF_DIR,))
        entries = [element.path for element in hydra.config_loader().get_search_path().get_path()]
        if HydraConfig.initialized():
            entries += list(HydraConfig.get().searchpath or [])
        return cls.of(entries)

    @classmethod
    def of(cls, entries: Iterable[str]) -> ConfigSearch:
        """From Hydra search path entries (``file://DIR``, ``pkg://package``, ``DIR``)."""
        directories = [d for d in (_directory(e) for e in entries) if d is not None]
        return cls(tuple(dict.fromkeys(directories)))

    @classmethod
    def with_dirs(cls, extra: Sequence[str | Path] = ()) -> ConfigSearch:
        """``--config-dir`` directories first, then the shipped configs (Hydra's order)."""
        return cls((*(Path(d).expanduser().resolve() for d in extra), CONF_DIR))

    def options(self, group: str) -> list[str]:
        """The option names of a config group: ``GROUP/*.yaml`` in any directory."""
        names = {p.stem for d in self.directories for p in (d / group).glob("*.yaml")}
        return sorted(names)

    def groups(self) -> list[str]:
        """The top-level config groups (directories holding YAML files)."""
        found = {p.parent.name for d in self.directories for p in d.glob("*/*.yaml")}
        return sorted(found - {"hydra"})

    def is_group(self, key: str) -> bool:
        return "." not in key and any((d / key).is_dir() for d in self.directories)

    def find(self, group: str, option: str) -> Path | None:
        """The file of ``GROUP/OPTION.yaml`` Hydra would load, or None."""
        for directory in self.directories:
            path = directory / group / f"{option}.yaml"
            if path.is_file():
                return path
        return None

    def searchpath_override(self) -> list[str]:
        """``hydra.searchpath=[...]`` naming every directory but the shipped configs (which
        Hydra searches already), or [] when there is none: for a composition outside the app."""
        return searchpath_override([f"file://{d}" for d in self.directories if d != CONF_DIR])

    def check_option(self, group: str, value: str) -> None:
        """Raise ``ValueError`` naming the valid options when ``value`` is not one."""
        options = self.options(group)
        if str(value) not in options:
            raise ValueError(
                f"unknown {group} '{value}'; valid {group} names are: {', '.join(options)}"
                f"{self._where()}"
            )

    def _where(self) -> str:
        shipped = len(self.directories) == 1 and self.directories[0] == CONF_DIR
        hint = " (an option of your own: add its directory with --config-dir DIR)"
        return hint if shipped else f" (searched: {', '.join(map(str, self.directories))})"


def _directory(entry: str) -> Path | None:
    if entry.startswith("pkg://"):
        try:
            found = importlib.resources.files(entry[len("pkg://") :].replace("/", "."))
        except ModuleNotFoundError:
            return None
        path = Path(str(found))
    elif entry.startswith("structured://"):
        return None
    else:
        path = Path(entry.removeprefix("file://")).expanduser().resolve()
    return path if path.is_dir() else None


def compose(overrides: list[str]) -> DictConfig:
    """The root config composed with ``overrides`` on the running app's search path.

    ``hydra.searchpath`` is a Hydra setting, not one of the job's overrides: it is added
    again here, so that every composition of a grid sees the directories the command line
    added (``--config-dir`` is part of the app's search path already).
    """
    import hydra
    from hydra.core.hydra_config import HydraConfig

    from sweeper.schema import COMPOSITION_ERRORS, composition_error

    searchpath = list(HydraConfig.get().searchpath or []) if HydraConfig.initialized() else []
    try:
        return hydra.compose(
            config_name="config", overrides=[*overrides, *searchpath_override(searchpath)]
        )
    except COMPOSITION_ERRORS as err:  # bad input: one paragraph (exit status 2)
        raise composition_error(err) from None


def searchpath_override(entries: list[str]) -> list[str]:
    """The override ``hydra.searchpath=['...', ...]`` for ``entries``, or [] for none."""
    return [f"hydra.searchpath=[{','.join(repr(str(e)) for e in entries)}]"] if entries else []
