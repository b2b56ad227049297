"""The Open Bandit Dataset (Saito et al. 2021), small sample, for 001 Appendix A.

001 uses 100,000 rows randomly sub-sampled from the "Men" campaign of the full OBD
(about 26 million rows, https://research.zozo.com/data.html), which is not reachable here.
What is reachable is the sample that OpenBanditPipeline's wheel on PyPI ships:
``obp/dataset/obd/{bts,random}/{all,men,women}/{campaign}.csv`` (10,000 rows each) and
``item_context.csv``. ``fetch_from_obp_wheel`` (``make obd``) downloads the wheel with pip
(obp is never imported: its pins are old), extracts these files into
``<cache>/obd/`` and checks each against the SHA-256 below; the loader checks them again.

As in 001, the Bernoulli Thompson sampling log ("bts") is the logged data of HPO, split into
D_tr and D_val, and the uniform-random log is the test set: V(pi) is the IPS estimate on
it, mean pi(a_i|x_i) r_i / p_i with the random log's known propensities p_i = 1/K.

Contexts: one-hot user_feature_0..3 (categories from both logs, 26 columns for 'men'); with
``affinity=True`` also the user-item affinities, as OBP's default pre-processing. They are
off by default because they make LR's per-action inputs dense (d K = 2,040 columns for
'men') and one saga fit of 001's LR on 5,000 rows then takes about 6 s here (see
bench/results/opl.md for the default's cost). Positions are ignored (actions are items).
The logging policy pi0(a|x) at every context, needed for Eq. 12 and DR's direct term, is
not in the files (only the propensity of the logged item at its position); Thompson
sampling here ignores the context, so pi0(a|x) is taken as the item's frequency in the
bts log. IPS weights use the logged propensities. With about 0.5% clicks, 5,000 rows hold
some 35 clicks: far noisier than 001's 100,000 rows.

Offline route: copy the 12 files into ``<cache>/obd/`` keeping the layout (with a
``SHA256SUMS`` manifest for files other than the wheel's), or set ``logged_data.path`` to
a directory holding ``bts/`` and ``random/``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from sweeper_tasks.opl_hpo.data.base import LoggedBandit, Split, TestSet
from sweeper_tasks.storage import (
    DataFile,
    DatasetFormatError,
    DatasetMissingError,
    atomic_write_bytes,
    data_dir,
    sha256_file,
)
from sweeper_tasks.wheels import read_wheel_members

OBP_VERSION = "0.4.1"
WHEEL_PREFIX = "obp/dataset/obd/"
CAMPAIGNS = ("all", "men", "women")
POLICIES = ("bts", "random")
MANIFEST = "SHA256SUMS"
USER_FEATURES = ("user_feature_0", "user_feature_1", "user_feature_2", "user_feature_3")
#: SHA-256 of the files in obp 0.4.1's wheel (path relative to obp/dataset/obd/).
KNOWN_SHA256 = {
    "bts/all/all.csv": "0ad874e4dbf6902f0845dd478ad8dde5ef6903583d3ffaace78411bdad064106",
    "bts/all/item_context.csv": "5d4359ba1cfa3ae88f0f1bae66bd633859fe6323817183632ee57b83539d9153",
    "bts/men/item_context.csv": "3b411ed6b0471316321a6b93f4f756bb25888eac6218cd71d0b603d41d85732d",
    "bts/men/men.csv": "db6d1f7ed2d591ba521533e45286d4c1fba7fe57a8ad2e80342210335f43c527",
    "bts/women/item_context.csv": "a56295bad066a558eb783055afd9279f5f4e209a4776eafc22151c53f0ac89d4",  # noqa: E501
    "bts/women/women.csv": "e5d1b49a39b608585a2f3014a3f54970430cd37a495c1b73fceb85cdf428a5b8",
    "random/all/all.csv": "7168295b6e0a9eabcf3392320a5dd434e542b68e705d5cd9491499af589812f1",
    "random/all/item_context.csv": "eba04cc23d5f130a93ff174c5392986882b94c3839433cb8143870eaa6221358",  # noqa: E501
    "random/men/item_context.csv": "6d855c2b7e917d0448d71bbe62c023147495882c0fdc8c41e86fef86abf9fe09",  # noqa: E501
    "random/men/men.csv": "ede6d08c6877f99cd3770f7d09e26c738e6aa6de4445ccccfb1356ba5d06b1eb",
    "random/women/item_context.csv": "b1ca4905f97703d196004f2ad4552c1e90c2afad8b50688d333b0d2dc0b33147",  # noqa: E501
    "random/women/women.csv": "e65f3bd3beb17664fa69cc129bf7bf852a775f8ffa630506e505fc905315bb34",
}


def how_to_get(cache: Path) -> str:
    return (
        "The Open Bandit Dataset sample can be provided in any of these ways:\n"
        f"  - `make obd` (or `python -m sweeper_tasks.opl_hpo.data.obd`) extracts it from the obp "
        f"{OBP_VERSION} wheel on PyPI into {cache}/obd/;\n"
        "  - copy obp/dataset/obd/{bts,random}/... from that wheel (or the full OBD in the "
        f"same layout, with a {MANIFEST} file of `sha256  relative/path` lines) into "
        f"{cache}/obd/, or set logged_data.path=DIR to such a directory;\n"
        "  - set logged_data.cache_dir=DIR (or $SWEEPER_DATA_DIR) to a directory holding obd/."
    )


def campaign_files(campaign: str) -> list[str]:
    return [
        f"{policy}/{campaign}/{name}"
        for policy in POLICIES
        for name in (f"{campaign}.csv", "item_context.csv")
    ]


def obd_dir(path: str | Path | None, cache_dir: str | Path | None) -> Path:
    """The directory holding bts/ and random/: ``path`` if set, else <cache>/obd."""
    return Path(path).expanduser() if path else data_dir(cache_dir) / "obd"


def read_manifest(directory: Path) -> dict[str, str] | None:
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return None
    entries = {}
    for line in manifest.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            entries[name.strip()] = digest
    return entries


def write_manifest(directory: Path, names: list[str]) -> None:
    """Record the SHA-256 of ``names`` (relative paths) in ``directory``/SHA256SUMS."""
    lines = [f"{sha256_file(directory / name)}  {name}" for name in sorted(names)]
    atomic_write_bytes(directory / MANIFEST, ("\n".join(lines) + "\n").encode())


def check_files(directory: Path, campaign: str) -> list[Path]:
    """The campaign's four files, present and matching their SHA-256 (the directory's
    manifest if it has one, else the wheel's known digests), or a clear refusal."""
    expected = read_manifest(directory) or KNOWN_SHA256
    paths = []
    for name in campaign_files(campaign):
        path = directory / name
        if not path.is_file():
            raise DatasetMissingError(
                f"Open Bandit Dataset file {path} is missing.\n{how_to_get(directory.parent)}"
            )
        digest = sha256_file(path)
        if name not in expected or expected[name] != digest:
            raise DatasetFormatError(
                f"{path} has SHA-256 {digest}, not the expected "
                f"{expected.get(name, '(no entry)')}: a corrupted, truncated or different file."
                f" Extract it again (`make obd`) or, for your own copy, list it in "
                f"{directory / MANIFEST}."
            )
        paths.append(path)
    return paths


