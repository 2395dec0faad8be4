"""Readers that turn outside job logs into our task model (adapters: read files)."""
