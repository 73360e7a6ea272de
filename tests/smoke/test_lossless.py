"""smoke/_lossless.py, imported by path as the controller does: fingerprint, dtype, compare."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.smoke.test_server_suite import LOSSLESS, write_model

BIG_BYTES = 300 * 1024 * 1024  # over FULL_HASH_MAX_BYTES: only the header is hashed


def fingerprint(folder: Path, tokenizer: Path | None = None) -> str:
    return LOSSLESS.model_fingerprint(str(folder), str(tokenizer) if tokenizer else None)


def flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as fh:
        fh.seek(offset)
        old = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([(old[0] if old else 0) ^ 0xFF]))


def test_fingerprint_is_stable_and_independent_of_the_folder(tmp_path):
    model = write_model(tmp_path / "a")
    first = fingerprint(model)
    assert first == fingerprint(model) and len(first) == 64
    assert fingerprint(Path(shutil.copytree(model, tmp_path / "elsewhere"))) == first


@pytest.mark.parametrize(
    ("name", "offset"),
    [("config.json", 3), ("tokenizer.json", 2), ("model.safetensors", -1)],
)
def test_fingerprint_changes_with_one_byte(tmp_path, name, offset):
    model = write_model(tmp_path / "m")
    before = fingerprint(model)
    path = model / name
    flip_byte(path, offset % path.stat().st_size)
    assert fingerprint(model) != before


def test_fingerprint_covers_a_separate_tokenizer_folder_and_weight_names(tmp_path):
    model = write_model(tmp_path / "m")
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer_config.json").write_text("{}")
    alone, with_tokenizer = fingerprint(model), fingerprint(model, tokenizer)
    assert alone != with_tokenizer
    (tokenizer / "tokenizer_config.json").write_text('{"x": 1}')
    assert fingerprint(model, tokenizer) != with_tokenizer
    (model / "model.safetensors").rename(model / "model-00001-of-00001.safetensors")
    assert fingerprint(model) != alone


def big_sparse_safetensors(path: Path) -> int:
    """A sparse > 256 MiB safetensors file with a valid header; returns the header's end."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    subprocess.run(["truncate", "-s", str(BIG_BYTES), str(path)], check=True)
    return 8 + len(header)


def test_big_weights_hash_only_their_header(tmp_path):
    model = write_model(tmp_path / "m")
    (model / "model.safetensors").unlink()
    big = model / "model-00001-of-00002.safetensors"
    header_end = big_sparse_safetensors(big)
    started = time.monotonic()
    before = fingerprint(model)
    assert time.monotonic() - started < 2.0  # 300 MiB were not read
    flip_byte(big, 200 * 1024 * 1024)  # a weight byte past the header: not seen
    assert fingerprint(model) == before
    flip_byte(big, header_end - 3)  # inside the JSON header: seen
    with pytest.raises(ValueError, match="not a JSON object"):
        fingerprint(model)
    flip_byte(big, header_end - 3)
    assert fingerprint(model) == before
    subprocess.run(["truncate", "-s", str(BIG_BYTES + 4096), str(big)], check=True)
    assert fingerprint(model) != before  # the size is part of it


def test_a_model_without_safetensors_or_with_a_broken_header_cannot_be_fingerprinted(tmp_path):
    model = write_model(tmp_path / "m")
    (model / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="no \\*.safetensors"):
        fingerprint(model)
    big = model / "model.safetensors"
    big.write_bytes(struct.pack("<Q", BIG_BYTES))
    subprocess.run(["truncate", "-s", str(BIG_BYTES), str(big)], check=True)
    with pytest.raises(ValueError, match="impossible"):
        fingerprint(model)


@pytest.mark.parametrize(
    ("server_dtype", "config", "effective"),
    [
        ("float32", {"torch_dtype": "bfloat16"}, "float32"),
        ("float", {}, "float32"),
        ("half", {}, "float16"),
        ("auto", {"torch_dtype": "bfloat16"}, "bfloat16"),
        ("auto", {"dtype": "float16", "torch_dtype": "bfloat16"}, "float16"),
        ("auto", {"torch_dtype": "float32"}, "float16"),  # sglang downcasts fp32 on auto
        ("auto", {}, "float16"),
        ("auto", {"torch_dtype": "float32", "model_type": "gemma2"}, "bfloat16"),
        (None, {"torch_dtype": "float32"}, "float16"),
    ],
)
def test_effective_dtype_follows_sglang(server_dtype, config, effective):
    assert LOSSLESS.effective_dtype(server_dtype, config) == effective


def test_hub_ids_resolve_through_the_hf_cache(tmp_path, monkeypatch):
    snapshot = tmp_path / "hub" / "models--org--tiny" / "snapshots" / "abc123"
    write_model(snapshot)
    (tmp_path / "hub" / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--tiny" / "refs" / "main").write_text("abc123\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert LOSSLESS.resolve_model_dir("org/tiny") == str(snapshot)
    assert LOSSLESS.resolve_model_dir("org/absent") is None
    info = {"model_path": "org/tiny", "tokenizer_path": "org/tiny", "dtype": "float32"}
    found, dtype, folder, problem = LOSSLESS.identify_model(info)
    assert (found, dtype, folder, problem) == (fingerprint(snapshot), "float32", str(snapshot), "")


@pytest.mark.parametrize(
    ("expected", "got", "said"),
    [
        ([1, 2, 3], [1, 2, 3], None),
        ([1, 2, 3], [1, 9, 3], "first difference at token 1: expected 2, got 9"),
        ([1, 2, 3], [1, 2], "first difference at token 2: expected 3, got the end"),
        ([1, 2], [1, 2, 3], "first difference at token 2: expected the end, got 3"),
    ],
)
def test_describe_difference(expected, got, said):
    assert LOSSLESS.describe_difference(expected, got) == said


def test_a_long_detail_keeps_its_first_line():
    lines = ["first"] + [f"line {k} " + "x" * 200 for k in range(40)]
    kept = LOSSLESS.bounded(lines)
    assert kept.splitlines()[0] == "first" and len(kept) <= 1900
    assert kept.endswith("more lines")


def test_import_is_quiet_and_stdlib_only(tmp_path):
    """The host's python may have nothing but the standard library."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import _lossless; "
        "print(sorted(m.split('.')[0] for m in sys.modules "
        "if m.split('.')[0] not in sys.stdlib_module_names and m != '__main__'))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(Path(LOSSLESS.__file__).parent)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        check=True,
    )
    assert done.stdout == "['_lossless']\n" and not done.stderr
