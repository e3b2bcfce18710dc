"""kiln.torch: torch modules compiled (forward, tensors in and out without copies) and trained
(BatchNorm in training mode, running statistics written back) by kiln, against PyTorch."""
import copy

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
pytest.importorskip("onnx")
import kiln.torch  # noqa: E402  (needs torch)

nn = torch.nn


def small_resnet():
    """ResNet-18's parts, small: a strided 7x7 conv, BatchNorm, max pool, a basic block and a
    downsampling one, global average pool, a linear head."""
    from torchvision.models.resnet import BasicBlock

    torch.manual_seed(0)
    downsample = nn.Sequential(nn.Conv2d(8, 16, 1, 2, bias=False), nn.BatchNorm2d(16))
    return nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         BasicBlock(8, 8), BasicBlock(8, 16, 2, downsample), nn.AdaptiveAvgPool2d((1, 1)),
                         nn.Flatten(), nn.Linear(16, 10))


def batches(count, shape, classes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [(torch.randn(shape, generator=generator), torch.randint(0, classes, (shape[0],), generator=generator))
            for _ in range(count)]


def torch_train(module, data, lr, loss_kind="cross_entropy"):
    module.train()
    optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    losses = []
    for x, y in data:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(module(x), y) if loss_kind == "cross_entropy" else module(x).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def check_trained_like_torch(module, data, lr, loss_kind="cross_entropy", loss_rtol=1e-4, stats_tolerance=1e-3,
                             on_reference=False):
    reference = copy.deepcopy(module)
    loss = nn.CrossEntropyLoss() if loss_kind == "cross_entropy" else loss_kind
    got = kiln.torch.train(module, loss, kiln.optim.SGD(lr), [(x, y if loss_kind == "cross_entropy" else None)
                                                              for x, y in data], threads=2, reference=on_reference)
    want = torch_train(reference, data, lr, loss_kind)
    np.testing.assert_allclose(got, want, rtol=loss_rtol)
    trained, expected = module.state_dict(), reference.state_dict()
    for name, value in expected.items():
        if "running" in name:
            np.testing.assert_allclose(trained[name].numpy(), value.numpy(), rtol=stats_tolerance,
                                       atol=stats_tolerance, err_msg=name)
        elif name.endswith("num_batches_tracked"):
            assert int(trained[name]) == int(value) == len(data), name
        else:
            scale = float(value.abs().max())
            np.testing.assert_allclose(trained[name].numpy(), value.numpy(), atol=1e-4 * scale, err_msg=name)


def test_compiled_forward_matches_torch_without_copies():
    module = small_resnet().eval()
    x = torch.randn(2, 3, 32, 32)
    compiled = kiln.torch.compile(module, (x,), threads=2)
    with torch.no_grad():
        want = module(x)
    got = compiled(x)
    assert isinstance(got, torch.Tensor) and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)

    # The input is read in place: the array kiln binds is the tensor's own buffer.
    assert compiled.session._bound_input_addresses({"input0": x.numpy()})[0] == x.data_ptr()
    x.mul_(2)  # mutate and rerun: the new values are what kiln reads
    with torch.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), module(x).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="shape"):
        compiled(torch.randn(1, 3, 32, 32))


def test_untraceable_module_is_a_kiln_error_naming_it():
    class Sorts(nn.Module):
        def forward(self, x):
            return torch.fft.fft(x).real  # no ONNX export for aten::fft_fft

    with pytest.raises(kiln.Error, match=r"Sorts.*fft"):
        kiln.torch.compile(Sorts(), (torch.randn(4, 8),))
    with pytest.raises(TypeError, match="CrossEntropyLoss"):
        kiln.torch.train(small_resnet(), nn.KLDivLoss(), kiln.optim.SGD(0.1), batches(1, (2, 3, 32, 32), 10))


def test_small_resnet_trains_like_torch():
    """Five SGD steps in training mode: PyTorch's losses, parameters and BatchNorm running
    statistics (torch's momentum blend of the unbiased batch variance)."""
    check_trained_like_torch(small_resnet(), batches(5, (4, 3, 32, 32), 10), lr=0.1)


def test_frozen_parameters_stay_and_torch_optimizers_are_read():
    module = small_resnet()
    for parameter in module[0].parameters():
        parameter.requires_grad = False
    frozen = module[0].weight.detach().clone()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    trainer = kiln.torch.Trainer(module, nn.functional.cross_entropy, optimizer, torch.randn(4, 3, 32, 32), threads=2)
    assert "0.weight" not in trainer.step.trained_parameters
    assert "8.weight.momentum_buffer" in trainer.step.optimizer_state
    for x, y in batches(2, (4, 3, 32, 32), 10):
        trainer.step_on(x, y)
    trainer.write_back()
    assert torch.equal(module[0].weight, frozen)
    assert int(module[1].num_batches_tracked) == 2


# ResNet-18 in training mode on batches of 2 3x64x64 images, five SGD steps. The loss is the
# output's mean (as the C++ checks train): a cross-entropy over 1000 classes on random weights
# is so ill-conditioned here that PyTorch's own float32 losses leave its float64 ones by 5e-3
# within five steps (1e-6 with the mean).
RESNET18_RUN = dict(data=batches(5, (2, 3, 64, 64), 1000), lr=0.01, loss_kind="mean")


def test_resnet18_trains_like_torch():
    """kiln.torch's whole route (export, import, running statistics written as torch writes
    them, write-back) on kiln's reference backend: PyTorch's losses within 1e-4 and its
    running statistics within 1e-3 (measured: 3e-6 and 2e-6)."""
    torch.manual_seed(0)
    check_trained_like_torch(torchvision.models.resnet18(weights=None), on_reference=True, **RESNET18_RUN)


def test_resnet18_compiled_trains_like_torch():
    """The same on the compiled step, whose convolutions are exact sums of products in training
    (no Winograd: its rounding had layer4's gradients up to 6% off and step 5's loss 7e-3)."""
    torch.manual_seed(0)
    check_trained_like_torch(torchvision.models.resnet18(weights=None), **RESNET18_RUN)


def test_resnet18_compiled_gradients_are_the_reference_backends():
    """One cross-entropy SGD step (lr 1: the update is the gradient) compiled and on the
    reference backend, from the same weights: the same update within 1e-4 of each tensor's."""
    torch.manual_seed(0)
    module = torchvision.models.resnet18(weights=None)
    (x, y), = batches(1, (4, 3, 64, 64), 1000)
    updates = []
    for on_reference in (False, True):
        trainer = kiln.torch.Trainer(module, nn.CrossEntropyLoss(), kiln.optim.SGD(1.0), x, threads=2,
                                     reference=on_reference)
        before = {name: value.copy() for name, value in trainer.step.parameters.items()}
        trainer.step_on(x, y)
        updates.append({name: trainer.step[name] - before[name] for name in trainer.step.trained_parameters})
    compiled, reference = updates
    for name, want in reference.items():
        np.testing.assert_allclose(compiled[name], want, rtol=0, atol=1e-4 * np.abs(want).max(), err_msg=name)
