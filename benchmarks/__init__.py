"""lanewise benchmark suite: ``python -m benchmarks.run [--quick] [--only W1,W2]``."""
