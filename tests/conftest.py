"Shared pytest fixtures."
import pytest

@pytest.fixture(scope="module")
def models_dir_in_tmp(tmp_path_factory):
    "Keep the model-file hash memo (file_hashes.json under $PACE_MODELS) out of the home directory."
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PACE_MODELS", str(tmp_path_factory.mktemp("models")))
        yield
