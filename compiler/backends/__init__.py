"""Code generation backends, one folder per target (cpu, nvidia), each implementing the contract of
contract.py; registry.py picks one by target name. docs/architecture.md follows a kernel through them."""
