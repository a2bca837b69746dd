"""The step: the Trainer subclass, its compiled step, micro-batch, evaluation, checkpoint averaging and tied weights."""
