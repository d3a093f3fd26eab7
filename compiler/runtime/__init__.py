"""Runtime: JIT function objects, specialization, caches, launch, autotuning."""
