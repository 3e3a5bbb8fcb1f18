"""Shared fixtures. Each test module builds its own small registry."""

from __future__ import annotations
