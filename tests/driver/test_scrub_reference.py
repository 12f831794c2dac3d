"""The fast scrubber replaces exactly what the reference does, on random secrets and messages.

Each case draws a Secret (binary values, short passwords, tokens, multi-line scripts whose lines
share their first characters) and a message that carries values, their lines, words and parts,
and random slices of them, in every encoding the scrubber knows (plain, hex, URL, JSON, base64 at
any byte offset inside a longer stream, URL-safe base64), between random text. The cases are
seeded, so a failure names the seed that reproduces it.
"""

from __future__ import annotations

import base64
import json
import random
import urllib.parse
from collections.abc import Callable

import pytest

from mcm.driver import scrub, scrub_index
from mcm.driver.scrub import REDACTED, scrub_message
from tests.driver.scrub_reference import reference_scrub

CASES = 300
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
PUNCTUATION = " \t'\"=:,./@;&?#-_+%!\\é€"
SCRIPT_STARTS = ('echo "', "export ", "set -e", "done", "  ", "kubeadm join --token ", "")


def random_text(rng: random.Random, length: int, pool: str = ALNUM * 3 + PUNCTUATION) -> str:
    return "".join(rng.choice(pool) for _ in range(length))


def binary_value(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randrange(1, 40))


def word_value(rng: random.Random) -> bytes:
    return random_text(rng, rng.choice([1, 3, 4, 7, 8, 9, 15, 16, 17, 30, 60])).encode()


def token_value(rng: random.Random) -> bytes:
    return f"{random_text(rng, 6, ALNUM)}.{random_text(rng, 16, ALNUM)}".encode()


def script_value(rng: random.Random) -> bytes:
    """Lines that often share their first characters (many entries under one index key)."""
    starts = SCRIPT_STARTS if rng.random() < 0.7 else (rng.choice(SCRIPT_STARTS) + random_text(rng, 12),)
    lines = [rng.choice(starts) + random_text(rng, rng.randrange(0, 25)) for _ in range(rng.randrange(1, 40))]
    return "\n".join(lines).encode()


VALUES: tuple[Callable[[random.Random], bytes], ...] = (binary_value, word_value, token_value, script_value)


def as_text(raw: bytes) -> str:
    """How bytes end up in a message: UTF-8, else Latin-1 (as the scrubber reads them)."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def piece_of(rng: random.Random, value: bytes) -> bytes:
    """The value, or one of its lines, words or parts of words, or a random slice of one."""
    if rng.random() < 0.3:
        return value
    words = (text := as_text(value)).split()
    piece = rng.choice(
        [text, *text.splitlines(), *words, *(part for word in words for part in word.split("."))]
    )
    if rng.random() < 0.2 and len(piece) > 4:
        start = rng.randrange(len(piece))
        piece = piece[start : start + rng.randrange(1, 30)]
    return piece.encode()


def encoded(rng: random.Random, raw: bytes) -> str:
    """``raw`` in one of the encodings the scrubber knows (as text when it is not UTF-8)."""
    text = as_text(raw)
    before, after = rng.randbytes(rng.randrange(3)), rng.randbytes(rng.randrange(3))
    return rng.choice(
        [
            text,
            raw.hex(),
            raw.hex().upper(),
            urllib.parse.quote(raw, safe=""),
            urllib.parse.quote_plus(raw, safe=""),
            json.dumps(text)[1:-1],
            json.dumps(text, ensure_ascii=False)[1:-1],
            base64.b64encode(raw).decode(),
            base64.urlsafe_b64encode(raw).decode(),
            base64.b64encode(before + raw + after).decode(),
            base64.urlsafe_b64encode(before + raw + after).decode(),
        ]
    )


def case(seed: int) -> tuple[dict[str, bytes], str]:
    rng = random.Random(seed)
    secret = {f"key{i}": rng.choice(VALUES)(rng) for i in range(rng.randrange(1, 4))}
    parts = []
    for _ in range(rng.randrange(1, 8)):
        parts.append(random_text(rng, rng.randrange(0, 20), ALNUM + " \n:"))
        parts.append(encoded(rng, piece_of(rng, rng.choice(list(secret.values())))))
    parts.append(random_text(rng, rng.randrange(0, 5)))
    return secret, "".join(parts)


@pytest.mark.parametrize("search", [False, True], ids=["look-up per position", "search per key"])
def test_the_scrubber_replaces_what_the_reference_replaces(
    monkeypatch: pytest.MonkeyPatch, search: bool
) -> None:
    """Either way of finding a secret's keys in a message (chosen by their cost) agrees."""
    monkeypatch.setattr(scrub_index, "search_each_key", lambda keys, positions: search)
    differing = []
    for seed in range(CASES):
        secret, message = case(seed)
        if scrub_message(message, secret, limit=len(message) * len(REDACTED)) != reference_scrub(
            message, secret
        ):
            differing.append(seed)
    assert not differing, f"seeds where the scrubber and the reference differ: {differing[:20]}"


def test_the_cases_are_not_vacuous() -> None:
    """Nearly every message has something replaced (else the comparison would prove little)."""
    scrubbed = [reference_scrub(message, secret) for secret, message in map(case, range(CASES))]
    assert sum(REDACTED in text for text in scrubbed) > CASES * 0.9


@pytest.mark.parametrize("seed", range(0, CASES, 7))
def test_a_cut_message_starts_as_the_scrubbed_whole_would(seed: int) -> None:
    secret, message = case(seed)
    whole = reference_scrub(message, secret)
    for limit in (0, 1, len(whole) // 3, len(whole) // 2, len(whole) - 1, len(whole)):
        cut = scrub_message(message, secret, limit=limit)
        assert cut.startswith(whole[:limit])
        assert (cut == whole) == (len(whole) <= limit)
        assert len(cut) <= limit + len("... (99999 more characters cut)")


@pytest.mark.parametrize("seed", range(0, CASES, 3))
def test_a_message_read_in_small_chunks_is_scrubbed_as_a_whole(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """The scrubber reads a message in chunks up to its cut: a form across a chunk's end (an
    encoded run that goes on past it, a trie that needs the bytes after it) is still found."""
    monkeypatch.setattr(scrub, "_MIN_CHUNK", 1)
    secret, message = case(seed)
    whole = reference_scrub(message, secret)
    for limit in range(0, len(whole) + 2, 3):
        cut = scrub_message(message, secret, limit=limit)
        assert cut.startswith(whole[:limit]), limit
        assert (cut == whole) == (len(whole) <= limit), limit
