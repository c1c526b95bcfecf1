"""The one `.properties` reader: every command's `--config FILE` goes through it.

Java-style lines: `key=value` or `key:value` (the first `=` or `:` separates; spaces around
key and value are dropped), `#` and `!` start a comment line, blank lines are skipped, and a
key given twice takes its last value (as `java.util.Properties` does). Keys, types and ranges
come from `vocab.config`.

Every error is one line, `FILE:LINE: key: what is wrong`, fit to print as it is.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from vocab.config import (
    ACKS_ALIASES,
    ACKS_LEVELS,
    FALSE_WORDS,
    KEYS_BY_NAME,
    TRUE_WORDS,
    TYPE_RANGES,
    UNSET_WORDS,
    VARIANT_NAMES,
    ConfigType,
    Key,
    Kind,
    Layer,
    Use,
)


class PropertiesError(ValueError):
    """A config file or value is wrong; `str()` is one line naming where, the key and what."""

    def __init__(self, message: str, where: str | None = None, key: str | None = None):
        super().__init__(message)
        self.where = where
        self.key = key


class Pair(NamedTuple):
    where: str  # "FILE:LINE"
    key: str
    raw: str


class Setting(NamedTuple):
    where: str
    key: Key
    value: object


def read_pairs(text: str, path: str = "<config>") -> list[Pair]:
    """The (where, key, raw value) lines of a properties text, in file order."""
    pairs = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise PropertiesError(f"{path}:{number}: expected key=value, got {line!r}",
                                  where=f"{path}:{number}")
        pairs.append(Pair(f"{path}:{number}", line[:sep].strip(), line[sep + 1 :].strip()))
    return pairs


# A config file is a few dozen lines; anything near this size is not one.
MAX_CONFIG_BYTES = 1 << 20


def not_regular(mode: int) -> str | None:
    """What a file of this `st_mode` is when it is not a regular file (None when it is): only a
    regular file has an end, so only one can be read safely (a FIFO or /dev/zero never ends)."""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"


def load_pairs(path: str | Path, max_bytes: int = MAX_CONFIG_BYTES) -> list[Pair]:
    """Read a properties file; an unreadable file is a PropertiesError too, and so is anything
    but a regular file of at most `max_bytes`."""
    try:
        # Non-blocking, so that opening a FIFO returns at once and is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            what = not_regular(os.fstat(handle.fileno()).st_mode)
            if what:
                raise PropertiesError(f"{path}: {what}, not a config file", where=str(path))
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise PropertiesError(f"{path}: cannot read: {error.strerror}", where=str(path)) from None
    if len(data) > max_bytes:
        raise PropertiesError(f"{path}: larger than {max_bytes} bytes, not a config file",
                              where=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PropertiesError(f"{path}: not UTF-8 text", where=str(path)) from None
    return read_pairs(text, str(path))


_INTEGER = re.compile(r"-?[0-9]+")
# More digits than any long has: refused as out of range without converting megabytes.
_DIGITS_MAX = 19


def shown(text: str, limit: int = 60) -> str:
    """A value from a file, quoted and cut short: an error line never echoes megabytes."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_value(kind: Kind, raw: str, type: ConfigType = ConfigType.INT) -> object:
    """The value of one key's text; ValueError says what is wrong (without where or key).
    An integer must fit `type`, Kafka's ConfigDef type of the key."""
    text = raw.strip()
    if kind is Kind.INT or (kind is Kind.OPTIONAL_INT and text.lower() not in UNSET_WORDS):
        # ASCII digits only: int() would also take other scripts' digits and underscores.
        if not _INTEGER.fullmatch(text):
            raise ValueError(f"expected an integer, got {shown(text)}")
        low, high = TYPE_RANGES[type]
        if len(text.lstrip("-")) > _DIGITS_MAX or not low <= int(text) <= high:
            raise ValueError(f"{shown(text)} does not fit Kafka's {type} type ({low}..{high})")
        return int(text)
    if kind is Kind.OPTIONAL_INT:
        return None
    if kind is Kind.BOOL:
        if text.lower() in TRUE_WORDS:
            return True
        if text.lower() in FALSE_WORDS:
            return False
        raise ValueError(f"expected true or false, got {shown(text)}")
    if kind is Kind.ACKS:
        level = ACKS_ALIASES.get(text.lower(), text.lower())
        if level not in ACKS_LEVELS:
            spellings = [*ACKS_LEVELS, *ACKS_ALIASES]
            raise ValueError(f"expected {', '.join(spellings[:-1])} or {spellings[-1]}, "
                             f"got {shown(text)}")
        return level
    if text not in VARIANT_NAMES:
        raise ValueError(f"unknown variant {text!r} (known: {', '.join(VARIANT_NAMES)})")
    return text


def _not_here(key: Key, layer: Layer) -> str:
    if layer is Layer.MODEL:
        return "a cluster setting, not used by the model"
    if key.bound:
        return "an exploration bound of the model, not a cluster setting"
    return "a rule of the model only, not a cluster setting"


def settings(pairs: Iterable[Pair], layer: Layer) -> list[Setting]:
    """Typed values of the keys `layer` uses, in file order.

    An unknown key, a key of the other layer or a value of the wrong type is a PropertiesError.
    Ranges are checked by the config built from these values (see `problem`), which knows the
    other keys a range depends on.
    """
    known = [name for name, key in KEYS_BY_NAME.items() if _uses(key, layer)]
    out = []
    for where, name, raw in pairs:
        key = KEYS_BY_NAME.get(name)
        if key is None:
            raise PropertiesError(f"{where}: unknown key {shown(name)} (known: {', '.join(known)})",
                                  where=where, key=name)
        if not _uses(key, layer):
            raise PropertiesError(f"{where}: {name}: {_not_here(key, layer)}",
                                  where=where, key=name)
        try:
            value = parse_value(key.kind, raw, key.type)
        except ValueError as error:
            raise PropertiesError(f"{where}: {name}: {error}", where=where, key=name) from None
        out.append(Setting(where, key, value))
    return out


def _uses(key: Key, layer: Layer) -> bool:
    return key.layer is Layer.BOTH or key.layer is layer


def problem(key: Key, use: Use, value: object, value_of: Callable[[str], object]) -> str | None:
    """What is wrong with a typed value in one layer (None when nothing is), as
    `must be ...`; `value_of(name)` gives another key's value for a range that depends on it."""
    if key.kind is Kind.ACKS:
        return None if value in ACKS_LEVELS else \
            f"must be {', '.join(ACKS_LEVELS[:-1])} or {ACKS_LEVELS[-1]}"
    if key.kind is Kind.VARIANT:
        return None if value in VARIANT_NAMES else \
            f"unknown variant {value!r} (known: {', '.join(VARIANT_NAMES)})"
    if key.kind is Kind.BOOL:
        return None if isinstance(value, bool) else "must be true or false"
    if value is None and key.kind is Kind.OPTIONAL_INT:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        return "must be an integer"
    # The key's own range within its Java type's, so that every integer has both bounds.
    type_low, type_high = TYPE_RANGES[key.type]
    low = type_low if use.min is None else max(use.min, type_low)
    high, high_text = use.max, str(use.max)
    if isinstance(high, str):
        high_text = f"the number of {high} ({value_of(high)})"
        high = value_of(high)
    if high is None or high > type_high:
        high, high_text = type_high, f"{type_high} (Kafka's {key.type} type)"
    if low <= value <= high:
        return None
    if use.max is None:  # a lower bound of its own: say the side that was crossed
        return f"must be >= {low}" if value < low else f"must be <= {high_text}"
    return f"must be between {low} and {high_text}"
