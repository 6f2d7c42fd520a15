"""The template engine: values escaped (and masked where a template says so), markup never built by hand."""

from __future__ import annotations

from pathlib import Path

from pipeline import templates


def test_every_value_is_escaped_and_masked_values_are_masked() -> None:
    env = templates.environment()
    page = env.from_string("<p>{{ v }}</p><p>{{ s | masked }}</p>").render(
        v="<script>alert(1)</script> & \"q\"", s="key sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0")
    assert "<script>" not in page and "&lt;script&gt;" in page and "&amp;" in page
    assert "[REDACTED:" in page and "a1B2c3D4e5F6g7H8" not in page


def test_already_written_html_passes_once_and_a_missing_value_is_an_error() -> None:
    env = templates.environment()
    assert env.from_string("{{ h }}").render(h=templates.markup("<b>x</b>")) == "<b>x</b>"
    try:
        env.from_string("{{ nothing }}").render()
    except Exception as exc:  # StrictUndefined: a template never prints an empty string for a typo
        assert "nothing" in str(exc)
    else:
        raise AssertionError("an undefined value rendered")


def test_every_template_parses() -> None:
    env = templates.environment()
    names = sorted(p.name for p in Path(templates.HERE).glob("*.j2"))
    assert {"conversation.html.j2", "evidence.html.j2", "report.html.j2"} <= set(names)
    for name in names:
        env.get_template(name)
