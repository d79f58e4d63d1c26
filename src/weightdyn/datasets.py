"""Real and user data sets for the model experiments (issue 33 item 4).

Data sets are a declared axis (docs/design.md): besides the synthetic teacher-student sets, a model
experiment may train on a set bundled with scikit-learn (no download) or on a user's own arrays:

- ``digits``, ``breast_cancer``, ``wine``, ``iris``: classification (:data:`BUNDLED`);
- ``diabetes``: regression (the unscaled arrays, ``load_diabetes(scaled=False)``);
- ``file``: a ``.npz`` file with the arrays ``X`` (samples, features) and ``y`` (samples), or a
  ``.csv`` file of numbers (a header row is optional and recognised by a field that is no number;
  ``y`` is the last column, or the column ``target`` names by header name or index).

:func:`load_dataset` gives a :class:`RealData`: a seeded train/test split (stratified for
classification: every class has at least one sample on each side, the rest of the test set is
shared out in proportion to the classes' sizes), a seeded training subsample of ``P`` samples
(stratified likewise, every class at least once), inputs standardised with the mean and standard
deviation of those ``P`` training samples (a feature constant on them keeps scale 1: it becomes 0),
and targets one-hot (classification, for the squared error and the cross-entropy alike) or
standardised with the training mean and deviation (regression, shape (P, 1)).

The random streams are :mod:`weightdyn.seeds` streams of (data set name, ``split_seed``): a
rerun draws the same split and subsample bit for bit, and the split does not depend on ``P``.
The raw data are identified by a SHA-256 checksum: of the arrays ``X`` and ``y`` (their dtype,
shape and bytes) for a bundled set, of the file's bytes for a user's file.

:func:`dataset_to_xarray` and :func:`dataset_from_xarray` are the stored form (one shared,
cached file per key, :class:`weightdyn.experiments.DataSet`; :func:`make` and :func:`load` are
its two functions) and its exact inverse. Every bad input is a
:class:`~weightdyn.experiments.ConfigError` (a ValueError) naming the key and what is allowed.
"""

from __future__ import annotations

import csv
import hashlib
import math
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import seeds
from weightdyn.experiments import ConfigError, Params
from weightdyn.io import attrs

CLASSIFICATION, REGRESSION = "classification", "regression"
TASKS = (CLASSIFICATION, REGRESSION)
#: the data sets bundled with scikit-learn that need no download: their task and origin
BUNDLED = {
    "digits": (CLASSIFICATION, "UCI ML hand-written digits, 8x8 images"),
    "breast_cancer": (CLASSIFICATION, "UCI ML Breast Cancer Wisconsin (Diagnostic)"),
    "wine": (CLASSIFICATION, "UCI ML Wine recognition"),
    "iris": (CLASSIFICATION, "Fisher's iris (UCI ML)"),
    "diabetes": (REGRESSION, "Efron et al. (2004) diabetes, unscaled"),
}
FILE = "file"
#: every data set name :func:`load_dataset` knows
NAMES = (*BUNDLED, FILE)
#: the file suffixes of a user's data set
SUFFIXES = (".npz", ".csv")
SPLIT_STREAM = "datasets/split"
SUBSAMPLE_STREAM = "datasets/subsample"
STANDARDISATION = (
    "inputs: (x - mean) / std with the mean and the standard deviation (ddof 0) of the P "
    "training samples, std 1 for a feature constant on them (listed in constant_features); "
    "targets: one-hot (classification) or (y - mean) / std with the training mean and std "
    "(regression)"
)
#: the keys of a parameter mapping that :func:`make` reads (``test_size`` a sweep setting)
DATA_KEYS = ("dataset", "data_file", "target", "task", "P", "split_seed")
DATA_SETTINGS = ("test_size",)

FloatArray = np.ndarray


