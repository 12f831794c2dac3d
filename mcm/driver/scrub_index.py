"""Find many short keys in a text, and the entries behind them, in about linear time.

The index :mod:`mcm.driver.scrub` finds the pieces of secret values with: :func:`key_starts` finds
where any of a set of keys (strings of one length) occurs, and :class:`KeyIndex` says which
entries (pieces of a value, their encoded forms) may start there, through a trie where many share
a key. Nothing here knows about secrets; every candidate is compared with the text by the caller.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import compress

__all__ = ["KeyIndex", "key_starts", "search_each_key"]

_SPLIT = 8
_CHUNK = 8
"""Entries sharing a key: more than :data:`_SPLIT` get a trie of :data:`_CHUNK` characters a level."""
_SEARCH_CHARS = 512
"""A search for one key costs about what a look-up of one position costs, plus as much again for
every this many characters searched (measured on CPython 3.11)."""


def key_starts(
    subject: str, keys: Collection[str], lo: int, hi: int, *, shift: int, width: int
) -> Iterable[int]:
    """The positions ``at`` in ``[lo, hi)`` with a key at ``at + shift`` (every key is ``width``
    characters): by a search for each key or a look-up at each position, whichever is cheaper."""
    if not search_each_key(len(keys), hi - lo):
        stop = hi + shift
        grams = map(
            subject.__getitem__, map(slice, range(lo + shift, stop), range(lo + shift + width, stop + width))
        )
        return compress(range(lo, hi), map(keys.__contains__, grams))
    found: list[int] = []
    end = hi + shift + width - 1
    for key in keys:
        at = subject.find(key, lo + shift, end)
        while at >= 0:
            found.append(at - shift)
            at = subject.find(key, at + 1, end)
    return found


def search_each_key(keys: int, positions: int) -> bool:
    """Whether searching for ``keys`` keys is cheaper than looking up ``positions`` positions."""
    return keys * (_SEARCH_CHARS + positions) < _SEARCH_CHARS * positions


class KeyIndex:
    """Entries by their key (``key_len`` characters), found where they may start in a subject.

    A key that many entries share (a thousand script lines starting ``echo "``) gets a trie of the
    characters that follow, on its first use: a lookup then costs the depth it reaches and the
    entries found there, not the number of entries sharing the key.
    """

    def __init__(
        self,
        keys: Iterable[str],
        entries: Iterable[int],
        key_strings: Callable[[int], Sequence[str]],
        *,
        key_len: int,
    ) -> None:
        groups: defaultdict[str, list[int]] = defaultdict(list)
        deque(map(list.append, map(groups.__getitem__, keys), entries), maxlen=0)  # at C speed
        self.keys = dict(groups)
        self._key_strings = key_strings
        self._key_len = key_len
        self._tries: dict[str, _Node] = {}

    def candidates(self, subject: str, at: int) -> Iterable[int]:
        """The entries that may start at ``at`` of ``subject`` (the key is there)."""
        key = subject[at : at + self._key_len]
        found = self.keys[key]
        if len(found) <= _SPLIT:
            return found
        trie = self._tries.get(key)
        if trie is None:
            strings = [(string, entry) for entry in found for string in self._key_strings(entry)]
            trie = self._tries[key] = _Node(self._key_len, strings)
        return set(trie.find(subject, at))


class _Node:
    """Entries whose key strings (the key and what follows it) agree on their first
    ``depth`` characters; split by the next :data:`_CHUNK` once there are more than :data:`_SPLIT`."""

    __slots__ = ("_depth", "_entries", "_split")

    def __init__(self, depth: int, entries: list[tuple[str, int]]) -> None:
        self._depth = depth
        self._entries = entries
        self._split: tuple[dict[str, list[int]], list[int], dict[str, _Node]] | None = None

    def find(self, subject: str, at: int) -> list[int]:
        """The entries whose whole key string is at ``at`` of ``subject``."""
        found: list[int] = []
        node: _Node | None = self
        while node is not None:
            split = node._split
            if split is None:
                if len(node._entries) <= _SPLIT:
                    found += (entry for string, entry in node._entries if subject.startswith(string, at))
                    return found
                split = node._split = _split(node._depth, node._entries)
            ends, tails, children = split
            start = at + node._depth
            for tail in tails:
                found += ends.get(subject[start : start + tail], ())
            node = children.get(subject[start : start + _CHUNK])
        return found


def _split(
    depth: int, entries: list[tuple[str, int]]
) -> tuple[dict[str, list[int]], list[int], dict[str, _Node]]:
    """The entries that end within the next :data:`_CHUNK` characters (by those characters), the
    lengths these have past ``depth``, and nodes for the others (by the next chunk)."""
    stop = depth + _CHUNK
    ends: dict[str, list[int]] = {}
    deeper: dict[str, list[tuple[str, int]]] = {}
    for string, entry in entries:
        if len(string) <= stop:
            ends.setdefault(string[depth:], []).append(entry)
        else:
            deeper.setdefault(string[depth:stop], []).append((string, entry))
    tails = sorted({len(tail) for tail in ends})
    return ends, tails, {chunk: _Node(stop, group) for chunk, group in deeper.items()}
