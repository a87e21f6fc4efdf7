"""Helpers the tests share: data writers, process launchers, log capture (never test modules themselves)."""
