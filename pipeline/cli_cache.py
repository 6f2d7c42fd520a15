"""Verbs of this area are registered here."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Nothing yet: this area is being built."""
