"""Reading config files strictly: a key given twice in one mapping is an error, not "last wins".

PyYAML (and so Snakemake) keeps the last of two equal keys without a word: ``N: 20`` then
``N: 30`` runs N = 30. :func:`check_files` reads each file again with :class:`StrictLoader`,
which names the key, the file and both lines. Keys brought in by a YAML merge (``<<: *anchor``)
may be overridden, as the configs do on purpose.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

import yaml

from weightdyn.experiments import ConfigError


class StrictLoader(yaml.SafeLoader):
    """A safe YAML loader that raises :class:`ConfigError` on a key repeated in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # SafeLoader's own error follows
            if key in seen:
                raise ConfigError(
                    f"{key_node.start_mark.name}, line {key_node.start_mark.line + 1}: "
                    f"duplicate key {key!r} (first given on line {seen[key].line + 1}); "
                    "give each key once"
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def load(path: str | os.PathLike) -> Any:
    """The YAML document of ``path``, read with :class:`StrictLoader` (errors name the file)."""
    path = Path(path)
    with path.open(encoding="utf-8") as stream:
        return yaml.load(stream, Loader=StrictLoader)  # a SafeLoader subclass: safe


def check_files(paths: Iterable[str | os.PathLike]) -> None:
    """Raise :class:`ConfigError` if any of ``paths`` (that exists) repeats a key in a mapping."""
    for path in paths:
        if Path(path).is_file():
            load(path)
