"""Real and user data sets for the model experiments (weightdyn.datasets, issue 33 item 4):
the bundled scikit-learn sets and a user's .npz/.csv file, split, subsampled and standardised
from a seed, checksummed, stored CF-clean and read back exactly; every bad input refused with
a message naming the key."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from test_cf_compliance import _cf_check, _errors

from weightdyn import datasets, io
from weightdyn.datasets import ConfigError, RealData, load_dataset

#: samples, features, classes (0: regression) of the bundled sets
SHAPES = {
    "digits": (1797, 64, 10),
    "breast_cancer": (569, 30, 2),
    "wine": (178, 13, 3),
    "iris": (150, 4, 3),
    "diabetes": (442, 10, 0),
}
ARRAYS = ("X_train", "Y_train", "X_test", "Y_test", "classes", "train_index", "test_index",
          "x_mean", "x_scale")  # fmt: skip
SCALARS = ("name", "task", "source", "version", "sha256", "sha256_of", "target", "split_seed",
           "test_size", "constant_features", "y_mean", "y_scale")  # fmt: skip


def _load(name: str = "iris", **kwargs) -> RealData:
    options = {"P": 60, "test_size": 0.2, "split_seed": 0, **kwargs}
    return load_dataset(name, **options)


def _raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets as sk

    options = {"scaled": False} if name == "diabetes" else {}
    return getattr(sk, f"load_{name}")(return_X_y=True, **options)


def _assert_same(a: RealData, b: RealData) -> None:
    """Every field equal, arrays with their dtypes, scalars with their types."""
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x, y), name
    for name in SCALARS:
        x, y = getattr(a, name), getattr(b, name)
        assert x == y and type(x) is type(y), (name, x, y)


def _npz(tmp_path: Path, n: int = 40, task: str = "classification", **extra) -> Path:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 3))
    y = np.arange(n) % 2 if task == "classification" else X @ [1.0, -2.0, 0.5]
    path = tmp_path / "data.npz"
    np.savez(path, **{"X": X, "y": y, **extra})
    return path


def _csv(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _table(n: int = 30, header: str | None = "a,b,label,c") -> str:
    rows = [f"{k * 0.5},{(k * 7) % 5},{k % 3},{math.sin(k)}" for k in range(n)]
    return "\n".join(([header] if header else []) + rows) + "\n"


# ------------------------------------------------------------------------------ bundled sets


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_bundled_set_loads_split_standardised_and_encoded(name: str) -> None:
    n, features, classes = SHAPES[name]
    data = _load(name, P=100)
    n_test = math.ceil(0.2 * n)
    assert data.X_train.shape == (100, features) and data.X_test.shape == (n_test, features)
    assert data.n_classes == classes and data.N_o == max(classes, 1)
    assert data.Y_train.shape == (100, data.N_o) and data.Y_test.shape == (n_test, data.N_o)
    assert data.task == ("regression" if classes == 0 else "classification")
    assert not set(data.train_index) & set(data.test_index)
    assert data.test_index.max() < n and data.version == data.source.split()[1]
    varying = [j for j in range(features) if j not in data.constant_features]
    np.testing.assert_allclose(data.X_train.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(data.X_train[:, varying].std(axis=0), 1.0, rtol=1e-12)
    assert np.all(data.X_train[:, data.constant_features] == 0)
    assert np.all(data.x_scale[list(data.constant_features)] == 1)
    X, y = _raw(name)
    np.testing.assert_allclose(data.x_mean, X[data.train_index].mean(axis=0), rtol=1e-12)
    back = data.X_test * data.x_scale + data.x_mean
    np.testing.assert_allclose(back, X[data.test_index], atol=1e-12)
    if classes:
        for Y in (data.Y_train, data.Y_test):
            assert set(np.unique(Y)) == {0.0, 1.0} and np.all(Y.sum(axis=1) == 1)
            assert np.all(Y.sum(axis=0) >= 1)  # every class on both sides
        assert np.array_equal(data.classes[data.Y_train.argmax(axis=1)], y[data.train_index])
    else:
        Y = data.Y_train[:, 0]
        assert abs(Y.mean()) < 1e-12 and Y.std() == pytest.approx(1.0, rel=1e-12)
        back = data.Y_test[:, 0] * data.y_scale + data.y_mean
        np.testing.assert_allclose(back, y[data.test_index])


def test_digits_has_constant_features_kept_at_scale_one() -> None:
    data = _load("digits", P=100)
    assert 0 in data.constant_features  # the corner pixel is blank in every image
    assert data.x_scale[0] == 1.0 and np.all(data.X_train[:, 0] == 0)


def test_the_split_is_stratified() -> None:
    data = _load("breast_cancer", P=None, test_size=0.25)
    _, y = _raw("breast_cancer")
    expected = np.bincount(y) * data.n_test / y.size
    assert np.all(np.abs(data.Y_test.sum(axis=0) - expected) <= 1)
    assert data.P == y.size - data.n_test  # P None: the whole training split


def test_split_and_subsample_come_from_the_seed() -> None:
    a, b, other = _load(split_seed=3), _load(split_seed=3), _load(split_seed=4)
    _assert_same(a, b)
    assert not np.array_equal(a.test_index, other.test_index)
    assert not np.array_equal(a.train_index, other.train_index)
    smaller = _load(split_seed=3, P=30)
    assert np.array_equal(smaller.test_index, a.test_index)  # the split does not depend on P
    assert not np.array_equal(smaller.train_index, a.train_index[:30])  # a random subsample


def test_a_test_size_count_and_the_subsample_classes() -> None:
    data = _load("wine", P=3, test_size=50)
    assert data.n_test == 50 and data.P == 3
    assert np.array_equal(data.Y_train.sum(axis=0), [1, 1, 1])  # one of each class


def test_the_checksum_is_stable_and_follows_the_data(tmp_path: Path) -> None:
    assert _load("iris").sha256 == _load("iris", split_seed=9).sha256 != _load("wine").sha256
    X, y = _raw("iris")
    assert datasets.array_checksum(X, y) == _load("iris").sha256
    changed = X.copy()
    changed[5, 2] += 1e-12
    assert datasets.array_checksum(changed, y) != datasets.array_checksum(X, y)
    assert datasets.array_checksum(X, y.astype(float)) != datasets.array_checksum(X, y)
    path = _csv(tmp_path, _table())
    user = {"path": path, "task": "classification", "target": "label"}
    first = _load("file", P=10, **user).sha256
    assert first == datasets.file_checksum(path) == _load("file", P=12, **user).sha256
    path.write_text(_table().replace("\n1.0,", "\n1.25,", 1))
    assert _load("file", P=10, **user).sha256 != first


# ------------------------------------------------------------------------------ stored form


@pytest.mark.parametrize("name", ["digits", "diabetes"])
def test_the_stored_form_round_trips_exactly(tmp_path: Path, name: str) -> None:
    data = _load(name, P=80, test_size=0.3)
    _assert_same(datasets.dataset_from_xarray(datasets.dataset_to_xarray(data)), data)
    ds = datasets.make({"dataset": name, "P": 80, "test_size": 0.3, "split_seed": 0})
    ds.attrs.update(io.provenance({"dataset": name}, title="t", source="s", history="h"))
    io.write_atomic(ds, tmp_path / "data.nc")
    back = datasets.load(io.load(tmp_path / "data.nc"))
    _assert_same(back, data)
    stored = io.load(tmp_path / "data.nc").attrs
    assert stored["dataset_sha256"] == data.sha256 and stored["split_seed"] == 0
    assert stored["P"] == 80 and stored["test_size"] == 0.3 and stored["sklearn_version"]
    assert stored["standardisation"].startswith("inputs: (x - mean) / std")


def test_a_file_set_round_trips_with_its_count_test_size(tmp_path: Path) -> None:
    data = _load("file", path=_npz(tmp_path), task="classification", P=20, test_size=10)
    ds = datasets.dataset_to_xarray(data)
    io.write_atomic(ds, tmp_path / "data.nc")
    back = datasets.dataset_from_xarray(io.load(tmp_path / "data.nc"))
    _assert_same(back, data)
    assert "sklearn_version" not in ds.attrs


def test_the_stored_file_passes_cf_1_11(tmp_path: Path) -> None:
    cf_check = _cf_check()
    for name in ("wine", "diabetes"):
        path = tmp_path / f"{name}.nc"
        io.write_atomic(datasets.dataset_to_xarray(_load(name)), path)
        assert _errors({path: cf_check.check_file(path)}) == []
    for var in datasets.dataset_to_xarray(_load("wine")).variables.values():
        assert {"long_name", "units", "source"} <= set(var.attrs)


def test_reading_back_something_else_is_refused() -> None:
    with pytest.raises(ValueError, match="not a stored real data set"):
        datasets.dataset_from_xarray(xr.Dataset({"X_train": ("s", [1.0])}))


# ------------------------------------------------------------------------------ user files


def test_a_user_npz(tmp_path: Path) -> None:
    path = _npz(tmp_path, version=np.array("v2"))
    data = _load("file", path=path, task="classification", P=20)
    assert data.X_train.shape == (20, 3) and data.Y_train.shape == (20, 2)
    assert data.classes.dtype == np.int64 and list(data.classes) == [0, 1]
    assert data.version == "v2" and data.sha256_of == "file" and str(path) in data.source
    regression = _load("file", path=_npz(tmp_path, task="regression"), task="regression", P=20)
    assert regression.Y_train.shape == (20, 1) and regression.n_classes == 0
    assert regression.version.startswith("file modified ")


def test_a_user_csv_with_a_header_and_a_named_target(tmp_path: Path) -> None:
    path = _csv(tmp_path, _table())
    data = _load("file", path=path, task="classification", target="label", P=15)
    assert data.X_train.shape == (15, 3) and list(data.classes) == [0, 1, 2]
    assert data.target == "column 'label' (index 2 of 4)"
    raw = np.loadtxt(path, delimiter=",", skiprows=1)
    np.testing.assert_allclose(data.X_test * data.x_scale + data.x_mean,
                               raw[data.test_index][:, [0, 1, 3]])  # fmt: skip
    same = _load("file", path=path, task="classification", target=2, P=15)
    _assert_same(same, data)


def test_a_user_csv_without_a_header_takes_the_last_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, _table(header=None))
    data = _load("file", path=path, task="regression", P=20, test_size=5)
    assert data.target == "column 3 of 4" and data.X_train.shape == (20, 3)
    raw = np.loadtxt(path, delimiter=",")
    y = raw[:, 3]
    np.testing.assert_allclose(data.Y_test[:, 0] * data.y_scale + data.y_mean, y[data.test_index])


def test_float_class_labels_of_a_csv_are_integers(tmp_path: Path) -> None:
    text = "".join(f"{k},{k % 4}.0\n" for k in range(24))
    data = _load("file", path=_csv(tmp_path, text), task="classification", P=8, test_size=8)
    assert data.classes.dtype == np.int64 and list(data.classes) == [0, 1, 2, 3]


# ------------------------------------------------------------------------------ bad inputs


def test_an_unknown_name_lists_the_names() -> None:
    with pytest.raises(ConfigError, match="dataset: 'mnist' is not a data set; allowed: "
                       "digits, breast_cancer, wine, iris, diabetes, file"):  # fmt: skip
        _load("mnist")


BAD_ARGUMENTS = [
    ({"P": 2000, "name": "digits"}, r"P: 2000 exceeds the 1437 training samples available in "
     r"dataset 'digits'.*allowed: 10 <= P <= 1437"),
    ({"P": 2}, r"P: 2 is too small \(one sample of each of 3 classes\); allowed: 3 <= P <= 120"),
    ({"P": 10.5}, r"P: 10.5 must be an integer"),
    ({"test_size": 1.5}, r"test_size: 1.5 is out of range; allowed: a fraction"),
    ({"test_size": 0}, r"test_size: 0 is out of range"),
    ({"test_size": True}, r"test_size: True is not a number"),
    ({"test_size": 148}, r"test_size: 148 gives 148 test samples of the 150 of dataset 'iris'; "
     r"allowed: 3 to 147"),
    ({"test_size": 0.01}, r"test_size: 0.01 gives 2 test samples .*allowed: 3 to 147 test "
     r"samples \(3 classes"),
    ({"split_seed": -1}, r"split_seed: -1 is negative"),
    ({"split_seed": "a"}, r"split_seed: 'a' must be an integer"),
    ({"task": "regression"}, r"task: 'regression': 'iris' is a classification data set; "
     r"allowed: 'classification'"),
    ({"task": "ranking"}, r"task: 'ranking' is not allowed; allowed: classification, regression"),
    ({"path": "x.csv"}, r"data_file: 'x.csv' is given, but 'iris' is bundled"),
    ({"target": "y"}, r"target: 'y': only a .csv data_file has a target column"),
    ({"name": "file", "task": "regression"}, r"data_file: dataset 'file' needs the path"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "match"), BAD_ARGUMENTS)
def test_bad_arguments_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _load(**{"name": "iris", **kwargs})


def _bad_csv_files(tmp_path: Path) -> list[tuple[Path, dict, str]]:
    """.csv files (or paths) that must be refused, with the options and the message."""
    nan_rows = _table().replace("\n3.0,", "\nnan,", 1).replace("\n4.5,", "\n,", 1)
    words = _table(header="a,b,colour,d").replace(",1,", ",red,", 1)
    few = "".join(f"{k},{k % 3 if k < 20 else 7}\n" for k in range(21))
    continuous = "".join(f"{k},{k * 0.37}\n" for k in range(20))
    flat = "".join(f"{k},1.0\n" for k in range(20))
    cla, reg = {"task": "classification"}, {"task": "regression"}
    table, bare = _table(), _table(header=None)
    return [
        (_csv(tmp_path, nan_rows, "nan.csv"), cla, r"data_file: '.*nan.csv' has 2 NaN, inf or "
         r"missing value\(s\) in 2 row\(s\) and 1 column\(s\) \(columns \['a'\]; first in data "
         r"row 7\)"),
        (_csv(tmp_path, words, "words.csv"), cla, r"non-numeric values in column\(s\) "
         r"\['colour'\] \(first 'red' in data row 2\)"),
        (_csv(tmp_path, "1,2,3\n4,5\n", "ragged.csv"), cla, r"data row 2 has 2 fields, the "
         r"first row 3"),
        (_csv(tmp_path, few, "few.csv"), cla, r"too few samples per class for the split: 1 "
         r"class\(es\) \(\[7\]\) have 1 sample"),
        (_csv(tmp_path, continuous, "cont.csv"), cla, r"too few samples per class.*y looks "
         r"continuous: task 'regression'\?"),
        (_csv(tmp_path, flat, "flat.csv"), cla, r"task: data_file '.*flat.csv' has one class "
         r"\(\[1\]\)"),
        (_csv(tmp_path, flat, "flat2.csv"), reg, r"task: the 4 training targets of data_file "
         r".* are all equal"),
        (_csv(tmp_path, table, "t.csv"), {**cla, "target": "price"}, r"target: 'price' is not "
         r"one column of data_file .*allowed: \['a', 'b', 'label', 'c'\]"),
        (_csv(tmp_path, bare, "nh.csv"), {**cla, "target": "label"}, r"target: 'label' names a "
         r"column, but data_file .* has no header row"),
        (_csv(tmp_path, table, "i.csv"), {**cla, "target": 4}, r"target: column 4 is out of "
         r"range .*allowed: 0 to 3"),
        (_csv(tmp_path, "\n\n", "empty.csv"), cla, r"data_file: '.*empty.csv' is empty"),
        (tmp_path / "absent.csv", cla, r"data_file: '.*absent.csv' does not exist"),
        (_csv(tmp_path, table, "data.txt"), cla, r"data_file: '.*data.txt' has suffix '.txt'; "
         r"allowed: .npz \(arrays X and y\) or .csv"),
        (_csv(tmp_path, table, "nt.csv"), {}, r"task: the data_file '.*nt.csv' needs a task; "
         r"allowed: classification, regression"),
    ]  # fmt: skip


def _bad_npz_files(tmp_path: Path) -> list[tuple[Path, dict, str]]:
    """.npz files that must be refused, with the options and the message."""
    X = np.random.default_rng(0).normal(size=(10, 2))
    y = np.arange(10) % 2
    inf = X.copy()
    inf[[2, 5], 1] = np.inf
    cases = [
        ({"X": X, "y": y[:9]}, r"X has 10 samples \(rows\) but y has 9; allowed: X and y of "
         r"the same length"),
        ({"X": inf, "y": y}, r"array X has 2 NaN, inf or missing value\(s\) in 2 row\(s\) and 1 "
         r"column\(s\) \(columns \['column 1'\]; first in data row 3\)"),
        ({"X": X, "y": np.where(y == 1, np.nan, 0.0)}, r"array y has 5 NaN"),
        ({"X": X, "labels": y}, r"lacks the array\(s\) \['y'\] \(it has \['X', 'labels'\]\)"),
        ({"X": X, "y": np.array(list("ababababab"))}, r"array y is non-numeric \(dtype <U1\); "
         r"allowed: numbers"),
        ({"X": X[:, 0], "y": y}, r"X has shape \(10,\) and y \(10,\); allowed: X of 2 "
         r"dimensions"),
    ]  # fmt: skip
    cla = {"task": "classification"}
    out = []
    for k, (arrays, match) in enumerate(cases):
        np.savez(tmp_path / f"bad{k}.npz", **arrays)
        out.append((tmp_path / f"bad{k}.npz", cla, match))
    broken = _csv(tmp_path, "not a zip", "broken.npz")
    out.append((broken, cla, r"is not a readable .npz file"))
    target = r"target: 0: a .npz data_file holds y"
    return [*out, (_npz(tmp_path), {**cla, "target": 0}, target)]


def test_bad_files_are_refused_saying_where(tmp_path: Path) -> None:
    cases = [*_bad_csv_files(tmp_path), *_bad_npz_files(tmp_path)]
    for path, options, match in cases:
        with pytest.raises(ConfigError, match=match) as err:
            _load("file", path=path, **{"P": 4, "test_size": 4, **options})
        assert isinstance(err.value, ValueError), path


def test_arguments_are_checked_without_reading_data(tmp_path: Path) -> None:
    datasets.check_arguments("digits", test_size=0.2, split_seed=0)
    path = _csv(tmp_path, "not, numbers\n")
    datasets.check_arguments("file", path=path, test_size=3, split_seed=1, task="regression")
    with pytest.raises(ConfigError, match="dataset: 'cifar'"):
        datasets.check_arguments("cifar", test_size=0.2, split_seed=0)


def test_the_allocation_keeps_its_bounds_and_total() -> None:
    """Stratification: k samples in all, at least floor_in of each group and floor_out left."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        sizes = rng.integers(2, 40, size=rng.integers(1, 8))
        floor_in, floor_out = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        low, high = floor_in * sizes.size, int(sizes.sum()) - floor_out * sizes.size
        k = int(rng.integers(low, high + 1))
        take = datasets._allocate(sizes, k, floor_in, floor_out)
        assert take.sum() == k and np.all(take >= floor_in) and np.all(take <= sizes - floor_out)
        exact = floor_in + (k - low) * (sizes - floor_in - floor_out) / max(high - low, 1)
        assert np.all(np.abs(take - exact) < 1)  # largest remainder: within one of its share


def test_numbers_python_reads_but_numpy_does_not(tmp_path: Path) -> None:
    text = "".join(f"{k}_0,{k % 2}\n" for k in range(1, 13))  # 10, 20, ..., 120
    data = _load("file", path=_csv(tmp_path, text), task="classification", P=6, test_size=4)
    assert data.x_mean[0] == pytest.approx(np.mean(10.0 * (data.train_index + 1)))
