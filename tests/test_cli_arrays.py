"""The array files of `coopnn run`: what is read, what is refused and why, and what is written."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.cli_arrays import match_inputs, output_file, read_inputs
from coopnn.errors import CoopnnError, InputError


@pytest.mark.parametrize("write", [
    lambda p: p.write_bytes(b""),
    lambda p: p.write_bytes(b"garbage bytes, no header"),
    lambda p: p.write_bytes(np.lib.format.MAGIC_PREFIX + b"\x01\x00truncated"),
    lambda p: np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True),
], ids=["empty", "garbage", "truncated", "object_array"])
def test_a_file_that_is_not_one_of_numbers_is_an_input_error_naming_it(tmp_path, write):
    write(tmp_path / "x.npy")
    with pytest.raises(InputError, match="x.npy.*object arrays and pickled data are not accepted") as error:
        read_inputs(str(tmp_path / "x.npy"))
    assert "allow_pickle" not in str(error.value)


def test_an_npz_with_an_object_array_or_no_zip_is_refused(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.array([{"a": 1}], dtype=object))
    (tmp_path / "b.npz").write_bytes(b"PK\x03\x04 not a zip")
    for name in ("a.npz", "b.npz"):
        with pytest.raises(InputError, match=f"{name}.*not accepted"):
            read_inputs(str(tmp_path / name))


def test_an_npz_array_is_picked_by_name(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=np.zeros((2, 3)), b=np.ones((2, 3)))
    np.testing.assert_array_equal(read_inputs(f"{path}:b"), np.ones((2, 3)))
    with pytest.raises(InputError, match="has no array 'c'; its arrays: a, b"):
        read_inputs(f"{path}:c")
    np.save(tmp_path / "y.npy", np.zeros(2))
    with pytest.raises(InputError, match="only an .npz file has arrays to name"):
        read_inputs(f"{tmp_path / 'y.npy'}:a")


def test_a_file_whose_name_holds_a_colon_is_read_whole(tmp_path):
    np.save(tmp_path / "x:1.npy", np.arange(3.0))
    np.testing.assert_array_equal(read_inputs(str(tmp_path / "x:1.npy")), np.arange(3.0))


def test_an_npz_of_several_arrays_for_one_input_asks_which():
    arrays = {"a": np.zeros(2), "b": np.ones(2)}
    with pytest.raises(InputError, match=r"holds arrays a, b; the model's inputs are x: name one with --input "
                                         r"f.npz:NAME"):
        match_inputs(arrays, ["x"], "f.npz")
    np.testing.assert_array_equal(match_inputs({"a": np.ones(2)}, ["x"], "f.npz"), np.ones(2))
    assert match_inputs(arrays, ["b", "a"], "f.npz") is arrays
    with pytest.raises(InputError, match="key the .npz by input name"):
        match_inputs(arrays, ["x", "y"], "f.npz")
    with pytest.raises(InputError, match="several inputs"):
        match_inputs(np.zeros(2), ["x", "y"], "f.npy")


def test_text_holds_rows_of_at_most_two_dimensions(tmp_path):
    with output_file(str(tmp_path / "y.csv"), 3, {"only": (2,)}, {"only": np.float32}) as out:
        out.write(0, {"only": np.arange(6.0).reshape(3, 2)})
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "y.csv", delimiter=","), np.arange(6.0).reshape(3, 2))
    with pytest.raises(CoopnnError, match=r"shape \[2, 2, 2\] as rows of text"):
        with output_file(str(tmp_path / "z.txt"), 2, {"output": (2, 2)}, {"output": np.float32}):
            pytest.fail("a text file of three dimensions was opened")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.csv"]


def test_an_npy_input_is_mapped_and_untrusted_ones_are_still_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(12, dtype=np.float32).reshape(4, 3))
    mapped = read_inputs(str(tmp_path / "x.npy"), mapped=True)
    assert isinstance(mapped, np.memmap) and not mapped.flags.writeable
    np.testing.assert_array_equal(mapped, np.arange(12).reshape(4, 3))
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="o.npy.*pickled data are not accepted"):
        read_inputs(str(tmp_path / "o.npy"), mapped=True)


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".txt", ".csv"])
def test_outputs_written_in_chunks_read_back_whole(tmp_path, suffix):
    several = suffix == ".npz"
    values = {"a": np.arange(30, dtype=np.float32).reshape(10, 3), "b": np.arange(10) % 3 == 0}
    keys = ["a", "b"] if several else ["a"]
    with output_file(str(tmp_path / f"y{suffix}"), 10, {k: values[k].shape[1:] for k in keys},
                     {k: values[k].dtype for k in keys}) as out:
        for start in (0, 4, 8):
            out.write(start, {k: values[k][start:start + 4] for k in keys})
    path = tmp_path / f"y{suffix}"
    if suffix == ".npz":
        with np.load(path) as read:
            assert sorted(read.files) == ["a", "b"]
            for k in keys:
                np.testing.assert_array_equal(read[k], values[k])
                assert read[k].dtype == values[k].dtype
    elif suffix == ".npy":
        np.testing.assert_array_equal(np.load(path), values["a"])
    else:
        np.testing.assert_array_equal(np.loadtxt(path, delimiter="," if suffix == ".csv" else None), values["a"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".txt"])
def test_a_failed_run_leaves_the_older_output_and_nothing_else(tmp_path, suffix):
    path = tmp_path / f"y{suffix}"
    path.write_bytes(b"older")
    with pytest.raises(RuntimeError, match="the model failed"):
        with output_file(str(path), 8, {"a": (3,)}, {"a": np.float32}) as out:
            out.write(0, {"a": np.ones((4, 3), np.float32)})
            raise RuntimeError("the model failed")
    assert path.read_bytes() == b"older" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_several_outputs_need_an_npz(tmp_path):
    with pytest.raises(CoopnnError, match=r"several outputs \(a, b\): write them to an .npz file"):
        with output_file(str(tmp_path / "y.npy"), 1, {"a": (1,), "b": (1,)}, {"a": np.float32, "b": np.float32}):
            pytest.fail("opened")
    assert not list(tmp_path.iterdir())
