"""Secrets: what a secret is, where it is in a text, and the last gate before anything is written.

Owns: `scan` (detection: detect-secrets plugins plus our own patterns; masks), `gate` (a batch's
known secrets, found again however an engine rewrote them: `SecretSet`), `redact` (redaction of
what is written or shown, and `LineMasker` for the consolidator's tools).

May import: the standard library, third-party packages and the cross-cutting top-level modules;
every stage may import it.
"""
