"""The lazy operation graph: nodes, fusion plan, code generation and execution."""
