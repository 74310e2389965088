"""One timing sample, shared by the benchmark and its anchor workers (it imports no
framework: the PyTorch worker runs without TensorFlow)."""
import time

# A sample repeats a call until MIN_SAMPLE_SECONDS have passed, and starts after
# QUIET_SECONDS of idling. A contender's thread pool keeps the cores busy after its last
# call (PyTorch's OpenMP workers spin for about 10 ms, Eigen's for less), so without the
# gap a short sample measured the previous contender's spinning threads as much as the op
# (with the PyTorch worker alongside, our 0.2 ms depthwise C960@7 ran at 0.3-0.7 ms). Every
# contender starts its sample from the same quiet machine; the one cold call is amortised.
MIN_SAMPLE_SECONDS = 0.025
QUIET_SECONDS = 0.03


def sample_seconds(call, copies):
    """Seconds per copy: `call` runs `copies` chained ops; it is repeated back to back
    until MIN_SAMPLE_SECONDS have passed (a single call when one call is that long)."""
    calls, start = 0, time.perf_counter()
    while True:
        call()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_SAMPLE_SECONDS:
            return elapsed / (calls * copies)
