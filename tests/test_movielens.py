"""MovieLens 100K: the real ratings, their factorisation and cache, the bandit, the errors."""

from __future__ import annotations

import io
import urllib.error
import zipfile
from pathlib import Path

import numpy as np
import pytest

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning.cell import run_cell, validate
from sweeper_tasks.bandit_tuning.environments import movielens_data as md
from sweeper_tasks.bandit_tuning.environments.base import sigmoid
from sweeper_tasks.bandit_tuning.environments.movielens import MovieLens
from sweeper_tasks.bandit_tuning.seeding import environment_rng
from sweeper_tasks.storage import DatasetFormatError, DatasetMissingError
from tests import data_fixtures

# The session fixtures (the real ratings file, a shared factorisation cache directory).
movielens_file = data_fixtures.movielens_file
factor_cache = data_fixtures.factor_cache


@pytest.fixture(scope="module")
def ratings(movielens_file):
    return md.read_ratings(movielens_file)


@pytest.fixture(scope="module")
def u_data(movielens_file, tmp_path_factory):
    """GroupLens' u.data layout of the same ratings, whichever layout the cache holds."""
    if zipfile.is_zipfile(movielens_file):
        with zipfile.ZipFile(movielens_file) as archive:
            body = archive.read(md.ZIP_MEMBER)
    else:
        body = movielens_file.read_bytes()
        if not body[:1].isdigit():  # RecBole's header line
            body = body.split(b"\n", 1)[1]
    path = tmp_path_factory.mktemp("u-data") / "u.data"
    path.write_bytes(body)
    return path


def _zip_of(u_data_path: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(u_data_path, md.ZIP_MEMBER)
    return target


def test_the_real_ratings_are_all_of_movielens_100k(ratings):
    assert len(ratings.ratings) == 100_000
    assert (ratings.n_users, ratings.n_movies) == (943, 1682)
    assert len(np.unique(ratings.users)) == 943 and len(np.unique(ratings.movies)) == 1682
    assert set(np.unique(ratings.ratings)) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert ratings.ratings.mean() == pytest.approx(3.53, abs=0.01)  # MovieLens 100K's mean


def test_u_data_zip_and_recbole_layouts_give_the_same_ratings(ratings, u_data, tmp_path):
    for path in (u_data, _zip_of(u_data, tmp_path / "ml-100k.zip")):
        other = md.read_ratings(path)
        for field in ("users", "movies", "ratings"):
            assert np.array_equal(getattr(other, field), getattr(ratings, field))


def test_factorisation_gives_unit_ball_features_of_every_user_and_movie(
    movielens_file,
    factor_cache,
):
    factors = md.movielens_factors(movielens_file, factor_cache)
    assert factors.users.shape == (943, 20) and factors.movies.shape == (1682, 20)
    for features in (factors.users, factors.movies):
        norms = np.linalg.norm(features, axis=1)
        assert norms.max() == pytest.approx(1.0) and np.all(norms <= 1.0 + 1e-12)
        assert np.all(norms > 0)


def test_factorisation_predicts_held_out_ratings_better_than_the_global_mean(ratings):
    result = md.holdout_rmse(ratings, fraction=0.1, split_seed=0)
    print(
        f"MovieLens 100K held-out RMSE (10%): factorisation {result['factorisation']:.4f}, "
        f"global mean {result['global_mean']:.4f}, training {result['train']:.4f}"
    )
    assert result["factorisation"] < result["global_mean"] - 0.1
    assert result["train"] < result["factorisation"]


def test_vectorised_als_step_matches_one_ridge_regression_per_user(ratings):
    rng = np.random.default_rng(1)
    users, _ = md.factorise(ratings, rank=5, regularisation=3.0, iterations=1, seed=1)
    # The same first half-step, one user at a time, from the same starting movie factors.
    start = np.random.default_rng(1).normal(0.0, 1.0 / np.sqrt(5), (ratings.n_movies, 5))
    for user in rng.choice(ratings.n_users, 25, replace=False):
        rows = ratings.users == user
        x, y = start[ratings.movies[rows]], ratings.ratings[rows]
        expected = np.linalg.solve(x.T @ x + 3.0 * np.eye(5), x.T @ y)
        np.testing.assert_allclose(users[user], expected, rtol=1e-8, atol=1e-10)


def test_als_never_increases_its_objective(ratings):
    def objective(users, movies, lam=10.0):
        fit = md.rmse(users, movies, ratings) ** 2 * len(ratings.ratings)
        return fit + lam * (np.sum(users**2) + np.sum(movies**2))

    values = [
        objective(*md.factorise(ratings, rank=8, regularisation=10.0, iterations=n))
        for n in (1, 2, 4, 8)
    ]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(values, values[1:], strict=False))


