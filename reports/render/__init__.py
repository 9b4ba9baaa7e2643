"""Rendering a run: ``report.md`` section by section, its tables and its plots; nothing here measures."""
