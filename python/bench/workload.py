"""The reference README's store and loader workload, shared by the Python
benchmarks: 20,000 float32 records of 12,288 bytes and their int64 labels."""

import numpy as np

RECORDS = 20_000  # store and loader workload, as the reference's table
RECORD_FLOATS = 3072  # 12,288 bytes per record
BATCH = 256


def make_data(rng):
    """20,000 records of 3,072 float32: a sine of random frequency and phase
    plus a little noise (mildly compressible, as the reference table's data)."""
    x = np.linspace(0, 1, RECORD_FLOATS, dtype=np.float32)
    f = rng.uniform(1, 20, size=(RECORDS, 1)).astype(np.float32)
    p = rng.uniform(0, 6.283, size=(RECORDS, 1)).astype(np.float32)
    data = np.sin(x[None, :] * f * 6.283 + p).astype(np.float32)
    data += rng.standard_normal(data.shape).astype(np.float32) * np.float32(0.01)
    return data