def fetch_from_obp_wheel(cache: str | Path | None = None) -> Path:
    """``pip download --no-deps obp==0.4.1`` and extract the OBD sample into <cache>/obd."""
    target = data_dir(cache) / "obd"
    members = read_wheel_members(
        "obp", OBP_VERSION, [WHEEL_PREFIX + name for name in KNOWN_SHA256], how_to_get(target)
    )
    for name in KNOWN_SHA256:
        atomic_write_bytes(target / name, members[WHEEL_PREFIX + name])
    for campaign in CAMPAIGNS:
        check_files(target, campaign)
    return target


def read_log(path: Path) -> pd.DataFrame:
    table = pd.read_csv(path, index_col=0)
    needed = {"item_id", "click", "propensity_score", *USER_FEATURES}
    if not needed <= set(table.columns):
        raise DatasetFormatError(
            f"{path} lacks the columns {sorted(needed - set(table.columns))} of an OBD log."
        )
    return table


def contexts(table: pd.DataFrame, categories: dict[str, np.ndarray], affinity: list[str]):
    """(n, d) one-hot user features followed by the user-item affinities."""
    blocks = [
        (table[name].to_numpy()[:, None] == categories[name][None, :]).astype(np.float64)
        for name in USER_FEATURES
    ]
    blocks.append(table[affinity].to_numpy(dtype=np.float64))
    return np.concatenate(blocks, axis=1)


