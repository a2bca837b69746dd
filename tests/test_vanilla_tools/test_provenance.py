"""Provenance cannot miss a change: untracked files under the packages count, every differing file is named, the
generated outputs (records, pages made from them) do not count, and the code's own name survives a records-only
commit."""

import subprocess
from pathlib import Path

from vanilla_tools.provenance import CODE_RECORD, GENERATED, LIBRARY, generated, git_commit, packages


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True
    )


def write(root: Path, path: str, text: str = "x = 1\n") -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def repository(root: Path) -> Path:
    """A checkout with a library package, a repository tool, a generated page and a record, committed."""
    for path in (
        "training/__init__.py",
        "experiments/__init__.py",
        "docs/table3.md",
        "results/a/summary.json",
        "README.md",
    ):
        write(root, path)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_a_clean_checkout_names_its_commit_and_code(tmp_path):
    code = git_commit(repository(tmp_path))
    assert len(code["commit"]) == 40 and code["uncommitted_changes"] is False
    assert code["changed_files"] == [] and len(code["code_tree"]) == 12


def test_untracked_files_under_the_packages_are_a_change_and_named(tmp_path):
    root = repository(tmp_path)
    write(root, "experiments/new_runner.py")  # a module the commit does not have (the restricted_attention case)
    write(root, "training/configs/new.yaml")
    write(root, "notes.txt")  # outside the packages: not code
    code = git_commit(root)
    assert code["uncommitted_changes"] is True
    new = ["experiments/new_runner.py", "training/configs/new.yaml"]
    assert code["changed_files"] == code["untracked_files"] == new
    assert code["code_tree"] is None  # the library differs from its commit: no name for its code


def test_every_changed_tracked_file_is_named_and_generated_outputs_are_not(tmp_path):
    root = repository(tmp_path)
    for index in range(25):  # more than the first 20 the records named before
        write(root, f"training/m{index:02d}.py")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "modules")
    for index in range(25):
        write(root, f"training/m{index:02d}.py", "x = 2\n")
    write(root, "docs/table3.md", "regenerated after a row\n")
    write(root, "results/a/summary.json", "{}\n")
    write(root, "results/b/table3.json", "{}\n")
    code = git_commit(root)
    assert code["changed_files"] == [f"training/m{index:02d}.py" for index in range(25)]
    assert code["untracked_files"] == []


def test_the_code_tree_survives_a_commit_of_records_and_docs_only(tmp_path):
    root = repository(tmp_path)
    before = git_commit(root)
    write(root, "results/b/table3.json", "{}\n")
    write(root, "README.md", "more\n")
    assert git_commit(root)["code_tree"] == before["code_tree"]  # a changed README is named, but it is not code
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "records")
    after = git_commit(root)
    assert after["commit"] != before["commit"] and after["code_tree"] == before["code_tree"]
    write(root, "training/__init__.py", "x = 2\n")
    git(root, "commit", "-q", "-am", "code")
    assert git_commit(root)["code_tree"] not in (None, before["code_tree"])


def test_the_rules_name_this_repository(tmp_path):
    assert generated("results/table3/base/table3.json") and generated("docs/table3.md")
    assert not generated("docs/paper.md") and not generated("experiments/table3.py")
    assert all(name.startswith(("results/", "docs/")) for name in GENERATED)
    assert {"modeling_vanilla", "training", "benchmarks", "experiments"} <= set(packages())
    assert set(LIBRARY) - {"data"} < set(packages())
    assert git_commit(tmp_path) == {"commit": None, "uncommitted_changes": None}  # not a git checkout


def test_a_copy_without_git_names_the_commit_its_code_json_was_packed_from(tmp_path):
    """benchmarks/gpu_pack.py packs the code without history, with git_commit's record of the checkout as code.json:
    where there is no git, that is the code's record; with neither, the commit is unknown."""
    import json

    root = repository(tmp_path / "checkout")
    write(root, "training/new.py")
    packed = git_commit(root)
    copy = tmp_path / "copy"
    copy.mkdir()
    assert git_commit(copy) == {"commit": None, "uncommitted_changes": None}
    (copy / CODE_RECORD).write_text(json.dumps(packed))
    assert git_commit(copy) == packed and packed["changed_files"] == ["training/new.py"]