def test_factorisation_is_cached_on_disk_and_reused(movielens_file, tmp_path, monkeypatch):
    first = md.movielens_factors(movielens_file, tmp_path, iterations=3)
    assert first.cache_file is not None and first.cache_file.is_file()
    assert not list(first.cache_file.parent.glob("*.tmp")), "no temporary file is left behind"
    md._MEMO.clear()  # a new worker process: only the disk cache is shared

    def refuse(*args, **kwargs):
        raise AssertionError("the cached factorisation should have been reused")

    monkeypatch.setattr(md, "factorise", refuse)
    second = md.movielens_factors(movielens_file, tmp_path, iterations=3)
    assert second.cache_file == first.cache_file
    assert np.array_equal(second.users, first.users)
    # Other parameters are another cache entry.
    monkeypatch.undo()
    other = md.movielens_factors(movielens_file, tmp_path, iterations=2)
    assert other.cache_file != first.cache_file
    assert len(list((tmp_path / "movielens").glob("factors-*.npz"))) == 2


def test_a_corrupt_cache_file_is_rebuilt(movielens_file, tmp_path):
    first = md.movielens_factors(movielens_file, tmp_path, iterations=2)
    first.cache_file.write_bytes(b"not an npz")
    md._MEMO.clear()
    again = md.movielens_factors(movielens_file, tmp_path, iterations=2)
    np.testing.assert_allclose(again.users, first.users)


# ----------------------------------------------------------------------------- the bandit


def _environment(path, cache, **kwargs) -> MovieLens:
    return MovieLens(path=str(path), cache_dir=str(cache), **kwargs)


@pytest.mark.parametrize("model", ["linear", "logistic"])
def test_rounds_show_300_distinct_movies_and_their_expected_rewards(
    movielens_file,
    factor_cache,
    model,
):
    env = _environment(movielens_file, factor_cache)
    env.reset(500, model, environment_rng("movielens", 0))
    movies = env.factors().movies
    assert np.linalg.norm(env.theta) <= 1.0
    for t in range(150):
        features, means = env.observe(t)
        arms = env.arms[t % env.block_rounds]
        assert features.shape == (300, 20) and means.shape == (300,)
        assert len(np.unique(arms)) == 300
        np.testing.assert_array_equal(features, movies[arms])
        assert np.all(np.linalg.norm(features, axis=1) <= 1.0 + 1e-12)
        scores = features @ env.theta
        np.testing.assert_allclose(means, scores if model == "linear" else sigmoid(scores))
        if model == "logistic":
            assert np.all((means > 0) & (means < 1))
    assert env._features.shape == (64, 300, 20), "rounds are generated in blocks"


def test_theta_is_the_mean_of_300_distinct_users(movielens_file, factor_cache):
    for n_users in (300, 100):
        env = _environment(movielens_file, factor_cache, n_users=n_users)
        env.reset(10, "linear", environment_rng("movielens", 1))
        # The run's first draw picks the users (distinct), theta* is their average.
        chosen = environment_rng("movielens", 1).choice(943, n_users, replace=False)
        assert len(np.unique(chosen)) == n_users
        np.testing.assert_allclose(env.theta, env.factors().users[chosen].mean(axis=0))


