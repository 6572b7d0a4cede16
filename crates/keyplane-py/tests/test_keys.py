"""keyplane.keys encodes keys exactly as the CLI's --key-format does."""

import os
import pathlib
import subprocess

import pytest

import keyplane
from keyplane import keys


def test_encodings_match_the_rust_key_module():
    assert keys.ipv4("10.0.0.2") == bytes([10, 0, 0, 2])
    assert keys.ipv6("fd00::1") == bytes([0xFD] + [0] * 14 + [1])
    assert keys.mac("00:1b:44:11:3a:b7") == bytes([0, 0x1B, 0x44, 0x11, 0x3A, 0xB7])
    assert keys.mac("00-1b-44-11-3a-b7") == keys.mac("00:1b:44:11:3a:b7")
    assert keys.u64("258") == keys.u64(258) == (258).to_bytes(8, "little")
    assert keys.u64("0x102") == keys.u64(258)
    assert keys.hex("0a0B") == b"\n\x0b"
    assert keys.name("www.Example.com") == b"/com/example/www"
    assert keys.name("/com/example/www") == b"/com/example/www"
    assert keys.fivetuple("10.0.0.1", "10.0.0.2", 1234, 80, 6) == bytes(
        [10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xD2, 0, 80, 6]
    )
    assert len(keys.fivetuple("10.0.0.1", "fd00::2", 1, 2, 17)) == 37
    assert keys.parse("ipv4", "1.2.3.4") == b"\x01\x02\x03\x04"
    for bad in [lambda: keys.ipv4("10.0.0"), lambda: keys.mac("00:1b"), lambda: keys.hex("abc"),
                lambda: keys.u64("-1"), lambda: keys.parse("nope", "x"), lambda: keys.name("a/" + "x" * 300)]:
        with pytest.raises(ValueError):
            bad()


def _cli():
    root = pathlib.Path(__file__).resolve().parents[3]
    for p in [os.environ.get("KEYPLANE_BIN", ""), root / "target/debug/keyplane", root / "target/release/keyplane"]:
        if p and pathlib.Path(p).is_file():
            return str(p)
    return None


def test_python_finds_keys_of_a_table_built_by_the_cli(tmp_path):
    cli = _cli()
    if cli is None:
        pytest.skip("the keyplane binary is not built (cargo build -p keyplane-cli)")
    (tmp_path / "routes.tsv").write_text("10.0.0.1\t5\n10.0.0.2\t7\n")
    subprocess.run([cli, "build", "-i", "routes.tsv", "--key-format", "ipv4", "-O", "filtered=8",
                    "--out", "fib.kpl"], cwd=tmp_path, check=True, capture_output=True)
    lookup = keyplane.Lookup.from_bytes((tmp_path / "fib.kpl").read_bytes())
    assert lookup.get(keys.ipv4("10.0.0.2")) == 7
    assert lookup.get(keys.ipv4("10.0.0.1")) == 5
    # Python-built table, CLI query with the same key format.
    t = keyplane.Table.build([keys.ipv4("10.1.0.1")], [9], value_bits=8, filtered=8)
    (tmp_path / "py.kpl").write_bytes(t.export().to_bytes())
    out = subprocess.run([cli, "query", "py.kpl", "--key-format", "ipv4", "--values-only"], cwd=tmp_path,
                         input=b"10.1.0.1\n", check=True, capture_output=True).stdout
    assert out == b"9\n"
