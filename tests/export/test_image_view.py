"""The base image reader on small hand-made layers: whiteouts and opaque folders as the OCI
spec says, and the locate refusals (fast; the real-sglang images are in test_oci.py)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.export import ImageView, locate_in_image, open_base
from tests.export import images

SP = "usr/lib/python3/dist-packages"
META = b"Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n"


def layer(files: dict[str, bytes], dirs: tuple[str, ...] = ()) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def test_whiteouts_and_opaque_folders(tmp_path):
    lower = layer({"a/x": b"1", "a/y": b"2", "b/z": b"3", "c/keep": b"4"})
    upper = layer({"a/.wh.x": b"", "b/.wh..wh..opq": b"", "b/new": b"5", "c/keep": b"6"})
    base = images.write_docker_save([lower, upper], tmp_path / "img.tar")
    with open_base(base) as (image, store):
        view = ImageView(image, store)
        assert sorted(p for p in view.entries if view.is_file(p)) == ["a/y", "b/new", "c/keep"]
        assert view.read_files(["c/keep", "a/x"]) == {"c/keep": b"6"}


def test_locate_refusals(tmp_path):
    dist = f"{SP}/sglang-0.5.23.dist-info"
    two = layer(
        {
            f"{dist}/METADATA": META,
            "usr/local/lib/python3.11/site-packages/sglang-0.5.23.dist-info/METADATA": META,
        }
    )
    editable = json.dumps({"url": "file:///src", "dir_info": {"editable": True}}).encode()
    no_hook = layer(
        {
            f"{dist}/METADATA": META,
            f"{dist}/direct_url.json": editable,
            "src/sglang/__init__.py": b"",
        }
    )
    other = layer({f"{dist}/METADATA": META.replace(b"0.5.23", b"0.5.22")})
    cases = [
        (two, "2 installs"),
        (no_hook, "no .pth"),
        (other, "holds sglang 0.5.22"),
        (layer({}), "no sglang install"),
    ]
    for number, (data, message) in enumerate(cases):
        base = images.write_docker_save([data], tmp_path / f"{number}.tar")
        with open_base(base) as (image, store), pytest.raises(ConfigError, match=message):
            locate_in_image(ImageView(image, store), "sglang", "0.5.23")
    with pytest.raises(ConfigError, match="not found"), open_base(tmp_path / "missing"):
        pass


def test_a_drifted_base_file_is_refused_before_anything_is_written(tmp_path):
    """A base whose file differs from the lock's base: exit 2 naming it, no --out."""
    from typer.testing import CliRunner

    from ddtree_deploy.cli.app import app
    from tests.export.conftest import PATCHSETS

    dist = f"{SP}/sglang-0.5.13.post1.dist-info"
    files = {
        f"{dist}/METADATA": META.replace(b"0.5.23", b"0.5.13.post1"),
        f"{dist}/RECORD": b"sglang/__init__.py,,\n",
        f"{SP}/sglang/__init__.py": b"",
        f"{SP}/sglang/srt/speculative/spec_info.py": b"# not the pinned file\n",
    }
    base = images.write_docker_save([layer(files)], tmp_path / "img.tar")
    result = CliRunner().invoke(
        app,
        ["export", "oci", "-p", "ddtree@1.1.12", "--base", str(base), "--out", str(tmp_path / "o")],
        env={"DDTREE_DEPLOY_PATCHSETS": str(PATCHSETS)},
    )
    assert result.exit_code == 2, result.output
    assert "sglang/srt/speculative/spec_info.py" in result.output
    assert not (tmp_path / "o").exists()
