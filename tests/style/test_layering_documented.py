"""The README's layering line says what the import contracts (pyproject.toml) enforce."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_readme_layer_chain_is_the_layers_contract() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(contract["layers"] for contract in contracts if contract["type"] == "layers")
    # A layer of independent packages is written "a | b" in both places.
    bottom_up = [layer.replace("mcm.", "") for layer in reversed(layers)]
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    chain = re.search(r"Dependencies point down the list: ((?:\w+(?: \| \w+)* ← )+\w+)", readme)
    assert chain is not None, "README.md has no layering line"
    assert chain.group(1).split(" ← ") == bottom_up
