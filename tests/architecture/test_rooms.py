"""Rooms inside a layer: the runner behind ``pairedge run`` (``runtime/runner/``) sits beside the pipeline's
stages, which never import it (the pipeline a robot embeds needs no file readers or writers of a run)."""

from __future__ import annotations

from package_tree import module_imports, source_files

RUNNER = "pairedge.runtime.runner"


def test_the_runner_is_a_room_of_its_own() -> None:
    modules = source_files()
    assert any(name.startswith(RUNNER + ".") for name in modules), "runtime/runner/ is gone"
    offenders = sorted(
        f"{name} -> {target}"
        for name, path in modules.items()
        if name.startswith("pairedge.runtime") and not name.startswith(RUNNER)
        for target in module_imports(name, path, modules)
        if target == RUNNER or target.startswith(RUNNER + ".")
    )
    assert offenders == [], "the pipeline's stages import the runner:\n" + "\n".join(offenders)


def test_no_loose_run_prefix_family_in_the_runtime() -> None:
    """``run_*.py`` beside the pipeline was the runner without walls; its modules live in ``runner/``."""
    loose = sorted(
        n for n in source_files() if n.startswith("pairedge.runtime.run_") or n == "pairedge.runtime.run"
    )
    assert loose == []
