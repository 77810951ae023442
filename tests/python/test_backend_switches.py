"""torch_npu's backend switches on torch.npu: the HF32 switches (matmul, conv,
aclnn), the scaled-dot-product-attention flags, preferred_linalg_library and
the deterministic-region markers.
"""

import warnings

import pytest
import torch
import torch_npu

ONLY_SETS = "only sets the global variable"


@pytest.fixture(autouse=True)
def _restore_switches():
    hf32 = (torch.npu.matmul.allow_hf32, torch.npu.conv.allow_hf32)
    sdp = (torch._C._get_flash_sdp_enabled(), torch._C._get_mem_efficient_sdp_enabled(),
           torch._C._get_math_sdp_enabled())
    deterministic = torch.are_deterministic_algorithms_enabled()
    yield
    torch.npu.matmul.allow_hf32, torch.npu.conv.allow_hf32 = hf32
    torch._C._set_sdp_use_flash(sdp[0])
    torch._C._set_sdp_use_mem_efficient(sdp[1])
    torch._C._set_sdp_use_math(sdp[2])
    torch.use_deterministic_algorithms(deterministic)


def test_hf32_defaults_and_the_shared_conv_switch():
    assert torch.npu.matmul.allow_hf32 is False
    assert torch.npu.conv.allow_hf32 is True
    assert torch.npu.aclnn.allow_hf32 is True
    torch.npu.conv.allow_hf32 = False
    assert torch.npu.aclnn.allow_hf32 is False  # one switch, two names
    torch.npu.aclnn.allow_hf32 = True
    assert torch.npu.conv.allow_hf32 is True
    torch.npu.matmul.allow_hf32 = True
    assert torch.npu.matmul.allow_hf32 is True and torch.npu.conv.allow_hf32 is True


def test_aclnn_flags_restore_the_previous_value_even_after_an_error():
    torch.npu.conv.allow_hf32 = True
    with torch.npu.aclnn.flags(allow_hf32=False):
        assert torch.npu.conv.allow_hf32 is False
    assert torch.npu.conv.allow_hf32 is True
    with pytest.raises(ValueError, match="inside"):
        with torch.npu.aclnn.flags(allow_hf32=False):
            raise ValueError("inside")
    assert torch.npu.aclnn.allow_hf32 is True
    assert torch.npu.aclnn.set_flags(False) == (True,)
    assert torch.npu.aclnn.set_flags(None) == (False,)  # None leaves it alone


@pytest.mark.parametrize("target", ["matmul", "conv", "aclnn"])
@pytest.mark.parametrize("value", [1, "True", None])
def test_hf32_switches_take_only_bools(target, value):
    switch = getattr(torch.npu, target)
    before = switch.allow_hf32
    with pytest.raises(TypeError, match=f"allow_hf32 must be a bool, but got {type(value).__name__}"):
        switch.allow_hf32 = value
    assert switch.allow_hf32 is before


@pytest.mark.parametrize("allow", [False, True])
def test_float32_matmul_and_conv_are_full_precision_whatever_the_switch(allow):
    # allow_hf32 permits reduced precision; the simulator computes float32
    # exactly as CPU does (Note [HF32 switches]).
    torch.npu.matmul.allow_hf32 = allow
    torch.npu.conv.allow_hf32 = allow
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    assert torch.equal((a.npu() @ b.npu()).cpu(), a @ b)
    x, w = torch.randn(1, 3, 16, 16), torch.randn(4, 3, 3, 3)
    assert torch.equal(torch.conv2d(x.npu(), w.npu()).cpu(), torch.conv2d(x, w))


def test_sdp_flags_are_pytorchs_process_wide_flags_and_warn():
    for enable, enabled, getter in (
        (torch.npu.enable_flash_sdp, torch.npu.flash_sdp_enabled, torch._C._get_flash_sdp_enabled),
        (torch.npu.enable_mem_efficient_sdp, torch.npu.mem_efficient_sdp_enabled,
         torch._C._get_mem_efficient_sdp_enabled),
        (torch.npu.enable_math_sdp, torch.npu.math_sdp_enabled, torch._C._get_math_sdp_enabled),
    ):
        for value in (False, True):
            with pytest.warns(UserWarning, match=ONLY_SETS):
                enable(value)
            assert getter() is value
            with pytest.warns(UserWarning, match=ONLY_SETS):
                assert enabled() is value
        with pytest.raises(TypeError, match="enabled must be a bool, but got int"):
            enable(1)


def test_sdp_kernel_sets_the_flags_for_its_block_and_restores_them():
    torch._C._set_sdp_use_flash(True)
    torch._C._set_sdp_use_math(True)
    with pytest.warns(UserWarning, match=ONLY_SETS):
        with torch.npu.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False):
            assert not torch._C._get_flash_sdp_enabled()
            assert not torch._C._get_mem_efficient_sdp_enabled()
            assert torch._C._get_math_sdp_enabled()
    assert torch._C._get_flash_sdp_enabled() and torch._C._get_math_sdp_enabled()
    with pytest.raises(TypeError, match="enable_flash must be a bool"):
        with torch.npu.sdp_kernel(enable_flash="no"):
            pass


def test_attention_on_npu_runs_whatever_the_flags_say():
    q = torch.randn(2, 4, 8, 16)
    reference = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.npu.sdp_kernel(enable_flash=False, enable_math=False, enable_mem_efficient=False):
            out = torch.nn.functional.scaled_dot_product_attention(q.npu(), q.npu(), q.npu())
    torch.testing.assert_close(out.cpu(), reference)


def test_preferred_linalg_library_has_nothing_to_choose():
    for backend in (None, "cusolver", torch._C._LinalgBackend.Magma):
        with pytest.warns(UserWarning, match="preferred_linalg_library isn't implemented"):
            assert torch.npu.preferred_linalg_library(backend) == torch._C._LinalgBackend.Default


@pytest.mark.parametrize("start", [False, True])
def test_deterministic_markers_switch_forward_and_mirror_in_backward(start):
    torch.use_deterministic_algorithms(start)
    seen = []

    def record(grad):
        seen.append(torch.are_deterministic_algorithms_enabled())
        return grad

    x = torch.ones(2, 2, device="npu", requires_grad=True)
    y = torch.npu.enable_deterministic_with_backward(x * 2)
    assert torch.are_deterministic_algorithms_enabled()
    y.register_hook(record)  # runs before the marker's backward
    z = torch.npu.disable_deterministic_with_backward(y + 1)
    assert not torch.are_deterministic_algorithms_enabled()
    z.register_hook(record)
    z.sum().backward()
    # Backward meets the markers in reverse: the disable marker turns it on,
    # the enable marker off again.
    assert seen == [False, True]
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.equal(x.grad.cpu(), torch.full((2, 2), 2.0))


def test_deterministic_markers_cannot_be_compiled():
    def f(x):
        return torch.npu.enable_deterministic_with_backward(x) + 1

    with pytest.raises(Exception, match="forbidden|not allowed|forbid"):
        torch.compile(f, backend="eager", fullgraph=True)(torch.ones(2, device="npu"))