class OBDLoggedData:
    """OBD's Thompson-sampling log as D_tr / D_val and its uniform-random log as the test.

    Parameters
    ----------
    campaign : 'men' (001 Appendix A), 'women' or 'all'.
    train_fraction : share of the bts rows in D_tr (the rest is D_val), split at random
        from the cell's data stream.
    path : directory holding bts/ and random/ (None: <cache_dir>/obd).
    cache_dir : the data cache (None: $SWEEPER_DATA_DIR or .cache/datasets).
    affinity : append the user-item affinity columns to the contexts.
    """

    def __init__(
        self,
        campaign: str = "men",
        train_fraction: float = 0.5,
        path: str | None = None,
        cache_dir: str | None = None,
        affinity: bool = False,
    ) -> None:
        if campaign not in CAMPAIGNS:
            raise ValueError(
                f"logged_data.campaign={campaign!r} is not one of {', '.join(CAMPAIGNS)}."
            )
        if not 0.0 < train_fraction < 1.0:
            raise ValueError(f"logged_data.train_fraction={train_fraction!r} must be in (0, 1).")
        self.campaign, self.train_fraction = campaign, float(train_fraction)
        self.affinity = bool(affinity)
        self.directory = obd_dir(path, cache_dir)

    def data_files(self) -> list[DataFile]:
        """The campaign's files, found without reading them (a dry run)."""
        present = all((self.directory / name).is_file() for name in campaign_files(self.campaign))
        missing = "make obd (the sample in OpenBanditPipeline's wheel on PyPI)"
        return [DataFile("Open Bandit Dataset sample", str(self.directory), present, missing)]

    def check(self) -> None:
        """The four files of the campaign exist and match their checksums."""
        check_files(self.directory, self.campaign)

    def generate(self, rng: np.random.Generator) -> LoggedBandit:
        bts_path, items_path, random_path, _ = check_files(self.directory, self.campaign)
        bts, test_log = read_log(bts_path), read_log(random_path)
        n_actions = len(pd.read_csv(items_path, index_col=0))
        both = pd.concat([bts, test_log])
        categories = {name: np.unique(both[name].astype(str)) for name in USER_FEATURES}
        for table in (bts, test_log):
            for name in USER_FEATURES:
                table[name] = table[name].astype(str)
        affinity = [c for c in bts.columns if c.startswith("user-item_affinity_")]
        affinity = affinity if self.affinity else []
        frequency = np.bincount(bts["item_id"].to_numpy(), minlength=n_actions) + 1e-12
        marginal = frequency / frequency.sum()

        def split(table: pd.DataFrame) -> Split:
            a = table["item_id"].to_numpy().astype(np.int64)
            return Split(
                x=contexts(table, categories, affinity),
                a=a,
                r=table["click"].to_numpy(dtype=np.float64),
                pscore=table["propensity_score"].to_numpy(dtype=np.float64),
                pi0=np.broadcast_to(marginal, (len(table), n_actions)),
            )

        order = rng.permutation(len(bts))
        cut = int(round(self.train_fraction * len(bts)))
        train, val = split(bts.iloc[order[:cut]]), split(bts.iloc[order[cut:]])
        test = split(test_log)
        return LoggedBandit(
            n_actions=n_actions,
            train=train,
            val=val,
            test=TestSet(x=test.x, pi0=test.pi0, a=test.a, r=test.r, pscore=test.pscore),
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Extract the OBD sample from the obp wheel.")
    parser.add_argument("--cache-dir", default=None, help="default: $SWEEPER_DATA_DIR or .cache")
    args = parser.parse_args(argv)
    target = fetch_from_obp_wheel(args.cache_dir)
    print(f"Open Bandit Dataset sample (obp {OBP_VERSION}) in {target}, checksums verified")


if __name__ == "__main__":
    main()
