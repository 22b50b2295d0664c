"""Grids: Table 2 as data, product/zip/filter, presets, and YAML sweep files with clear errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from paradnn import FC, ParadnnError, SpecError, Workload
from paradnn.grids import (PAPER, PAPER_FIXED, concat, geometric, grid, linear, load_sweep_file,
                           max_params, param_count, preset, zipped)
from paradnn.units import parse_bytes

SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"


def test_paper_table2_ranges():
    # The ParaDnn paper, Table 2; inclusive bounds, x2 / +N steps.
    assert PAPER["fc"]["layers"] == [4, 8, 16, 32, 64, 128]
    assert PAPER["fc"]["nodes"][0] == 32 and PAPER["fc"]["nodes"][-1] == 8192
    assert len(PAPER["fc"]["nodes"]) == 9
    assert PAPER["fc"]["input"] == [2000, 4000, 6000, 8000]
    assert PAPER["fc"]["output"] == [200, 400, 600, 800, 1000]
    assert PAPER["fc"]["batch"] == [64 * 2**i for i in range(9)]
    assert PAPER["cnn"]["blocks"] == list(range(1, 9))
    assert PAPER["cnn"]["filters"] == [16, 32, 64]
    assert PAPER["cnn"]["image"] == [200, 250, 300]
    assert PAPER["cnn"]["output"] == [500, 1000, 1500]
    assert PAPER["cnn"]["batch"] == [64, 128, 256, 512, 1024]
    assert PAPER["rnn"]["layers"] == [1, 5, 9, 13]
    assert PAPER["rnn"]["embed"] == [100, 500, 900]
    assert PAPER["rnn"]["length"] == [10, 50, 90]
    assert PAPER["rnn"]["vocab"] == [2, 8, 32, 128, 512]
    assert PAPER["rnn"]["batch"] == [16, 64, 256, 1024]
    assert set(PAPER["rnn"]["cell"]) == {"rnn", "lstm", "gru"}
    assert PAPER_FIXED["fc"] == {"layers": 32, "input": 2000, "output": 1000}


def test_paper_preset_sizes():
    assert len(preset("paper", "fc")) == 6 * 9 * 4 * 5 * 9
    assert len(preset("paper", "cnn")) == 2 * 8 * 3 * 3 * 3 * 5
    assert len(preset("paper", "rnn")) == 3 * 4 * 3 * 3 * 5 * 4
    smoke = preset("smoke")
    assert {w.family for w in smoke} == {"fc", "cnn", "rnn", "transformer"}
    assert all(param_count(w) < 100_000 for w in smoke)


def test_grid_product_order_and_axes():
    g = grid("fc", layers=[2, 4], nodes=range(32, 97, 32), input=64, output=10,
             batch=8, dtype=["float32", "bfloat16"], optimizer="sgd")
    assert len(g) == 2 * 3 * 2
    assert all(isinstance(w, Workload) for w in g)
    # Last axis varies fastest, like nested loops in the order given.
    assert [(w.spec.layers, w.spec.nodes, w.dtype) for w in g[:3]] == [
        (2, 32, "float32"), (2, 32, "bfloat16"), (2, 64, "float32")]
    assert {w.optimizer for w in g} == {"sgd"}
    assert g[0].spec == FC(layers=2, nodes=32, input=64, output=10)


def test_grid_zip_and_duplicates():
    g = grid("fc", zipped(nodes=[32, 64, 128], batch=[8, 16, 32]), layers=[2, 3], input=64,
             output=10)
    assert len(g) == 6
    assert {(w.spec.nodes, w.batch) for w in g} == {(32, 8), (64, 16), (128, 32)}
    # The same point twice is one workload.
    assert len(grid("fc", layers=[2, 2], nodes=32, input=64, output=10, batch=8)) == 1
    assert len(concat(g, g[:2])) == 6


def test_grid_errors_name_the_axis():
    with pytest.raises(SpecError, match="nodes"):
        grid("fc", layers=2, input=64, output=10, batch=8)  # missing axis
    with pytest.raises(SpecError, match="nodez"):
        grid("fc", layers=2, nodez=32, nodes=32, input=64, output=10, batch=8)
    with pytest.raises(SpecError, match="nodes=-1"):
        grid("fc", layers=2, nodes=[32, -1], input=64, output=10, batch=8)
    with pytest.raises(SpecError, match="equal length"):
        zipped(nodes=[32, 64], batch=[8])
    with pytest.raises(SpecError, match="family"):
        grid("mlp", layers=2)
    with pytest.raises(SpecError, match="a value, a list or a range"):
        grid("fc", layers={2, 4}, nodes=32, input=64, output=10, batch=8)


def test_ranges():
    assert geometric(4, 128, 2) == [4, 8, 16, 32, 64, 128]
    assert geometric(2, 1024, 4) == [2, 8, 32, 128, 512]
    assert linear(200, 1000, 200) == [200, 400, 600, 800, 1000]
    with pytest.raises(SpecError):
        geometric(4, 128, 1)


def test_param_count_and_filter():
    # FC weights + biases: 64*32+32 + (2-1)*(32*32+32) + 32*10+10 = 3466
    assert param_count(FC(layers=2, nodes=32, input=64, output=10)) == 3466
    g = grid("fc", layers=[2, 4], nodes=[32, 64, 128], input=64, output=10, batch=8)
    kept = max_params(g, 10_000)
    assert all(param_count(w) <= 10_000 for w in kept)
    assert len(kept) == 3 and len(g) == 6
    # Other families count through paradnn.backends.jax.models.param_count.
    rnn = grid("rnn", cell="lstm", layers=1, embed=16, length=4, vocab=32, batch=4)[0]
    assert param_count(rnn) > 16 * 32


def test_parse_bytes():
    assert parse_bytes("2GB") == 2 * 10**9
    assert parse_bytes("512MiB") == 512 * 2**20
    assert parse_bytes(1000) == 1000
    for bad in ("2 parsecs", "-1GB", 0, True, "GB"):
        with pytest.raises(SpecError, match="memory limit"):
            parse_bytes(bad)


# -- sweep files -----------------------------------------------------------------------------

def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_shipped_sweep_files_load():
    sizes = {name: len(load_sweep_file(SWEEPS / f"{name}.yaml").workloads)
             for name in ("smoke", "small", "fc", "cnn", "rnn")}
    assert sizes["smoke"] == 5
    assert sizes["fc"] == 9720 * 2 and sizes["cnn"] == 2160 * 2 and sizes["rnn"] == 2160 * 2
    smoke = load_sweep_file(SWEEPS / "smoke.yaml")
    assert smoke.settings["steps_per_call"] == 2


def test_sweep_file_axes_ranges_zip_filter(tmp_path):
    p = write(tmp_path, """
        family: fc
        fixed: {input: 64, output: 10}
        axes:
          layers: {from: 2, to: 8, times: 2}
        zip:
          - {nodes: [32, 64], batch: [8, 16]}
        dtypes: [float32, bfloat16]
        max_params: 20000
        settings: {steps_per_call: 2}
        run: {repeat: 2, memory_limit: 2GB, executor: inprocess}
        """)
    plan = load_sweep_file(p)
    expected = max_params(grid("fc", zipped(nodes=[32, 64], batch=[8, 16]), input=64, output=10,
                               layers=[2, 4, 8], dtype=["float32", "bfloat16"]), 20000)
    assert {w.key for w in plan.workloads} == {w.key for w in expected}
    assert 0 < len(plan.workloads) < 12
    assert plan.run == {"repeat": 2, "memory_limit": "2GB", "executor": "inprocess"}


def test_sweep_file_top_level_axes(tmp_path):
    p = write(tmp_path, """
        family: rnn
        cell: [rnn, gru]
        layers: 1
        embed: 16
        length: 4
        vocab: 32
        batch: [4, 8]
        """)
    assert len(load_sweep_file(p).workloads) == 4


@pytest.mark.parametrize("text, key, reason", [
    ("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\nnodez: 3\n",
     "nodez", "unknown key"),
    ("family: fc\nlayers: 2\nnodes: [32, -4]\ninput: 64\noutput: 10\nbatch: 8\n",
     "nodes", "positive integer"),
    ("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\nrun: {timeout: 3}\n",
     "run.timeout", "unknown key"),
    ("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n"
     "run: {executor: slurm}\n", "run.executor", "process, inprocess or ray"),
    ("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n"
     "settings: {steps: 3}\n", "settings.steps", "unknown key"),
    ("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n"
     "settings: {min_calls: 0}\n", "settings.min_calls", "an integer from 6"),
    ("family: fc\nlayers: 2\nnodes: {from: 32, to: 64}\ninput: 64\noutput: 10\nbatch: 8\n",
     "nodes", "exactly one of times, step"),
    ("family: fc\nfixed: {layers: [2, 4]}\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n",
     "fixed.layers", "single values"),
    ("family: fc\nlayers: 2\nnodes: 32\ninput: 64\noutput: 10\n", "batch", "required"),
    ("family: fc\nfixed: {layers: 2}\nlayers: 3\nnodes: 32\ninput: 64\noutput: 10\nbatch: 8\n",
     "layers", "already set by 'fixed.layers'"),
    ("family: gan\n", "family", "not one of"),
    ("layers: 2\n", "family", "required"),
    ("family: fc\nlayers: 2\nnodes: []\ninput: 64\noutput: 10\nbatch: 8\n", "nodes",
     "empty list"),
    ("parts:\n  - family: fc\n    layers: 2\n    nodes: 32\n    input: 64\n    output: 10\n"
     "    batch: 8\n    run: {repeat: 2}\n", "parts[0].run", "top level"),
])
def test_bad_sweep_files_name_file_key_reason(tmp_path, text, key, reason):
    p = write(tmp_path, text)
    with pytest.raises(ParadnnError) as info:
        load_sweep_file(p)
    message = str(info.value)
    assert str(p) in message
    assert f"key '{key}'" in message
    assert reason in message


def test_malformed_yaml_and_wrong_top_level(tmp_path):
    p = write(tmp_path, "family: fc\naxes: {layers: [2, 4}\n")
    with pytest.raises(ParadnnError, match=r"s\.yaml: not valid YAML at line 2"):
        load_sweep_file(p)
    p = write(tmp_path, "- fc\n- cnn\n")
    with pytest.raises(ParadnnError, match="top level must be a mapping"):
        load_sweep_file(p)
    with pytest.raises(ParadnnError, match="no such file"):
        load_sweep_file(tmp_path / "missing.yaml")
