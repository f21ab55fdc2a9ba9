"""Seed 002 and 004 SGEMM variants (placeholder until written)."""