@dataclass(frozen=True, eq=False)
class RealData:
    """A real data set split and standardised (:func:`load_dataset`).

    ``X_train`` (P, N_i), ``Y_train`` (P, N_o), ``X_test``, ``Y_test``; ``classes`` (the class
    label of each one-hot column; empty for regression, N_o = 1); ``train_index`` and
    ``test_index`` (the samples' rows in the raw data); ``x_mean`` and ``x_scale`` (the inputs'
    standardisation), ``y_mean`` and ``y_scale`` (the targets', regression only); ``sha256`` the
    checksum of the raw data, of its arrays or its file (``sha256_of``); ``target`` says where
    ``y`` came from.
    """

    name: str
    task: str
    X_train: FloatArray
    Y_train: FloatArray
    X_test: FloatArray
    Y_test: FloatArray
    classes: np.ndarray
    source: str
    version: str
    sha256: str
    sha256_of: str
    target: str
    split_seed: int
    test_size: int | float
    train_index: np.ndarray
    test_index: np.ndarray
    x_mean: FloatArray
    x_scale: FloatArray
    constant_features: tuple[int, ...] = ()
    y_mean: float | None = None
    y_scale: float | None = None

    @property
    def n_classes(self) -> int:
        """Number of classes (0 for regression)."""
        return len(self.classes)

    @property
    def P(self) -> int:
        return self.X_train.shape[0]

    @property
    def N_i(self) -> int:
        return self.X_train.shape[1]

    @property
    def N_o(self) -> int:
        return self.Y_train.shape[1]

    @property
    def n_test(self) -> int:
        return self.X_test.shape[0]


@dataclass(frozen=True, eq=False)
class _Raw:
    """The raw arrays of a data set (``X`` float64 (n, d), ``y`` (n,)) and where they came from;
    ``task`` is the set's own task (None for a user's file)."""

    X: FloatArray
    y: np.ndarray
    source: str
    version: str
    sha256: str
    sha256_of: str
    target: str
    task: str | None


# ------------------------------------------------------------------------------ checksums


