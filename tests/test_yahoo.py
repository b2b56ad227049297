"""Yahoo! R6A: the parser and the bandit on small logs written in R6A's exact format."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from sweeper.grid import cell_config, group_options
from sweeper_tasks.bandit_tuning.cell import run_cell, validate
from sweeper_tasks.bandit_tuning.environments import yahoo_data as yd
from sweeper_tasks.bandit_tuning.environments.yahoo import Yahoo
from sweeper_tasks.bandit_tuning.seeding import environment_rng
from sweeper_tasks.storage import DatasetFormatError, DatasetMissingError
from tests.data_fixtures import r6a_line, write_r6a

BASE = 1241160900  # R6A's first timestamp (2009-05-01), a multiple of 300 s
FEATURES = {
    101: (1.0, 0.3, 0.0, 0.1, 0.2, 0.4),
    102: (1.0, 0.1, 0.5, 0.1, 0.2, 0.1),
    103: (1.0, 0.0, 0.0, 1.0, 0.0, 0.0),
    104: (1.0, 0.2, 0.2, 0.2, 0.2, 0.2),
}


def _pool(*ids: int) -> dict:
    return {i: FEATURES[i] for i in ids}


def _visits() -> list[str]:
    """Three non-empty 5-minute steps (the one at BASE + 600 has no visit).

    step 0: pool {101, 102, 103}; 101 shown 4 times (1 click), 102 3 (2), 103 2 (0).
    step 1: pool {101, 102} then {101, 102, 104}; 101 2 (1), 102 1 (0), 104 1 (1).
    step 2: pool {103, 104} plus 105, whose features are incomplete everywhere (dropped);
            103 shown 3 (3), 104 1 (0); one visit shows 101, absent from its pool (skipped).
    """
    p0, p1a, p1b = _pool(101, 102, 103), _pool(101, 102), _pool(101, 102, 104)
    lines = [r6a_line(BASE, 101, c, p0) for c in (1, 0, 0)]
    lines += [r6a_line(BASE + 120, 102, c, p0) for c in (1, 1, 0)]
    lines += [r6a_line(BASE + 120, 101, 0, p0), r6a_line(BASE + 299, 103, 0, p0)]
    lines += [r6a_line(BASE + 240, 103, 0, p0)]
    lines += [r6a_line(BASE + 300, 101, 1, p1a), r6a_line(BASE + 300, 102, 0, p1a)]
    lines += [r6a_line(BASE + 300, 101, 0, p1b), r6a_line(BASE + 420, 104, 1, p1b)]
    p2 = _pool(103, 104)
    incomplete = r6a_line(BASE + 900, 103, 1, p2) + " |105 2:0.100000 3:0.200000 1:1.000000"
    lines += [incomplete, r6a_line(BASE + 900, 103, 1, p2), r6a_line(BASE + 960, 103, 1, p2)]
    lines += [
        r6a_line(BASE + 960, 104, 0, p2),
        incomplete.replace(f"{BASE + 900} 103 1", f"{BASE + 900} 105 1"),
    ]
    lines += [r6a_line(BASE + 1000, 101, 1, p2)]  # shown article not in the pool: skipped
    return lines


EXPECTED = [  # per step: article -> (displays, clicks)
    {101: (4, 1), 102: (3, 2), 103: (2, 0)},
    {101: (2, 1), 102: (1, 0), 104: (1, 1)},
    {103: (3, 3), 104: (1, 0)},
]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """The visits split over two daily files, named like the Webscope files."""
    lines = _visits()
    directory = tmp_path / "R6"
    write_r6a(directory / "ydata-fp-td-clicks-v1_0.20090501.gz", lines[:9])
    write_r6a(directory / "ydata-fp-td-clicks-v1_0.20090502.gz", lines[9:])
    (directory / "README.txt").write_text("not a log file")
    return directory


def _by_step(log: yd.ClickLog) -> list[dict[int, tuple[int, int]]]:
    steps = []
    for t in range(log.n_steps):
        rows = slice(log.offsets[t], log.offsets[t + 1])
        ids = log.article_ids[log.articles[rows]]
        steps.append(
            {
                int(i): (int(d), int(c))
                for i, d, c in zip(ids, log.displays[rows], log.clicks[rows], strict=True)
            }
        )
    return steps


def test_parser_builds_per_step_pools_and_counts(log_dir):
    log = yd.parse_r6a(yd.find_r6a_files(log_dir), bucket_seconds=300)
    assert log.n_steps == 3
    assert list(log.step_start) == [BASE, BASE + 300, BASE + 900]
    assert _by_step(log) == EXPECTED
    assert log.lines == len(_visits()) and log.skipped_lines == 1
    assert 105 not in set(log.article_ids)  # never had all six features
    for article, values in FEATURES.items():
        row = list(log.article_ids).index(article)
        np.testing.assert_allclose(log.article_features[row], values)  # index 1 first


def test_one_file_and_wider_buckets(tmp_path):
    path = write_r6a(tmp_path / "one.txt", _visits(), compress=False)
    log = yd.parse_r6a([path], bucket_seconds=1200)
    # BASE = 1034300 * 1200 + 900: 20-minute buckets join steps 1 and 2.
    assert list(log.step_start) == [BASE - 900, BASE + 300]
    assert _by_step(log)[1] == {101: (2, 1), 102: (1, 0), 103: (3, 3), 104: (2, 1)}
    assert yd.find_r6a_files(path) == [path]


def test_environment_serves_pools_features_and_click_through_rates(log_dir, tmp_path):
    env = Yahoo(path=str(log_dir), cache_dir=str(tmp_path / "cache"))
    env.reset(3, "logistic", environment_rng("yahoo", 0))
    overall = 8 / 17  # clicks / displays over the whole log
    sizes = []
    for t, expected in enumerate(EXPECTED):
        features, means = env.observe(t)
        sizes.append(env.n_arms)
        assert features.shape == (len(expected), 6) == (env.n_arms, env.n_features)
        assert np.all(np.linalg.norm(features, axis=1) <= 1.0 + 1e-12)
        rates = [(c + 10 * overall) / (d + 10) for d, c in expected.values()]
        np.testing.assert_allclose(means, rates)
        assert np.all((means > 0) & (means < 1))
        # Features are the articles' own, scaled by one factor into the unit ball.
        raw = np.array([FEATURES[i] for i in expected])
        np.testing.assert_allclose(
            features
            * np.linalg.norm(raw, axis=1)[:, None]
            / np.linalg.norm(features, axis=1)[:, None],
            raw,
        )
    assert sizes == [3, 3, 2]
    longest = max(np.linalg.norm(v) for v in FEATURES.values())
    env.observe(0)
    np.testing.assert_allclose(env.observe(0)[0][0], np.array(FEATURES[101]) / longest)


def test_raw_rates_without_the_prior(log_dir, tmp_path):
    env = Yahoo(path=str(log_dir), cache_dir=str(tmp_path), ctr_prior_displays=0)
    env.reset(3, "logistic", environment_rng("yahoo", 0))
    np.testing.assert_allclose(env.observe(0)[1], [1 / 4, 2 / 3, 0 / 2])


def test_rewards_are_bernoulli_with_one_uniform_per_round(log_dir, tmp_path):
    env = Yahoo(path=str(log_dir), cache_dir=str(tmp_path), ctr_prior_displays=0)
    draws = []
    for seed in range(400):
        env.reset(3, "linear", environment_rng("yahoo", seed))  # the model does not matter
        _, means = env.observe(0)
        rewards = [env.reward(a) for a in range(env.n_arms)]
        order = np.argsort(means)
        assert np.all(np.diff(np.array(rewards)[order]) >= 0)
        draws.append(rewards)
    np.testing.assert_allclose(np.mean(draws, axis=0), [1 / 4, 2 / 3, 0], atol=0.07)


def test_same_seed_same_rewards(log_dir, tmp_path):
    def run(seed):
        env = Yahoo(path=str(log_dir), cache_dir=str(tmp_path))
        env.reset(3, "logistic", environment_rng("yahoo", seed))
        return [(env.observe(t), env.reward(0))[1] for t in range(3)] + [env._uniform.tolist()]

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_regret_from_expected_rewards_and_a_cell_on_the_log(composer, log_dir, tmp_path):
    env = Yahoo(path=str(log_dir), cache_dir=str(tmp_path))
    env.reset(3, "logistic", environment_rng("yahoo", 0))
    best = [int(np.argmax(env.observe(t)[1])) for t in range(3)]
    env.reset(3, "logistic", environment_rng("yahoo", 0))
    assert [list(EXPECTED[t])[best[t]] for t in range(3)] == [102, 104, 103]
    algorithms = [a for a in ("linucb", "ucb_glm") if a in group_options("algorithm")]
    for algorithm in algorithms:
        config = cell_config(
            composer(
                [
                    f"algorithm={algorithm}",
                    "dataset=yahoo",
                    f"dataset.path={log_dir}",
                    f"dataset.cache_dir={tmp_path}",
                    "horizon=3",
                    # a click log has no theta*: LinUCB's S is a number here
                    *(["algorithm.norm_bound=1.0"] if algorithm == "linucb" else []),
                ]
            )
        )
        validate(config)
        regret = run_cell(config)["curves"]["regret"]
        assert regret.shape == (3,) and np.all(np.diff(regret) >= 0) and regret[0] >= 0


def test_horizon_longer_than_the_log_is_refused(log_dir, tmp_path):
    env = Yahoo(path=str(log_dir), cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="3 time steps .* set horizon=3"):
        env.reset(4, "logistic", environment_rng("yahoo", 0))
    with pytest.raises(ValueError, match="3 time steps"):
        env.check(horizon=4)
    env.check(horizon=3)
    env.check()


def test_parsed_log_is_cached_on_disk_and_reused(log_dir, tmp_path, monkeypatch):
    first = yd.r6a_log(log_dir, tmp_path, 300)
    assert len(list((tmp_path / yd.CACHE_SUBDIR).glob("parsed-*.npz"))) == 1
    yd._MEMO.clear()

    def refuse(*args, **kwargs):
        raise AssertionError("the parsed log should have been reused")

    monkeypatch.setattr(yd, "parse_r6a", refuse)
    second = yd.r6a_log(log_dir, tmp_path, 300)
    assert _by_step(second) == _by_step(first) == EXPECTED
    assert second.lines == first.lines and second.skipped_lines == 1


# ----------------------------------------------------------------------------- errors


def test_missing_data_says_what_r6a_is_and_where_to_get_it(tmp_path, composer):
    with pytest.raises(DatasetMissingError) as err:
        yd.find_r6a_files(tmp_path / "R6", tmp_path)
    message = str(err.value)
    assert "R6A" in message and "Webscope" in message and yd.WEBSCOPE_URL in message
    assert "dataset.path=" in message and "not be redistributed" in message
    with pytest.raises(DatasetMissingError, match="no Yahoo! R6A click log"):
        yd.find_r6a_files(None, tmp_path)  # nothing in the cache directory either
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetMissingError, match="holds no R6A file"):
        yd.find_r6a_files(tmp_path / "empty", tmp_path)
    config = cell_config(composer(["dataset=yahoo", f"dataset.path={tmp_path}/R6"]))
    with pytest.raises(DatasetMissingError, match="Webscope"):
        validate(config)  # before any cell runs


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (r6a_line(BASE, 101, 2, _pool(101)), "line 2: click must be 0 or 1"),
        (f"{BASE} 101 0 |101 1:1.0", "line 2: expected 'timestamp article click"),
        (f"{BASE} 101 |user 1:1.0 |101 1:1.0", "line 2: expected 'timestamp"),
        (f"{BASE} 101 0 |user 1:1.0", "line 2: no |article block"),
        (r6a_line(BASE, 101, 0, _pool(101)).replace("3:0.000000", "3=0.0"), "not index:value"),
        (r6a_line(BASE, 101, 0, _pool(101)).replace("|101 2:", "|abc 2:"), "article id"),
        (r6a_line(BASE, 101, 0, _pool(101)).replace("|101 2:", "|101 7:"), "outside 1..6"),
        (f"x{BASE} 101 0 |user 1:1.0 |101 1:1.0", "must be integers"),
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path, line, message):
    path = write_r6a(tmp_path / "ydata-fp-td-clicks-v1_0.20090501.gz", [_visits()[0], line])
    with pytest.raises(DatasetFormatError, match=message) as err:
        yd.parse_r6a([path])
    assert str(path) in str(err.value)


def test_truncated_files_are_refused(tmp_path):
    full = write_r6a(tmp_path / "full.gz", _visits() * 50).read_bytes()
    cut = tmp_path / "ydata-fp-td-clicks-v1_0.20090501.gz"
    cut.write_bytes(full[: len(full) // 2])
    with pytest.raises(DatasetFormatError, match="truncated or corrupted"):
        yd.parse_r6a([cut])
    text = tmp_path / "plain.txt"
    text.write_bytes(gzip.decompress(full)[:-40])
    with pytest.raises(DatasetFormatError, match="ends in the middle of line"):
        yd.parse_r6a([text])


def test_a_log_without_any_usable_visit_is_refused(tmp_path):
    path = write_r6a(tmp_path / "x.gz", [f"{BASE} 7 0 |user 1:1.0 |7 1:1.0"])
    with pytest.raises(DatasetFormatError, match="all 6 features"):
        yd.parse_r6a([path])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"bucket_seconds": 0}, "bucket_seconds"), ({"ctr_prior_displays": -1}, "non-negative")],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Yahoo(**kwargs)
