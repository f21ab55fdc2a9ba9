"""tune --devices over GPUs of different models: one run stores its rows under one GPU name, so
such a list is refused in one line (the Dask path runs one sweep per model). No GPU needed."""
import pytest

from gemmlab.cli import main


@pytest.fixture
def gpus(monkeypatch):
    from gemmlab import envinfo
    from gemmlab.cuda import device
    from gemmlab.tune import tuner

    names = {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3", 2: "NVIDIA H200"}
    seen = {}

    def fake_tune(spec, problem, strategy, options, arch, *args, **kwargs):
        seen["devices"] = options.devices
        return tuner.TuneSummary()

    monkeypatch.setattr(device, "device", lambda index=0: None)
    monkeypatch.setattr(envinfo, "gpu_count", lambda: 3)
    monkeypatch.setattr(envinfo, "collect_env", lambda index=0: {"gpu": {"name": names[index],
                                                                          "compute_capability": "sm_90"}})
    monkeypatch.setattr(tuner, "tune", fake_tune)
    return seen


def test_devices_of_one_model_run_together(capsys, tmp_path, gpus):
    assert main(["tune", "--impl", "naive", "--devices", "0,1", "--db", str(tmp_path / "r.db")]) == 0
    assert gpus["devices"] == [0, 1]


def test_devices_of_different_models_are_refused_in_one_line(capsys, tmp_path, gpus):
    db = tmp_path / "r.db"
    assert main(["tune", "--impl", "naive", "--devices", "0,2", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "different models (0: NVIDIA H100 80GB HBM3, 2: NVIDIA H200)" in err and len(err.strip().splitlines()) == 1
    assert "devices" not in gpus and not db.exists(), "refused before a run is stored"
