"""The exception catalogue: every exception class of the package is defined in pipeline/errors.py
and derives from PipelineError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pipeline
from pipeline import errors


def package_modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(pipeline.__path__, prefix="pipeline.") if not m.name.endswith("__main__")]


def test_every_exception_class_is_in_the_catalogue() -> None:
    elsewhere = []
    for name in package_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name \
                    and name != "pipeline.errors":
                elsewhere.append(f"{name}.{attr}")
    assert not elsewhere, f"exception classes defined outside pipeline/errors.py: {elsewhere}"


def test_every_catalogued_exception_is_a_pipeline_error_with_an_exit_code() -> None:
    classes = [v for v in vars(errors).values() if inspect.isclass(v) and issubclass(v, BaseException)]
    assert sorted(c.__name__ for c in classes) == sorted(errors.__all__)
    for cls in classes:
        assert issubclass(cls, errors.PipelineError), cls
        assert cls.exit_code in (1, 2) and cls.__doc__, cls
        assert cls.__name__ in (errors.__doc__ or ""), f"{cls.__name__} is missing from the module docstring's tree"


def test_the_modules_that_raise_them_share_the_same_classes() -> None:
    from pipeline.calls import values
    from pipeline.consolidator import artifact, tools
    from pipeline.corpus import git_corpus
    from pipeline.nightly import lock, report

    assert tools.ToolError is errors.ToolError and artifact.ArtifactError is errors.ArtifactError
    assert lock.LockedError is errors.LockedError and report.ReportError is errors.ReportError
    assert git_corpus.CorpusError is errors.CorpusError and values.BadValue is errors.BadValue
    assert issubclass(errors.BadValue, ValueError)  # pydantic validators and callers catching ValueError still see it


def test_a_notebook_error_reads_as_one_line() -> None:
    exc = errors.NotebookError(cell=6, execution_count=4, name="KeyError", message="'db'\nmore")
    assert str(exc) == "cell 6 (In [4]) raised KeyError: 'db'"
    assert exc.to_json() == {"cell": 6, "executionCount": 4, "name": "KeyError", "message": "'db'\nmore"}
    assert exc.exit_code == 1
