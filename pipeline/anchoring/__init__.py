"""The date-anchoring reference: what a harness would import to keep its prompt cache across midnight.

Owns: `rules` (the session's base date, `<date-change>` notices, the current-date section),
`request_builder` (whole requests and the invariants between consecutive ones), `fingerprint`
(stable hashes of prompt sections), `tokens` (token estimates).

May import: the standard library and third-party packages only, so a harness can vendor it alone.
"""