def test_theta_norm_rescales_the_users_mean_and_widens_the_logistic_means(
    movielens_file, factor_cache
):
    plain = _environment(movielens_file, factor_cache, n_users=40)
    plain.reset(10, "logistic", environment_rng("movielens", 2))
    scaled = _environment(movielens_file, factor_cache, n_users=40, theta_norm=1.0)
    scaled.reset(10, "logistic", environment_rng("movielens", 2))
    assert np.linalg.norm(scaled.theta) == pytest.approx(1.0)
    np.testing.assert_allclose(
        scaled.theta / np.linalg.norm(scaled.theta), plain.theta / np.linalg.norm(plain.theta)
    )
    _, plain_means = plain.observe(0)
    _, scaled_means = scaled.observe(0)
    assert np.ptp(scaled_means) > np.ptp(plain_means), "a longer theta* spreads the arms apart"
    with pytest.raises(ValueError, match="theta_norm must be positive"):
        _environment(movielens_file, factor_cache, theta_norm=0.0)


def test_movies_are_sampled_uniformly(movielens_file, factor_cache):
    env = _environment(movielens_file, factor_cache, n_arms=300)
    env.reset(1000, "linear", environment_rng("movielens", 2))
    seen = np.zeros(1682)
    for t in range(1000):
        env.observe(t)
        seen[env.arms[t % env.block_rounds]] += 1
    expected = 1000 * 300 / 1682  # about 178 appearances per movie
    assert seen.mean() == pytest.approx(expected)
    assert np.abs(seen - expected).max() < 6 * np.sqrt(expected)


def test_same_seed_same_rounds_and_noise_other_seed_not(movielens_file, factor_cache):
    def run(seed):
        env = _environment(movielens_file, factor_cache)
        env.reset(100, "linear", environment_rng("movielens", seed))
        out = []
        for t in range(100):
            features, means = env.observe(t)
            out.append((features.copy(), env.reward(0) - means[0]))
        return out

    a, b, c = run(0), run(0), run(1)
    assert all(np.array_equal(x[0], y[0]) and x[1] == y[1] for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0][0], c[0][0])


def test_optimal_arm_and_regret_from_expected_rewards(movielens_file, factor_cache):
    env = _environment(movielens_file, factor_cache, noise_sd=0.5)
    env.reset(3000, "linear", environment_rng("movielens", 3))
    optimal, best, regret_first = [], [], 0.0
    for t in range(3000):
        _, means = env.observe(t)
        arm = int(np.argmax(means))
        optimal.append(env.reward(arm))
        best.append(means[arm])
        regret_first += means.max() - means[0]
    assert regret_first > 0
    assert np.mean(optimal) == pytest.approx(np.mean(best), abs=0.03)


def test_a_cell_runs_on_movielens_and_logs_a_regret_curve(composer, movielens_file, factor_cache):
    overrides = [
        "dataset=movielens",
        f"dataset.path={movielens_file}",
        f"dataset.cache_dir={factor_cache}",
        "horizon=300",
    ]
    config = cell_config(composer(overrides))
    validate(config)
    first, second = run_cell(config), run_cell(config)
    regret = first["curves"]["regret"]
    assert regret.shape == (300,) and np.all(np.diff(regret) >= 0)
    assert np.array_equal(regret, second["curves"]["regret"])


def test_syndicated_variant(composer, movielens_file, factor_cache):
    spec = composer(
        [
            "dataset=movielens_syndicated",
            f"dataset.path={movielens_file}",
            f"dataset.cache_dir={factor_cache}",
        ]
    ).dataset
    from sweeper_tasks.building import build

    env = build(spec)
    env.reset(20, "linear", environment_rng("movielens_syndicated", 0))
    features, means = env.observe(0)
    assert features.shape == (1000, 20)
    np.testing.assert_allclose(means, 0.5 + 0.5 * features @ env.theta)
    assert np.all((means >= 0) & (means <= 1))


# ----------------------------------------------------------------------------- finding files


def test_lookup_prefers_dataset_path_then_the_cache_directory(u_data, tmp_path):
    assert md.find_ratings_file(u_data, tmp_path) == u_data
    assert md.find_ratings_file(u_data.parent, tmp_path) == u_data  # a directory with u.data
    (tmp_path / "ml-100k").mkdir()
    cached = tmp_path / "ml-100k" / "u.data"
    cached.write_bytes(u_data.read_bytes())
    assert md.find_ratings_file(None, tmp_path) == cached


