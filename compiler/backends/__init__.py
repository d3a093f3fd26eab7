"""Code generation backends (cpu; GPU backends to come)."""
