"""Rewriting graphs (placeholder; filled below)."""
