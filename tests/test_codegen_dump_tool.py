"""Tests of how codegen/ gets the registry without --registry: the dump tool
(registry_source.py) configured, built or reused, with fake cmake/ninja on PATH."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from codegen import cli, registry_source  # noqa: E402


@pytest.mark.skipif(os.name == "nt", reason="fake cmake is a shell script")
def test_dump_tool_errors_are_surfaced(tmp_path, monkeypatch, capsys):
    """Without --registry: configure once, build the target, run it; errors exit 1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "cmake.log"
    build = tmp_path / "build"
    (bin_dir / "cmake").write_text(f"""#!/bin/sh
echo "$@" >> {log}
if [ "$1" = "-S" ]; then mkdir -p "$4" && touch "$4/CMakeCache.txt"; exit 0; fi
cat > "$2/opforge_dump_registry" <<'X'
#!/bin/sh
echo "cpp/ops/math_ops.cc:12: op Add: attr 'T': unknown dtype 'float16'" >&2
exit 1
X
chmod +x "$2/opforge_dump_registry"
""")
    (bin_dir / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    args = ["--build-dir", str(build), "--out", str(tmp_path / "gen")]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "opforge_dump_registry reported registration errors" in err
    assert "cpp/ops/math_ops.cc:12: op Add: attr 'T': unknown dtype 'float16'" in err
    assert cli.main(args) == 1  # configured already: only builds again
    lines = log.read_text().splitlines()
    assert lines[0] == (f"-S {Path.cwd()} -B {build} -G Ninja -DOPFORGE_PYTHON=OFF "
                        "-DCMAKE_BUILD_TYPE=Release")
    assert lines[1:] == [f"--build {build} --target {registry_source.DUMP_TARGET}"] * 2


def _fake_build(root: Path, name: str, home: Path, sanitize: str = "OFF") -> Path:
    d = root / "build" / name
    d.mkdir(parents=True)
    (d / "CMakeCache.txt").write_text(
        f"CMAKE_HOME_DIRECTORY:INTERNAL={home}\nOPFORGE_SANITIZE:BOOL={sanitize}\n")
    return d


def test_default_dump_reuses_this_trees_build_and_falls_back(tmp_path, monkeypatch, capsys):
    """Without --build-dir: a non-sanitizer build of this tree (what `pip install` leaves)
    is built with ninja and its tool run (as is, if built after every source change); a build of another tree, a sanitizer
    build and build/codegen itself are not candidates; a failing reuse falls back
    to build/codegen."""
    tree = tmp_path / "tree"
    _fake_build(tree, "asan-cp", tree, sanitize="ON")
    _fake_build(tree, "other", tmp_path / "elsewhere")
    assert registry_source.existing_build(tree) is None
    wheel = _fake_build(tree, "cp311", tree)
    assert registry_source.existing_build(tree) == wheel

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "tools.log"
    registry = json.dumps({"format": 1})
    tool = tmp_path / "tool"
    tool.write_text(f"#!/bin/sh\necho '{registry}'\n")
    tool.chmod(0o755)
    for name in ("ninja", "cmake"):  # both take the build folder as $2 (-C DIR / --build DIR)
        (bin_dir / name).write_text(f"""#!/bin/sh
echo "{name} $@" >> {log}
if [ "$NINJA_FAILS" = 1 ] && [ {name} = ninja ]; then exit 1; fi
if [ "$1" = "-S" ]; then mkdir -p "$4"; touch "$4/CMakeCache.txt"; exit 0; fi
cp {tool} "$2/{registry_source.DUMP_TARGET}"
""")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(registry_source, "loads", lambda text, where: (text.strip(), where))
    assert registry_source.dump_registry_default(tree) == (registry, registry_source.DUMP_TARGET)
    assert log.read_text().splitlines() == [f"ninja -C {wheel} {registry_source.DUMP_TARGET}"]

    # Built after the last source change (CI right after `pip install .`): run as is.
    log.unlink()
    (tree / "cpp").mkdir()
    (tree / "cpp" / "ops.cc").write_text("")
    old = (tree / "cpp" / "ops.cc").stat().st_mtime
    os.utime(wheel / registry_source.DUMP_TARGET, (old + 10, old + 10))
    assert registry_source.dump_registry_default(tree) == (registry, registry_source.DUMP_TARGET)
    assert not log.exists()
    os.utime(tree / "cpp" / "ops.cc", (old + 20, old + 20))  # a source edited since: build again

    monkeypatch.setenv("NINJA_FAILS", "1")
    assert registry_source.dump_registry_default(tree) == (registry, registry_source.DUMP_TARGET)
    calls = log.read_text().splitlines()
    assert calls[0].startswith("ninja -C ") and calls[1].startswith(f"cmake -S {tree} -B {tree / 'build' / 'codegen'}")
    assert "building the dump tool in build/codegen" in capsys.readouterr().err


@pytest.mark.skipif(os.name == "nt", reason="fake cmake is a shell script")
def test_dump_build_configured_from_a_deleted_venv_is_configured_again(tmp_path, monkeypatch, capsys):
    """build/codegen whose CMakeCache names a ninja that no longer exists (its venv
    deleted) is configured from scratch instead of failing on every run."""
    build = tmp_path / "build"
    build.mkdir()
    (build / "CMakeCache.txt").write_text(f"CMAKE_MAKE_PROGRAM:FILEPATH={tmp_path / 'gone' / 'ninja'}\n")
    (build / "stale.o").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "cmake.log"
    (bin_dir / "cmake").write_text(f"""#!/bin/sh
echo "$@" >> {log}
if [ "$1" = "-S" ]; then mkdir -p "$4" && touch "$4/CMakeCache.txt"; exit 0; fi
printf '#!/bin/sh\\necho ok\\n' > "$2/{registry_source.DUMP_TARGET}"
chmod +x "$2/{registry_source.DUMP_TARGET}"
""")
    (bin_dir / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(registry_source, "loads", lambda text, where: text.strip())
    assert registry_source.dump_registry(tmp_path, build) == "ok"
    assert log.read_text().splitlines()[0].startswith(f"-S {tmp_path} -B {build}")
    assert not (build / "stale.o").exists()
    assert "which is gone; configuring it again" in capsys.readouterr().err
