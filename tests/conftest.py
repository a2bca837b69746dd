import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


@pytest.fixture(scope="session")
def copy_model():
    from helpers import train_copy_model

    return train_copy_model()
