"""Batched SGEMM kernels (strided batches): the bgemm ladder."""
