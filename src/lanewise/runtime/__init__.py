"""Run-time support: the on-disk kernel cache."""
