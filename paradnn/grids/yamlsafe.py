"""Reading a YAML file safely: bounded size, depth and alias expansion, no duplicate keys, a
one-line ParadnnError naming the file, the line and the problem (docs/reliability.md)."""

from __future__ import annotations

from typing import Any

import yaml

from paradnn.errors import ParadnnError, echo


#: Limits on a sweep file, so that no file can exhaust memory or the stack before it is checked.
MAX_FILE_BYTES = 16 * 2**20
MAX_YAML_DEPTH = 32
#: Values the file may expand to when every alias (``*name``) is replaced by what it names.
MAX_YAML_VALUES = 100_000


class _YamlLimit(Exception):
    def __init__(self, message: str, mark: Any = None):
        self.message, self.mark = message, mark
        super().__init__(message)


def _safe_loader():
    class Loader(yaml.SafeLoader):
        """SafeLoader that refuses duplicate keys and nesting deeper than MAX_YAML_DEPTH."""

        depth = 0

        def compose_node(self, parent, index):  # type: ignore[override]
            self.depth += 1
            try:
                if self.depth > MAX_YAML_DEPTH:
                    raise _YamlLimit(f"nested deeper than {MAX_YAML_DEPTH} levels",
                                     self.peek_event().start_mark)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):  # type: ignore[override]
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = (key_node.tag, key_node.value) if isinstance(key_node, yaml.ScalarNode) \
                    else id(key_node)
                if key in seen:
                    raise _YamlLimit(f"duplicate key {echo(key_node.value)} (first at line "
                                     f"{seen[key].line + 1}); each key may appear once",
                                     key_node.start_mark)
                seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep)

    return Loader


def _expanded_size(root: Any) -> int:
    """Values a YAML node graph holds once every alias is expanded (shared nodes counted each
    time they are used), computed over distinct nodes, so an alias bomb is measured, not built.
    A recursive alias raises _YamlLimit."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Any) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in active:
            raise _YamlLimit("a recursive alias (a value that contains itself)", node.start_mark)
        active.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(c) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            n = 1
        active.discard(id(node))
        sizes[id(node)] = n = min(n, MAX_YAML_VALUES + 1)  # stop counting past the limit
        return n

    return size(root)


def read_yaml(path: str, text: str | None = None) -> Any:
    """The data of a YAML file read safely: UTF-8 text of at most MAX_FILE_BYTES, no duplicate
    keys, at most MAX_YAML_DEPTH levels and MAX_YAML_VALUES values after alias expansion.
    ParadnnError naming the file (as a sweep file), the line and the problem otherwise. With
    ``text``, that text is read instead of the file (named ``path`` in messages)."""
    if text is not None:
        raw = text.encode("utf-8")
    else:
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            raise ParadnnError(f"sweep file {path}: no such file") from None
        except OSError as exc:
            raise ParadnnError(f"sweep file {path}: cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ParadnnError(f"sweep file {path}: larger than {MAX_FILE_BYTES // 2**20} MiB; "
                           "a sweep file names axes, not configs")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParadnnError(f"sweep file {path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                           f"offset {exc.start}); save it as UTF-8") from None
    loader = _safe_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_VALUES:
            raise _YamlLimit(f"expands to more than {MAX_YAML_VALUES:,} values through aliases "
                             "(*name); write the values out or use ranges")
        return loader.construct_document(node)
    except _YamlLimit as exc:
        where = f" at line {exc.mark.line + 1}" if exc.mark is not None else ""
        raise ParadnnError(f"sweep file {path}: {exc.message}{where}") from None
    except RecursionError:
        raise ParadnnError(f"sweep file {path}: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        problem = " ".join(str(problem).split())  # one line
        raise ParadnnError(f"sweep file {path}: not valid YAML{where}: {problem}") from None
    finally:
        loader.dispose()


__all__ = ["MAX_FILE_BYTES", "MAX_YAML_DEPTH", "MAX_YAML_VALUES", "read_yaml"]
