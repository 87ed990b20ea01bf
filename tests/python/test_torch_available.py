"""The oracle needs PyTorch 2.13.0: without it this test fails (it never skips)."""


def test_torch_is_importable_and_pinned():
    import torch  # an ImportError here fails the suite
    assert torch.__version__.split("+")[0] == "2.13.0", (
        f"the oracle is written against torch 2.13.0, found {torch.__version__}")
