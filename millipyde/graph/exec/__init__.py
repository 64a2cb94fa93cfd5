"""Execution: run planned kernels on a device, one output or a batch of outputs at a time."""
