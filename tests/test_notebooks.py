"""Every notebook runs top to bottom in a real Jupyter kernel (nbclient + ipykernel), on a small
store made here: the golden store for the figure notebooks, a real smoke sweep for the
quickstart."""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="needs nbformat (pip install nbclient ipykernel)")
nbclient = pytest.importorskip("nbclient", reason="needs nbclient (pip install nbclient ipykernel)")
pytest.importorskip("ipykernel", reason="needs ipykernel for a Python kernel")

from data import golden  # noqa: E402  (tests/data, on sys.path through setup.cfg's pythonpath)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def golden_store(tmp_path_factory):
    from paradnn.store import Store

    path = tmp_path_factory.mktemp("nbstore") / "golden.db"
    with Store(path) as s:
        s.add_rows(golden.make_frame().to_dict("records"))
    return path


def test_every_figure_group_has_a_notebook():
    names = {p.name for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "fig01_11_sizes_utilization.ipynb", "fig02_07_heatmaps_sensitivity.ipynb",
            "fig03_roofline.ipynb", "fig08_12_speedup.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, golden_store, tmp_path, monkeypatch):
    monkeypatch.setenv("PARADNN_STORE", str(golden_store))
    monkeypatch.setenv("PARADNN_QUICKSTART_STORE", str(tmp_path / "quickstart.db"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, "every notebook shows at least one figure"
    if path.name == "quickstart.ipynb":
        assert (tmp_path / "quickstart.db").exists()
        assert (tmp_path / "quickstart-report" / "index.html").exists()
