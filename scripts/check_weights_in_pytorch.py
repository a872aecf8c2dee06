#!/usr/bin/python3
"""Loads a dtrain checkpoint's model.safetensors into the same network built
in PyTorch and evaluates it on the Fashion-MNIST test split, to check that the
weights dtrain saves mean in PyTorch what they mean in dtrain (names, layouts,
flatten order). Compare its accuracy with `dtrain eval CHECKPOINT --json`.

    scripts/check_weights_in_pytorch.py {mlp|cnn} RUN_DIR/checkpoints/latest
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_safetensors import read  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench"))
from pytorch_peer import build, find, read_idx  # noqa: E402


def main(argv):
    if len(argv) != 3 or argv[1] not in ("mlp", "cnn"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    _, tensors, _ = read(os.path.join(argv[2], "model.safetensors"))
    weights = {name: torch.from_numpy(t.copy()) for name, t in tensors}
    net = build(argv[1])
    # dtrain's layer names in the order PyTorch's Sequential holds them.
    names = ["fc1", "fc2", "fc3"] if argv[1] == "mlp" else ["conv1", "conv2", "fc1", "fc2"]
    layers = [m for m in net if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))]
    for module, name in zip(layers, names):
        module.weight.data.copy_(weights[name + ".weight"])
        module.bias.data.copy_(weights[name + ".bias"])
    data = "/usr/share/datasets/fashion-mnist"
    x = torch.from_numpy(read_idx(find(data, "t10k-images-idx3-ubyte")).copy()).unsqueeze(1).float() / 255.0
    y = torch.from_numpy(read_idx(find(data, "t10k-labels-idx1-ubyte")).astype("int64"))
    net.eval()
    with torch.no_grad():
        logits = torch.cat([net(x[i:i + 1000]) for i in range(0, len(x), 1000)])
    loss = torch.nn.functional.cross_entropy(logits, y).item()
    accuracy = (logits.argmax(1) == y).float().mean().item()
    print(f'{{"loss": {loss:.6f}, "accuracy": {accuracy:.6f}, "samples": {len(y)}}}')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
