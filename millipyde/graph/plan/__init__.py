"""Planning: cut the pending graph into kernels (fusion) and infer the pixels each must read."""
