"""Test doubles of external services (no test reaches the network)."""