def test_missing_path_says_where_to_get_the_data(tmp_path):
    with pytest.raises(DatasetMissingError) as err:
        md.find_ratings_file(tmp_path / "nope.zip", tmp_path)
    message = str(err.value)
    assert "dataset.path=" in message and "does not exist" in message
    assert md.GROUPLENS_URL in message and "make movielens" in message


def test_no_file_and_no_download_is_a_clear_error(tmp_path):
    with pytest.raises(DatasetMissingError, match="dataset.download=false"):
        md.find_ratings_file(None, tmp_path, download=False)


def test_failed_download_is_a_clear_error(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(md.urllib.request, "urlopen", offline)
    with pytest.raises(DatasetMissingError, match="downloading .* failed .*no route to host"):
        md.find_ratings_file(None, tmp_path)


def _serve(payload: bytes):
    def urlopen(url, timeout):
        assert url == md.GROUPLENS_URL
        return io.BytesIO(payload)

    return urlopen


def test_download_is_checked_with_sha256_and_cached(u_data, tmp_path, monkeypatch):
    archive = _zip_of(u_data, tmp_path / "built.zip").read_bytes()
    cache = tmp_path / "cache"
    monkeypatch.setattr(md.urllib.request, "urlopen", _serve(archive[:-100]))
    with pytest.raises(DatasetFormatError, match="SHA-256"):
        md.find_ratings_file(None, cache)
    assert not (cache / md.ZIP_NAME).exists()
    import hashlib

    monkeypatch.setattr(md, "ZIP_SHA256", hashlib.sha256(archive).hexdigest())
    monkeypatch.setattr(md.urllib.request, "urlopen", _serve(archive))
    path = md.find_ratings_file(None, cache)
    assert path == cache / md.ZIP_NAME and len(md.read_ratings(path).ratings) == 100_000


def test_check_fails_before_any_cell_for_a_missing_file(composer, tmp_path):
    config = cell_config(composer(["dataset=movielens", f"dataset.path={tmp_path}/missing/u.data"]))
    with pytest.raises(DatasetMissingError, match="does not exist"):
        validate(config)


# ----------------------------------------------------------------------------- bad files


def _write(tmp_path: Path, name: str, payload: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(payload)
    return path


def test_truncated_ratings_file_is_refused(u_data, tmp_path):
    half = b"".join(u_data.read_bytes().splitlines(keepends=True)[:50_000])
    with pytest.raises(DatasetFormatError, match="50,000 ratings.*truncated"):
        md.read_ratings(_write(tmp_path, "u.data", half))


def test_truncated_zip_is_refused(u_data, tmp_path):
    archive = _zip_of(u_data, tmp_path / "full.zip").read_bytes()
    with pytest.raises(DatasetFormatError, match="not a readable zip"):
        md.read_ratings(_write(tmp_path, "ml-100k.zip", archive[: len(archive) // 2]))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lines: lines.__setitem__(6, b"1\t2\t3\t4\t5\n"), "line 7 has 5 tab-separated"),
        (lambda lines: lines.__setitem__(9, b"1\tx\t3\t4\n"), "line 10 is not four numbers"),
        (lambda lines: lines.__setitem__(3, b"1\t2\n"), "line 4 has 2 tab-separated"),
        (lambda lines: lines.__setitem__(0, b"196\t242\t7\t881250949\n"), "ratings must be"),
        (lambda lines: lines.__setitem__(1, lines[0]), "rated twice|ids should be"),
    ],
)
def test_malformed_ratings_name_the_problem(u_data, tmp_path, edit, message):
    lines = u_data.read_bytes().splitlines(keepends=True)
    edit(lines)
    with pytest.raises(DatasetFormatError, match=message):
        md.read_ratings(_write(tmp_path, "u.data", b"".join(lines)))


def test_empty_file_and_unknown_header_are_refused(u_data, tmp_path):
    with pytest.raises(DatasetFormatError, match="is empty"):
        md.read_ratings(_write(tmp_path, "u.data", b""))
    body = u_data.read_bytes()
    with pytest.raises(DatasetFormatError, match="header"):
        md.read_ratings(_write(tmp_path, "x.inter", b"user\tmovie\tstars\twhen\n" + body))