def array_checksum(X: np.ndarray, y: np.ndarray) -> str:
    """SHA-256 of the raw arrays: for ``X`` then ``y``, their dtype, shape and C-order bytes."""
    digest = hashlib.sha256()
    for label, array in (("X", X), ("y", y)):
        array = np.ascontiguousarray(array)
        digest.update(f"{label}:{array.dtype.str}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def file_checksum(path: str | Path) -> str:
    """SHA-256 of the bytes of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ------------------------------------------------------------------------------ arguments


def check_arguments(
    name: str,
    *,
    path: str | Path | None = None,
    test_size: int | float,
    split_seed: int,
    task: str | None = None,
    target: str | int | None = None,
) -> None:
    """The checks that need no data (for a config check before any job runs): the name, the
    file's suffix and existence, the task, the target column's type, ``test_size`` and
    ``split_seed``. ConfigError naming the key and what is allowed."""
    if not isinstance(name, str) or name not in NAMES:
        raise ConfigError(f"dataset: {name!r} is not a data set; allowed: {', '.join(NAMES)}")
    if task is not None and task not in TASKS:
        raise ConfigError(f"task: {task!r} is not allowed; allowed: {', '.join(TASKS)}")
    if name == FILE:
        _check_file(path, target, task)
    else:
        if path is not None:
            raise ConfigError(
                f"data_file: {str(path)!r} is given, but {name!r} is bundled with "
                "scikit-learn; allowed: a data_file only with dataset 'file'"
            )
        if target is not None:
            raise ConfigError(
                f"target: {target!r}: only a .csv data_file has a target column; "
                f"allowed for {name!r}: none"
            )
        own = BUNDLED[name][0]
        if task not in (None, own):
            raise ConfigError(f"task: {task!r}: {name!r} is a {own} data set; allowed: {own!r}")
    _check_test_size(test_size)
    if isinstance(split_seed, bool) or not isinstance(split_seed, int | np.integer):
        raise ConfigError(f"split_seed: {split_seed!r} must be an integer; allowed: >= 0")
    if split_seed < 0:
        raise ConfigError(f"split_seed: {split_seed} is negative; allowed: >= 0")


def _check_file(path: str | Path | None, target: str | int | None, task: str | None) -> None:
    """The data_file of dataset 'file': given, a .npz or .csv, existing; its task given."""
    if path is None:
        raise ConfigError(
            "data_file: dataset 'file' needs the path of a .npz file (arrays X and "
            "y) or a .csv file (y the last column or the target column)"
        )
    suffix = Path(path).suffix
    if suffix.lower() not in SUFFIXES:
        raise ConfigError(
            f"data_file: {str(path)!r} has suffix {suffix!r}; allowed: .npz "
            "(arrays X and y) or .csv"
        )
    if not Path(path).is_file():
        raise ConfigError(f"data_file: {str(path)!r} does not exist or is not a file")
    if task is None:
        raise ConfigError(
            f"task: the data_file {str(path)!r} needs a task; allowed: {', '.join(TASKS)}"
        )
    if suffix.lower() == ".npz" and target is not None:
        raise ConfigError(
            f"target: {target!r}: a .npz data_file holds y as an array; allowed "
            "for .npz: none (target names a column of a .csv file)"
        )
    if target is not None and (isinstance(target, bool) or not isinstance(target, str | int)):
        raise ConfigError(f"target: {target!r} must be a column name or a column index")


def _check_test_size(test_size: int | float) -> None:
    """``test_size``: a fraction in (0, 1) or a number of samples >= 1."""
    allowed = "allowed: a fraction 0 < test_size < 1 or a number of test samples >= 1"
    if isinstance(test_size, bool) or not isinstance(test_size, int | float | np.number):
        raise ConfigError(f"test_size: {test_size!r} is not a number; {allowed}")
    if isinstance(test_size, int | np.integer):
        if test_size < 1:
            raise ConfigError(f"test_size: {test_size} is out of range; {allowed}")
    elif not 0.0 < test_size < 1.0:
        raise ConfigError(f"test_size: {test_size!r} is out of range; {allowed}")


# ------------------------------------------------------------------------------ raw data


def _bundled(name: str) -> _Raw:
    """The raw arrays of a data set bundled with scikit-learn (imported on first use)."""
    import sklearn
    from sklearn import datasets as sk_datasets

    task, origin = BUNDLED[name]
    options = {"scaled": False} if name == "diabetes" else {}
    X, y = getattr(sk_datasets, f"load_{name}")(return_X_y=True, **options)
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.int64 if task == CLASSIFICATION else np.float64)
    call = f"sklearn.datasets.load_{name}({', '.join(f'{k}={v}' for k, v in options.items())})"
    return _Raw(
        X=X,
        y=y,
        source=f"scikit-learn {sklearn.__version__} {call}: {origin}",
        version=sklearn.__version__,
        sha256=array_checksum(X, y),
        sha256_of="arrays X and y",
        target="the set's target",
        task=task,
    )


def _read_file(path: str | Path, target: str | int | None) -> _Raw:
    """The raw arrays of a user's .npz or .csv file (checked: numbers, finite, equal lengths)."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        X, y, version = _read_npz(path)
        what = "arrays X and y"
    else:
        X, y, what = _read_csv(path, target)
        version = None
    if X.shape[0] < 2 or X.shape[1] < 1:
        raise ConfigError(
            f"data_file: {str(path)!r} has {X.shape[0]} samples of {X.shape[1]} "
            "features; allowed: at least 2 samples of at least 1 feature"
        )
    if version is None:
        stamp = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        version = f"file modified {stamp.isoformat(timespec='seconds')}"
    source = f"user file {path.resolve()}"
    return _Raw(X, y, source, version, file_checksum(path), "file", what, None)


def _read_npz(path: Path) -> tuple[FloatArray, np.ndarray, str | None]:
    """``X`` (n, d) and ``y`` (n,) of a .npz file, and its ``version`` entry if it has one."""
    where = f"data_file: {str(path)!r}"
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as err:
        raise ConfigError(f"{where} is not a readable .npz file ({err})") from None
    missing = [key for key in ("X", "y") if key not in arrays]
    if missing:
        raise ConfigError(
            f"{where} lacks the array(s) {missing} (it has {sorted(arrays)}); "
            "allowed: a .npz with arrays X (samples, features) and y (samples)"
        )
    X, y = arrays["X"], arrays["y"]
    for key, array in (("X", X), ("y", y)):
        if array.dtype.kind not in "biuf":
            raise ConfigError(
                f"{where}: array {key} is non-numeric (dtype {array.dtype}); "
                "allowed: numbers (bool, integer or float)"
            )
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if X.ndim != 2 or y.ndim != 1:
        raise ConfigError(
            f"{where}: X has shape {X.shape} and y {y.shape}; allowed: X of 2 "
            "dimensions (samples, features) and y of 1 (samples)"
        )
    if X.shape[0] != y.shape[0]:
        raise ConfigError(
            f"{where}: X has {X.shape[0]} samples (rows) but y has {y.shape[0]}; "
            "allowed: X and y of the same length"
        )
    X = X.astype(np.float64)
    _check_finite(where + " array X", X, [f"column {j}" for j in range(X.shape[1])])
    y = y.astype(np.int64) if y.dtype.kind in "biu" else y.astype(np.float64)
    _check_finite(where + " array y", y[:, None].astype(np.float64), ["y"])
    version = arrays.get("version")
    if version is not None and version.ndim == 0:
        return X, y, str(version)
    return X, y, None


def _check_finite(where: str, table: FloatArray, columns: Sequence[str]) -> None:
    """ConfigError saying where ``table`` (rows: samples) has NaN, inf or missing values."""
    bad = ~np.isfinite(table)
    if not bad.any():
        return
    rows, cols = np.flatnonzero(bad.any(axis=1)), np.flatnonzero(bad.any(axis=0))
    named = [columns[j] for j in cols[:10]] + (["..."] if cols.size > 10 else [])
    raise ConfigError(
        f"{where} has {int(bad.sum())} NaN, inf or missing value(s) in "
        f"{rows.size} row(s) and {cols.size} column(s) (columns {named}; first in "
        f"data row {rows[0] + 1}); allowed: finite numbers only"
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _csv_rows(path: Path) -> list[list[str]]:
    """The rows of a .csv file, fields stripped, blank lines skipped."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as stream:
            rows = [[field.strip() for field in row] for row in csv.reader(stream)]
    except (UnicodeDecodeError, csv.Error) as err:
        raise ConfigError(f"data_file: {str(path)!r} is not a readable .csv file ({err})") from None
    return [row for row in rows if any(row)]


def _read_csv(path: Path, target: str | int | None) -> tuple[FloatArray, np.ndarray, str]:
    """``X`` (n, d) and ``y`` (n,) of a .csv file and which column ``y`` is."""
    where = f"data_file: {str(path)!r}"
    rows = _csv_rows(path)
    if not rows:
        raise ConfigError(f"{where} is empty; allowed: rows of numbers, a header row optional")
    header = not all(_is_number(field) for field in rows[0] if field)
    width = len(rows[0])
    names = rows[0] if header else [f"column {j}" for j in range(width)]
    body = rows[1:] if header else rows
    for i, row in enumerate(body):
        if len(row) != width:
            first = "the header" if header else "the first row"
            raise ConfigError(
                f"{where}: data row {i + 1} has {len(row)} fields, {first} "
                f"{width}; allowed: the same number in every row"
            )
    if width < 2:
        raise ConfigError(f"{where} has {width} column; allowed: at least 2 (features and y)")
    table = _csv_numbers(where, body, names, header)
    _check_finite(where, table, names)
    j = _target_column(f"data_file {str(path)!r}", target, names, header)
    what = f"column {names[j]!r} (index {j} of {width})" if header else f"column {j} of {width}"
    return np.delete(table, j, axis=1), table[:, j], what


def _csv_numbers(where: str, body: list[list[str]], names: list[str], header: bool) -> FloatArray:
    """The fields of a .csv file as float64 (empty: NaN); ConfigError naming the non-numeric
    columns."""
    text = np.array(body, dtype=str).reshape(len(body), len(names))
    try:
        return np.where(text == "", "nan", text).astype(np.float64)
    except ValueError:  # numpy's parser is stricter than Python's (e.g. "1_000")
        pass
    bad = np.vectorize(lambda s: bool(s) and not _is_number(s), otypes=[bool])(text)
    if not bad.any():
        return np.vectorize(lambda s: float(s) if s else math.nan, otypes=[np.float64])(text)
    cols = np.flatnonzero(bad.any(axis=0))
    i, j = np.argwhere(bad)[0]
    read = " (the first row is read as its header: it is not all numbers)" if header else ""
    raise ConfigError(
        f"{where} has non-numeric values in column(s) {[names[c] for c in cols]} "
        f"(first {str(text[i, j])!r} in data row {i + 1}){read}; allowed: numbers"
    )


def _target_column(where: str, target: str | int | None, names: list[str], header: bool) -> int:
    """The index of the column ``y`` (default the last)."""
    width = len(names)
    if target is None:
        return width - 1
    if isinstance(target, str):
        if not header:
            raise ConfigError(
                f"target: {target!r} names a column, but {where} has no "
                f"header row; allowed: a column index 0 to {width - 1}"
            )
        if names.count(target) != 1:
            raise ConfigError(f"target: {target!r} is not one column of {where}; allowed: {names}")
        return names.index(target)
    if not -width <= target < width:
        raise ConfigError(
            f"target: column {target} is out of range for {where}; allowed: "
            f"0 to {width - 1} (or -1 to {-width} from the end)"
        )
    return int(target) % width


# ------------------------------------------------------------------------------ split


def _allocate(sizes: np.ndarray, k: int, floor_in: int, floor_out: int) -> np.ndarray:
    """How many samples to take from each group, ``k`` in all: at least ``floor_in`` of each and
    at most its size less ``floor_out``; the rest in proportion to what each group can give
    (largest remainder, ties to the earlier group). The caller checks that this is possible."""
    pool = sizes.astype(np.int64) - floor_in - floor_out
    extra, total = k - floor_in * len(sizes), int(pool.sum())
    if total == 0:
        return np.full(len(sizes), floor_in, dtype=np.int64)
    share = extra * pool
    take = share // total
    left = extra - int(take.sum())
    take[np.argsort(-(share % total), kind="stable")[:left]] += 1
    return floor_in + take


def _draw(
    groups: Sequence[np.ndarray], counts: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(chosen, rest), each sorted: ``counts[g]`` samples of group ``g`` from the front of a
    seeded permutation of it."""
    chosen, rest = [], []
    for group, count in zip(groups, counts, strict=True):
        order = rng.permutation(group)
        chosen.append(order[:count])
        rest.append(order[count:])
    return np.sort(np.concatenate(chosen)), np.sort(np.concatenate(rest))


def _groups(labels: np.ndarray | None, index: np.ndarray) -> list[np.ndarray]:
    """The samples ``index`` by class (one group for regression, ``labels`` None), sorted."""
    if labels is None:
        return [np.sort(index)]
    return [np.sort(index[labels[index] == c]) for c in np.unique(labels)]


def _test_count(where: str, test_size: int | float, n: int, n_classes: int) -> int:
    """The number of test samples: ceil(test_size n) for a fraction, else test_size; at least
    one per class in each split (and two training samples)."""
    n_test = math.ceil(round(test_size * n, 9)) if isinstance(test_size, float) else test_size
    low = max(n_classes, 1)
    high = n - max(n_classes, 2)
    if not low <= n_test <= high:
        per = f" ({n_classes} classes: one of each on both sides)" if n_classes else ""
        raise ConfigError(
            f"test_size: {test_size!r} gives {n_test} test samples of the {n} of "
            f"{where}; allowed: {low} to {high} test samples{per}"
        )
    return int(n_test)


def _check_classes(where: str, labels: np.ndarray) -> None:
    """At least two classes, each of at least two samples (one for each split)."""
    classes, counts = np.unique(labels, return_counts=True)
    if classes.size < 2:
        raise ConfigError(
            f"task: {where} has one class ({classes.tolist()}); allowed: at least "
            "2 classes for task 'classification'"
        )
    few = classes[counts < 2]
    if few.size:
        hint = " (y looks continuous: task 'regression'?)" if classes.size > labels.size / 2 else ""
        raise ConfigError(
            f"{where}: too few samples per class for the split: {few.size} "
            f"class(es) ({few[:10].tolist()}) have 1 sample; allowed: at least 2 "
            f"per class, one in each of the training and test splits{hint}"
        )


def _check_P(where: str, P: int | None, available: int, n_classes: int) -> int:
    """``P`` (None: every training sample) between max(2, classes) and the available count."""
    if P is None:
        return available
    low = max(2, n_classes)
    if isinstance(P, bool) or not isinstance(P, int | np.integer):
        raise ConfigError(f"P: {P!r} must be an integer; allowed: {low} <= P <= {available}")
    if P > available:
        raise ConfigError(
            f"P: {P} exceeds the {available} training samples available in "
            f"{where} (after the test split); allowed: {low} <= P <= "
            f"{available}"
        )
    if P < low:
        per = f" (one sample of each of {n_classes} classes)" if n_classes else ""
        raise ConfigError(f"P: {P} is too small{per}; allowed: {low} <= P <= {available}")
    return int(P)


def _split(
    raw: _Raw, where: str, key: dict[str, Any], task: str, P: int | None, test_size: int | float
) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, test rows) of the raw data: the seeded (stratified) split and the seeded
    (stratified) training subsample of ``P`` samples, from the streams of ``key``."""
    labels = raw.y if task == CLASSIFICATION else None
    if labels is not None:
        _check_classes(where, labels)
    n_classes = 0 if labels is None else np.unique(labels).size
    n = raw.y.shape[0]
    n_test = _test_count(where, test_size, n, n_classes)
    groups = _groups(labels, np.arange(n))
    floor = 1 if labels is not None else 0
    counts = _allocate(np.array([g.size for g in groups]), n_test, floor, floor)
    test, train = _draw(groups, counts, seeds.generator(SPLIT_STREAM, key))
    P = _check_P(where, P, train.size, n_classes)
    groups = _groups(labels, train)
    counts = _allocate(np.array([g.size for g in groups]), P, floor, 0)
    train, _ = _draw(groups, counts, seeds.generator(SUBSAMPLE_STREAM, key))
    return train, test


# ------------------------------------------------------------------------------ loading


def load_dataset(
    name: str,
    *,
    path: str | Path | None = None,
    P: int | None,
    test_size: int | float,
    split_seed: int,
    task: str | None = None,
    target: str | int | None = None,
) -> RealData:
    """The data set ``name`` (:data:`NAMES`) split, subsampled and standardised.

    ``path``: the user's file (``name="file"``: a .npz with arrays X and y, or a .csv);
    ``target``: the .csv column of y (a header name or an index; default the last column);
    ``task``: "classification" or "regression" (needed for a file; a bundled set has its own);
    ``test_size``: a fraction of the samples (rounded up) or a number of samples;
    ``split_seed`` seeds the split and the subsample; ``P``: the number of training samples
    (None: the whole training split). ConfigError naming the key and what is allowed.
    """
    check_arguments(
        name, path=path, test_size=test_size, split_seed=split_seed, task=task, target=target
    )
    integral = isinstance(test_size, int | np.integer)
    test_size = int(test_size) if integral else float(test_size)
    raw = _read_file(path, target) if name == FILE else _bundled(name)
    task = task or raw.task
    y = raw.y
    if task == CLASSIFICATION and y.dtype.kind == "f" and np.all(y == np.round(y)):
        y = y.astype(np.int64)  # integral labels read as floats (a .csv file)
        raw = replace(raw, y=y)
    where = f"data_file {str(path)!r}" if name == FILE else f"dataset {name!r}"
    key = {"dataset": name, "split_seed": int(split_seed)}
    train, test = _split(raw, where, key, task, P, test_size)
    x_mean, x_scale, constant = _standardisation(raw.X[train])
    common = {
        "name": name, "task": task, "source": raw.source, "version": raw.version,
        "sha256": raw.sha256, "sha256_of": raw.sha256_of, "target": raw.target,
        "split_seed": int(split_seed), "test_size": test_size, "train_index": train,
        "test_index": test, "x_mean": x_mean, "x_scale": x_scale, "constant_features": constant,
        "X_train": (raw.X[train] - x_mean) / x_scale, "X_test": (raw.X[test] - x_mean) / x_scale,
    }  # fmt: skip
    return RealData(**common, **_targets(raw, where, task, train, test))


def _standardisation(X: FloatArray) -> tuple[FloatArray, FloatArray, tuple[int, ...]]:
    """(mean, scale, constant features) of the training inputs ``X``: the scale is the standard
    deviation (ddof 0), 1 for a feature that takes one value on ``X``."""
    mean = X.mean(axis=0)
    constant = np.ptp(X, axis=0) == 0
    scale = np.where(constant, 1.0, X.std(axis=0))
    return mean, scale, tuple(int(j) for j in np.flatnonzero(constant))


def _targets(
    raw: _Raw, where: str, task: str, train: np.ndarray, test: np.ndarray
) -> dict[str, Any]:
    """Y_train, Y_test (one-hot, or y standardised with the training mean and deviation, (n, 1)),
    the classes and the targets' standardisation."""
    if task == CLASSIFICATION:
        classes = np.unique(raw.y)
        one_hot = (raw.y[:, None] == classes[None, :]).astype(np.float64)
        return {"Y_train": one_hot[train], "Y_test": one_hot[test], "classes": classes}
    y = raw.y.astype(np.float64)
    if np.ptp(y[train]) == 0:
        raise ConfigError(
            f"task: the {train.size} training targets of {where} are all "
            "equal; allowed: varying targets for task 'regression'"
        )
    y_mean, y_scale = float(y[train].mean()), float(y[train].std())
    Y = ((y - y_mean) / y_scale)[:, None]
    return {"Y_train": Y[train], "Y_test": Y[test], "classes": np.empty(0, dtype=np.int64),
            "y_mean": y_mean, "y_scale": y_scale}  # fmt: skip


# ------------------------------------------------------------------------------ stored form


def dataset_to_xarray(data: RealData) -> xr.Dataset:
    """The stored form of ``data`` (CF: every variable has long_name, units and source; the
    global attributes record the data set, its version and checksum, the split and the
    standardisation). :func:`dataset_from_xarray` is its exact inverse."""
    src = f"{data.name} data set: {data.source}"
    kind = "one-hot class" if data.task == CLASSIFICATION else "standardised target"
    described = {
        "X_train": (("sample", "feature"), "standardised training inputs"),
        "Y_train": (("sample", "output"), f"training targets ({kind})"),
        "X_test": (("test_sample", "feature"), "standardised test inputs"),
        "Y_test": (("test_sample", "output"), f"test targets ({kind})"),
        "train_index": (("sample",), "row of the training sample in the raw data"),
        "test_index": (("test_sample",), "row of the test sample in the raw data"),
        "x_mean": (("feature",), "training mean of the raw input feature"),
        "x_scale": (("feature",), "training standard deviation of the raw input feature "
                    "(1 if constant)"),
    }  # fmt: skip
    if data.task == CLASSIFICATION:
        described["classes"] = (("output",), "class label of the output")
    else:
        described["y_mean"] = ((), "training mean of the raw target")
        described["y_scale"] = ((), "training standard deviation of the raw target")
    variables = {
        name: (dims, getattr(data, name), attrs(long_name, "1", src))
        for name, (dims, long_name) in described.items()
    }
    return xr.Dataset(variables, attrs=_global_attrs(data))


def _global_attrs(data: RealData) -> dict[str, Any]:
    """The data set's attributes in the stored file."""
    out: dict[str, Any] = {
        "dataset": data.name, "dataset_source": data.source, "dataset_version": data.version,
        "dataset_sha256": data.sha256, "dataset_sha256_of": data.sha256_of,
        "task": data.task, "target": data.target, "split_seed": data.split_seed,
        "test_size": data.test_size, "P": data.P, "n_test": data.n_test,
        "n_classes": data.n_classes, "standardisation": STANDARDISATION,
        "constant_features": " ".join(str(j) for j in data.constant_features),
    }  # fmt: skip
    if data.name in BUNDLED:
        out["sklearn_version"] = data.version
    return out


def dataset_from_xarray(ds: xr.Dataset) -> RealData:
    """The :class:`RealData` stored by :func:`dataset_to_xarray` (read back from its file)."""
    a = ds.attrs
    if "dataset_sha256" not in a or "X_train" not in ds:
        raise ValueError("dataset_from_xarray: not a stored real data set (no dataset_sha256)")
    test_size = a["test_size"]
    test_size = int(test_size) if isinstance(test_size, int | np.integer) else float(test_size)
    regression = a["task"] == REGRESSION
    return RealData(
        name=str(a["dataset"]),
        task=str(a["task"]),
        X_train=ds["X_train"].values,
        Y_train=ds["Y_train"].values,
        X_test=ds["X_test"].values,
        Y_test=ds["Y_test"].values,
        classes=np.empty(0, dtype=np.int64) if regression else ds["classes"].values,
        source=str(a["dataset_source"]),
        version=str(a["dataset_version"]),
        sha256=str(a["dataset_sha256"]),
        sha256_of=str(a["dataset_sha256_of"]),
        target=str(a["target"]),
        split_seed=int(a["split_seed"]),
        test_size=test_size,
        train_index=ds["train_index"].values,
        test_index=ds["test_index"].values,
        x_mean=ds["x_mean"].values,
        x_scale=ds["x_scale"].values,
        constant_features=tuple(int(j) for j in str(a["constant_features"]).split()),
        y_mean=float(ds["y_mean"].values) if regression else None,
        y_scale=float(ds["y_scale"].values) if regression else None,
    )


def make(params: Params) -> xr.Dataset:
    """:class:`~weightdyn.experiments.DataSet` ``make``: the stored data set of the keys
    :data:`DATA_KEYS` (``dataset``, ``data_file``, ``target``, ``task``, ``P``, ``split_seed``;
    the optional ones may be absent or None) and the setting ``test_size``."""
    return dataset_to_xarray(
        load_dataset(
            params["dataset"],
            path=params.get("data_file"),
            P=params["P"],
            test_size=params["test_size"],
            split_seed=params["split_seed"],
            task=params.get("task"),
            target=params.get("target"),
        )
    )


def load(ds: xr.Dataset) -> RealData:
    """:class:`~weightdyn.experiments.DataSet` ``load``: :func:`dataset_from_xarray`."""
    return dataset_from_xarray(ds)
