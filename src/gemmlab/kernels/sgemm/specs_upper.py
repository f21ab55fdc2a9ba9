"""Placeholder: filled in by its rungs' commit."""
