"""Writes the store benchmark's inputs as .npy files, deterministically.

    python make_data.py OUT_DIR [--records 20000] [--batches 1000]

OUT_DIR/float.npy   (records, 3072) float32: a smooth signal (a sine of random
                    frequency, phase and amplitude) plus a little noise, so the
                    sign/exponent byte repeats and the low mantissa bytes are
                    random: zstd level 3 gives about 1.1x, "mildly compressible".
OUT_DIR/image.npy   (records, 64, 64, 3) uint8: smooth colour gradients with a
                    slow wave and a little noise: zstd level 3 gives about 7x.
OUT_DIR/indices.npy (batches, 256) uint64: uniformly random record indices in
                    0..records from a fixed seed, the gather batches both sides
                    replay in the same order.

Both datasets have 12,288-byte records, the reference README's workload. Both
sides of the comparison read these same bytes.
"""

import argparse
from pathlib import Path

import numpy as np

RECORD_BYTES = 12288
BATCH = 256


def float_data(n, seed=1):
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, RECORD_BYTES // 4)
    out = np.empty((n, RECORD_BYTES // 4), np.float32)
    for start in range(0, n, 1000):
        k = min(1000, n - start)
        freq = rng.uniform(1, 20, size=(k, 1))
        phase = rng.uniform(0, 2 * np.pi, size=(k, 1))
        amp = rng.uniform(0.5, 2.0, size=(k, 1))
        signal = amp * np.sin(2 * np.pi * freq * t + phase)
        out[start:start + k] = signal + 0.01 * rng.standard_normal((k, t.size))
    return out


def image_data(n, seed=2, amp=8.0, noise=0.05):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:64, 0:64].astype(np.float32) / 63.0
    out = np.empty((n, 64, 64, 3), np.uint8)
    for start in range(0, n, 1000):
        k = min(1000, n - start)
        g = rng.uniform(-1, 1, size=(k, 3, 3)).astype(np.float32)
        base = rng.uniform(40, 210, size=(k, 3)).astype(np.float32)
        fx = rng.uniform(0.3, 1.0, size=(k, 1, 1)).astype(np.float32)
        fy = rng.uniform(0.3, 1.0, size=(k, 1, 1)).astype(np.float32)
        ph = rng.uniform(0, 2 * np.pi, size=(k, 1, 1)).astype(np.float32)
        wave = np.sin(2 * np.pi * (fx * x + fy * y) + ph)  # (k, 64, 64)
        img = (base[:, None, None, :]
               + amp * (g[:, None, None, :, 0] * x[None, :, :, None]
                        + g[:, None, None, :, 1] * y[None, :, :, None]
                        + 0.5 * g[:, None, None, :, 2] * wave[..., None]))
        img += noise * rng.standard_normal(img.shape).astype(np.float32)
        out[start:start + k] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--batches", type=int, default=1000)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    f = float_data(args.records)
    assert f[0].nbytes == RECORD_BYTES
    np.save(args.out / "float.npy", f)
    i = image_data(args.records)
    assert i[0].nbytes == RECORD_BYTES
    np.save(args.out / "image.npy", i)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, args.records, size=(args.batches, BATCH), dtype=np.uint64)
    np.save(args.out / "indices.npy", idx)
    print(f"data: {args.records} records of {RECORD_BYTES} B x 2 datasets, "
          f"{args.batches} index batches of {BATCH}, in {args.out}")


if __name__ == "__main__":
    main()
