#!/usr/bin/env python3
"""Reads a run's TensorBoard event files with TensorBoard's own reader.

A format check of what dtrain writes to RUN_DIR/tensorboard: TensorBoard's
EventAccumulator parses every record (it verifies the length and data CRC-32C
checksums) and this prints each scalar tag with its number of points and last
value. Needs the tensorboard Python package (for example in a virtual
environment: python3 -m venv tb && tb/bin/pip install tensorboard).

Usage: read_tensorboard.py RUN_DIR [--expect TAG ...]
"""
import argparse
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--expect", nargs="*", default=["train/loss", "train/accuracy", "train/lr",
                                                         "train/images_per_s", "train/step_time_s",
                                                         "test/loss", "test/accuracy", "test/images_per_s"])
    args = parser.parse_args()
    folder = os.path.join(args.run_dir, "tensorboard")
    if not os.path.isdir(folder):
        sys.exit(f"read_tensorboard: {folder} does not exist; train a job first")
    events = EventAccumulator(folder, size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    tags = sorted(events.Tags()["scalars"])
    for tag in tags:
        points = events.Scalars(tag)
        print(f"{tag:22s} {len(points):6d} points, last step {points[-1].step}, value {points[-1].value:.6g}")
    missing = [t for t in args.expect if t not in tags]
    if missing:
        sys.exit(f"read_tensorboard: missing tags {', '.join(missing)}")


if __name__ == "__main__":
    main()
