"""How long the training loop waits for its next batch: the host time a step spends in the data loader's
``__next__`` (reading, collating and copying a batch that worker processes did not have ready), which no
TrainerCallback can see. Reported per optimizer step: ``loader_wait_ms`` in each training log (over the steps since
the previous one) and ``train_loader_wait_ms`` in the metrics of ``train()`` (over all its steps)."""

import time
from collections.abc import Iterator


class LoaderWait:
    """The time spent in ``next()`` of the batches of each optimizer step it times (one ``perf_counter`` pair a
    batch), per step: since the last ``interval`` and since the last ``whole``."""

    def __init__(self):
        self.seconds = {"interval": 0.0, "whole": 0.0}
        self.steps = {"interval": 0, "whole": 0}

    def timed(self, batches: Iterator) -> Iterator:
        """``batches``, the iterator one optimizer step takes its batches from, each ``next()`` timed."""
        for span in self.steps:
            self.steps[span] += 1
        while True:
            start = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                return
            finally:
                waited = time.perf_counter() - start
                for span in self.seconds:
                    self.seconds[span] += waited
            yield batch

    def report(self, span: str) -> float:
        """Milliseconds waited per optimizer step over ``span`` ("interval" or "whole"), which starts again."""
        seconds, steps = self.seconds[span], self.steps[span]
        self.seconds[span], self.steps[span] = 0.0, 0
        return 1000.0 * seconds / max(steps, 1)
