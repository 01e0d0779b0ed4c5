"""The workspace: frozen roots (in memory, lazy, git), branches, commit and apply."""
