"""Baselines (placeholder)."""
